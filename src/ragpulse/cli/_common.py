"""State and helpers shared by CLI commands: settings loading, logging set-up, the store, and the one error
boundary that maps every error to a one-line message and an exit code.

Exit codes (documented in ``docs/cli.md``):

====  ========================================================================================================
0     done
1     a quality threshold or the gate was breached
2     usage, configuration or input error: bad option, config file or environment value, bad test-set file or
      line, unknown metric or judge in a threshold, unknown run / trace / test set
3     runtime failure: database or judge model unreachable, a source loop died, every judgement of a run is an
      error, an unexpected internal error
130   interrupted (SIGINT, Ctrl-C); 143 terminated (SIGTERM)
141   standard output closed early (``ragpulse … | head``): quietly, no error line — as a Unix tool killed by
      SIGPIPE (128 + 13)
====  ========================================================================================================
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup

from ragpulse.config import Settings, check_environment, load_settings
from ragpulse.errors import (
    ConfigError,
    ExportError,
    IngestError,
    NotFoundError,
    RagpulseError,
    StoreError,
)
from ragpulse.logging import configure_logging, get_logger
from ragpulse.protocols import Store

__all__ = [
    "EXIT_BREACHED",
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_RUNTIME",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "STATE",
    "BoundaryGroup",
    "exit_code_for",
    "fail",
    "handle_sigterm_like_sigint",
    "open_cli_store",
    "run_with_store",
    "settings",
]

EXIT_OK = 0
EXIT_BREACHED = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
EXIT_TERMINATED = 143

_T = TypeVar("_T")


@dataclass
class _State:
    config_path: str | None = None
    log_level: str | None = None
    #: set by the SIGTERM handler: the KeyboardInterrupt that follows means "terminated" (143), not 130
    terminated: bool = False
    #: set by the console-script entry point (:func:`ragpulse.cli.main`): the process is this command's alone
    #: and ends with it, so it may tune process-wide things (``gc.freeze``); not under an in-process test runner
    whole_process: bool = False


STATE = _State()


def _one_line(text: str) -> str:
    """Collapse a multi-line message (e.g. a config validation listing) into one line."""
    return "; ".join(part.strip() for part in text.splitlines() if part.strip()).replace(":;", ":")


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    STATE.terminated = True
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        # asyncio.run's own SIGINT handler: cancels the main task (so a replay marks its run failed and closes
        # the store), then asyncio.run raises KeyboardInterrupt
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt


def handle_sigterm_like_sigint() -> None:
    """Make SIGTERM (what a CI timeout or ``kill`` sends) do what Ctrl-C does: the running command is
    interrupted cleanly — a replay marks its run ``failed``, stores are closed, exit hooks run (the embedded
    PostgreSQL is stopped by its last user) — and the process exits 143 with ``error: terminated (SIGTERM)``.
    ``serve`` installs its own graceful-drain handlers while it runs. Main thread only."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def exit_code_for(e: BaseException) -> int:
    """The exit code of an error that reached the boundary (see the module docstring)."""
    if isinstance(e, BrokenPipeError):
        return EXIT_BROKEN_PIPE
    if isinstance(e, KeyboardInterrupt):
        return EXIT_TERMINATED if STATE.terminated else EXIT_INTERRUPTED
    if isinstance(e, ConfigError | NotFoundError | ExportError):
        return EXIT_USAGE
    if isinstance(e, IngestError):
        return EXIT_RUNTIME if e.retriable else EXIT_USAGE
    return EXIT_RUNTIME


