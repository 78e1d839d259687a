"""Translate asyncpg/OS errors into :class:`~ragpulse.errors.StoreError` with the right ``retriable`` flag.

Retriable (the same call may succeed later): lost or refused connections (SQLSTATE class 08, ``OSError``,
asyncpg's "connection is closed" interface errors), timeouts (``TimeoutError``, 57014 statement timeout),
server shutdown/start-up (class 57: ``AdminShutdownError``, ``CannotConnectNowError``), transaction conflicts
(class 40: serialization failure, deadlock), resource exhaustion (class 53: too many connections, disk full)
and system errors (class 58). Everything else (bad data, constraint violations, SQL errors) is not retriable.
"""

from __future__ import annotations

import asyncio

import asyncpg

from ragpulse.errors import StoreError

__all__ = ["is_retriable", "to_store_error"]

_RETRIABLE_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})
_CLOSED_HINTS = ("connection is closed", "connection was closed", "pool is closing", "pool is closed")


def is_retriable(exc: BaseException) -> bool:
    """True when ``exc`` is transient (connection loss, timeout, shutdown, conflict); see the module doc."""
    if isinstance(exc, StoreError):
        return exc.retriable
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", None) or ""
        return state[:2] in _RETRIABLE_SQLSTATE_CLASSES
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, OSError, ConnectionError)):
        return True
    if isinstance(exc, asyncpg.InterfaceError):
        msg = str(exc).lower()
        return any(h in msg for h in _CLOSED_HINTS)
    return False


def to_store_error(exc: BaseException, action: str) -> StoreError:
    """Wrap ``exc`` as ``StoreError("<action> failed: <type>: <message>")`` with ``retriable`` set.

    The caller raises it ``from exc``. Messages never include row values (SQL errors may echo data, so only
    the error type and PostgreSQL's primary message are kept, cut to 300 characters).
    """
    if isinstance(exc, StoreError):
        return exc
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return StoreError(
        f"{action} failed: {type(exc).__name__}: {msg[:300]}",
        retriable=is_retriable(exc),
    )
