"""Translate asyncpg/OS errors into :class:`~ragpulse.errors.StoreError` with the right ``retriable`` flag.

Retriable (the same call may succeed later): lost or refused connections (SQLSTATE class 08, ``OSError``),
a connection whose protocol state broke (asyncpg's :class:`~asyncpg.InterfaceError` — "connection is closed",
"another operation is in progress", "cannot call Transaction.__aexit__()" — and
:class:`~asyncpg.exceptions.InternalClientError`, e.g. "cannot switch to state 15", both seen when a database
outage cut a write; :func:`is_connection_error`), timeouts (``TimeoutError``, 57014 statement timeout),
server shutdown/start-up (class 57: ``AdminShutdownError``, ``CannotConnectNowError``), transaction conflicts
(class 40: serialization failure, deadlock), resource exhaustion (class 53: too many connections, disk full)
and system errors (class 58). Everything else (bad data, constraint violations, SQL errors) is not retriable.
"""

from __future__ import annotations

import asyncio

import asyncpg

from ragpulse.errors import StoreError

__all__ = ["is_connection_error", "is_retriable", "to_store_error"]

_RETRIABLE_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})
#: asyncpg interface errors about the caller's data or setup, not the connection: retrying cannot help
#: (``_base.DataError`` is the client-side "invalid input for query argument", exported nowhere else).
_NOT_CONNECTION = (
    asyncpg.exceptions._base.DataError,
    asyncpg.exceptions.ClientConfigurationError,
    asyncpg.exceptions.UnsupportedClientFeatureError,
    asyncpg.exceptions.UnsupportedServerFeatureError,
)
#: Messages of plain asyncpg interface errors about the query's arguments (a bug, the same on any connection).
_MISUSE_HINTS = ("the server expects", "query argument")


def is_connection_error(exc: BaseException) -> bool:
    """True when ``exc`` says the connection (socket or client protocol state) is unusable, whatever class
    carries it: ``OSError``/``ConnectionError``, ``TimeoutError``, SQLSTATE class 08, asyncpg's
    :class:`~asyncpg.InterfaceError` (except data, configuration and argument-count errors) and
    :class:`~asyncpg.exceptions.InternalClientError`. Such a connection is discarded, never given back to
    the pool, and the whole operation is retried on a fresh one."""
    if isinstance(exc, asyncpg.PostgresError):
        return (getattr(exc, "sqlstate", None) or "")[:2] == "08"
    if isinstance(exc, _NOT_CONNECTION):
        return False
    if isinstance(exc, asyncpg.InterfaceError) and any(h in str(exc) for h in _MISUSE_HINTS):
        return False
    return isinstance(
        exc,
        (
            TimeoutError,
            asyncio.TimeoutError,
            OSError,
            ConnectionError,
            asyncpg.InterfaceError,
            asyncpg.exceptions.InternalClientError,
        ),
    )


def is_retriable(exc: BaseException) -> bool:
    """True when ``exc`` is transient (connection loss, timeout, shutdown, conflict); see the module doc."""
    if isinstance(exc, StoreError):
        return exc.retriable
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", None) or ""
        return state[:2] in _RETRIABLE_SQLSTATE_CLASSES
    return is_connection_error(exc)


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
