"""``ragpulse serve``: the long-running sidecar (:mod:`ragpulse.sidecar.serve`) with the portal.

Exit codes (through the CLI's error boundary): 0 after a clean stop, 2 for a configuration error (bad setting,
an address that cannot be bound), 3 when the database or the Kafka brokers cannot be reached at start-up or a
source died while serving (:class:`~ragpulse.errors.SourceFailedError`, so an orchestrator restarts it).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import Any

import typer

from ragpulse.cli import _common, app
from ragpulse.errors import RagpulseError
from ragpulse.logging import get_logger

__all__ = ["serve"]


def _log() -> Any:
    # Resolved at call time: the CLI configures logging after this module is imported.
    return get_logger("ragpulse.serve")


#: Seconds past ``engine.shutdown_deadline_s`` that closing the store, the clients and the exporters may take
#: before the process is ended anyway (:func:`_exit_guard`).
EXIT_GRACE_S = 5.0


def _exit_guard(settings: Any) -> Any:
    """A callback for ``run_serve(on_stopping=…)``: from the stop on, the process has
    ``engine.shutdown_deadline_s`` + :data:`EXIT_GRACE_S` seconds to end. A judge busy in a worker thread (a
    CPU-bound offline judge on a huge text) cannot be interrupted, and Python waits for such threads at exit;
    past that time a daemon timer logs ``shutdown_deadline_exceeded`` and ends the process (``os._exit``, exit
    code 3: what was not stored is redelivered — Kafka offsets were not committed, OTLP traces are journalled)."""
    limit = settings.engine.shutdown_deadline_s + EXIT_GRACE_S

    def hard_exit() -> None:
        _log().error("shutdown_deadline_exceeded", limit_s=limit, threads=threading.active_count())
        sys.stderr.flush()
        os._exit(3)

    def arm() -> None:
        timer = threading.Timer(limit, hard_exit)
        timer.daemon = True
        timer.start()

    return arm


@app.command()
def serve() -> None:
    """Run the online evaluation sidecar: OTLP receivers, Kafka consumer, engine, store, /healthz /readyz /metrics."""
    from ragpulse.export import shutdown_metrics
    from ragpulse.portal.server import open_portal
    from ragpulse.sidecar.serve import run_serve

    settings = _common.settings(service=True)
    try:
        asyncio.run(run_serve(settings, portal=open_portal, on_stopping=_exit_guard(settings)))
    except RagpulseError as e:
        _log().error("serve_failed", error=str(e))
        raise  # one line and the exit code at the CLI's error boundary
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    finally:
        shutdown_metrics()  # the process ends: stop the meter provider (flushes OTLP metrics)