def _message(e: BaseException) -> str:
    if isinstance(e, KeyboardInterrupt):
        return "terminated (SIGTERM)" if STATE.terminated else "interrupted"
    text = _one_line(str(e)) or type(e).__name__
    if isinstance(e, StoreError):
        return f"store: {text}"
    if isinstance(e, RagpulseError):
        return text
    return f"unexpected {type(e).__name__}: {text} (run with --log-level DEBUG for details)"


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what is still buffered does not fail
    on the closed pipe too ("Exception ignored … BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (e.g. under a test runner): nothing to flush at exit
        pass


def _quiet_exit_on_broken_pipe(e: BrokenPipeError | SystemExit) -> BaseException:
    """What to raise for ``e``: ``Exit(141)`` with stdout silenced when the pipe broke — a ``BrokenPipeError``,
    or rich's ``SystemExit(1)`` raised while handling one (rich's console on a closed pipe) — else ``e``."""
    if isinstance(e, SystemExit) and not isinstance(e.__context__, BrokenPipeError):
        return e
    _silence_stdout()
    return typer.Exit(EXIT_BROKEN_PIPE)


def _print_error(message: str) -> None:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)


class BoundaryGroup(TyperGroup):
    """The root command group: every command runs inside :meth:`invoke`, which turns any error into one
    ``error: …`` line on stderr and the exit code of :func:`exit_code_for` — no traceback."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:  # `ragpulse --help | head` ends here
        try:
            return super().make_context(*args, **kwargs)
        except (BrokenPipeError, SystemExit) as e:
            raise _quiet_exit_on_broken_pipe(e) from None

    def invoke(self, ctx: Any) -> Any:  # ctx: typer's (vendored) click Context, which typer does not export
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # exits and usage errors: typer handles them
            raise
        except (BrokenPipeError, SystemExit) as e:  # the reader went away (`| head`): quietly, as a Unix tool
            raise _quiet_exit_on_broken_pipe(e) from None
        except (Exception, KeyboardInterrupt) as e:
            if (STATE.log_level or "").upper() == "DEBUG":  # asked for: the traceback, in the logs
                get_logger("ragpulse.cli").exception("command_failed")
            _print_error(_message(e))
            raise typer.Exit(exit_code_for(e)) from None


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``message`` as the one error line and return an ``Exit`` to raise (``raise fail(...)``)."""
    _print_error(_one_line(message))
    return typer.Exit(code)


def settings(*, service: bool = False, **overrides: Any) -> Settings:
    """Load settings (config file + env + overrides) and configure logging.

    One-shot commands (``service=False``) log at WARNING unless a level was set (``--log-level``,
    ``RAGPULSE_LOG_LEVEL`` or the config file), so their report is not buried in progress lines; ``serve``
    logs at the configured level (INFO by default). An unknown ``RAGPULSE_*`` environment variable (a typo)
    is an error naming the closest known one (:func:`~ragpulse.config.check_environment`).

    Raises:
        ConfigError: a bad config file or environment value, or an unknown ``RAGPULSE_*`` variable (exit 2 at
            the boundary).
    """
    check_environment()
    if STATE.log_level is not None:  # --log-level wins over RAGPULSE_LOG_LEVEL and is validated like it
        overrides = {"log_level": STATE.log_level, **overrides}
    s = load_settings(STATE.config_path, **overrides)
    level = s.log.level if service or "level" in s.log.model_fields_set else "WARNING"
    configure_logging(level, json=s.log.json_)
    return s


@asynccontextmanager
async def open_cli_store(settings: Settings) -> AsyncIterator[Store]:
    """The configured store (``RAGPULSE_STORE_DATABASE_URL`` or the embedded PostgreSQL), typed as the
    :class:`~ragpulse.protocols.Store` protocol.

    Raises:
        StoreError: it cannot be opened (exit 3 at the boundary).
    """
    from ragpulse.store import open_store

    async with open_store(settings.store) as store:
        yield store


def run_with_store(settings: Settings, fn: Callable[[Store], Awaitable[_T]]) -> _T:
    """Open the store, run ``fn(store)`` in a fresh event loop, close the store, and return the result."""

    async def main() -> _T:
        async with open_cli_store(settings) as store:
            return await fn(store)

    return asyncio.run(main())
