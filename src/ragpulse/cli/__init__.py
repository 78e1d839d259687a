"""The ``ragpulse`` command line (typer).

Each sub-command lives in its own module of this package and registers itself on :data:`app`; this module
only wires them together. Exit codes: 0 success, 1 a quality threshold was breached, 2 usage/config error.
"""

from __future__ import annotations

import typer

from ragpulse.cli import _common

app = typer.Typer(
    name="ragpulse",
    help="Online evaluation sidecar for RAG services: judge traces, store judgements, export scores.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    config: str | None = typer.Option(
        None, "--config", "-c", envvar="RAGPULSE_CONFIG", help="YAML config file."
    ),
    log_level: str | None = typer.Option(None, "--log-level", help="DEBUG, INFO, WARNING or ERROR."),
) -> None:
    """ragpulse command line."""
    _common.STATE.config_path = config
    _common.STATE.log_level = log_level


@app.command()
def version() -> None:
    """Print the ragpulse version."""
    from ragpulse import __version__

    typer.echo(__version__)


def _register() -> None:
    # Sub-command modules register their commands on import.
    import importlib

    for mod in ("replay_cmd", "runs_cmd", "serve_cmd", "calibrate_cmd", "gate_cmd", "send_cmd", "db_cmd"):
        try:
            importlib.import_module(f"ragpulse.cli.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"ragpulse.cli.{mod}":
                raise


_register()


def main() -> None:
    """Console-script entry point."""
    app()
