"""The ``ragpulse`` command line (typer).

Each sub-command lives in its own module of this package and registers itself on :data:`app`; this module
only wires them together. Command modules are thin adapters (parse arguments → call a
:mod:`ragpulse.runs` / :mod:`ragpulse.calibration` / :mod:`ragpulse.sidecar` function → render) and never import each other; what they share is in
:mod:`ragpulse.cli._common` and :mod:`ragpulse.cli._render`. Every error is turned into one line and an exit
code at one place, :class:`ragpulse.cli._common.BoundaryGroup` (0 ok, 1 threshold breached, 2 usage/config/input
error, 3 runtime failure, 130/143 interrupted; see ``docs/cli.md``).
"""

from __future__ import annotations

import os

import typer

from ragpulse.cli import _common

app = typer.Typer(
    name="ragpulse",
    cls=_common.BoundaryGroup,
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

    for mod in (
        "replay_cmd",
        "runs_cmd",
        "serve_cmd",
        "calibrate_cmd",
        "gate_cmd",
        "send_cmd",
        "db_cmd",
        "judges_cmd",
    ):
        try:
            importlib.import_module(f"ragpulse.cli.{mod}")
        except ModuleNotFoundError as e:
            if e.name != f"ragpulse.cli.{mod}":
                raise


_register()


def main() -> None:
    """Console-script entry point (SIGTERM is handled like SIGINT, see
    :func:`ragpulse.cli._common.handle_sigterm_like_sigint`)."""
    # gRPC's fork handlers print a plain-text line ("fork_posix.cc … skipping fork() handlers") to stderr when
    # a subprocess starts beside its threads (the embedded PostgreSQL's pg_ctl at shutdown), breaking the
    # one-JSON-object-per-line log; no child process of ragpulse uses gRPC. Read when grpc is first imported.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    _common.handle_sigterm_like_sigint()
    _common.STATE.whole_process = True
    app()
