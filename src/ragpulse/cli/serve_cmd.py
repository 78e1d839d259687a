"""``ragpulse serve``: the long-running sidecar (:mod:`ragpulse.services.serve`) with the portal.

Exit codes (through the CLI's error boundary): 0 after a clean stop, 2 for a configuration error (bad setting,
an address that cannot be bound), 3 when the database or the Kafka brokers cannot be reached at start-up or a
source died while serving (:class:`~ragpulse.errors.SourceFailedError`, so an orchestrator restarts it).
"""

from __future__ import annotations

import asyncio
from typing import Any

import typer

from ragpulse.cli import _common, app
from ragpulse.errors import RagpulseError
from ragpulse.logging import get_logger

__all__ = ["serve"]


def _log() -> Any:
    # Resolved at call time: the CLI configures logging after this module is imported.
    return get_logger("ragpulse.serve")


@app.command()
def serve() -> None:
    """Run the online evaluation sidecar: OTLP receivers, Kafka consumer, engine, store, /healthz /readyz /metrics."""
    from ragpulse.api.server import open_portal
    from ragpulse.export import shutdown_metrics
    from ragpulse.services.serve import run_serve

    settings = _common.settings(service=True)
    try:
        asyncio.run(run_serve(settings, portal=open_portal))
    except RagpulseError as e:
        _log().error("serve_failed", error=str(e))
        raise  # one line and the exit code at the CLI's error boundary
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    finally:
        shutdown_metrics()  # the process ends: stop the meter provider (flushes OTLP metrics)
