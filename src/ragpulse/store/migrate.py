"""Versioned schema migrations for the PostgreSQL store.

Migrations are plain SQL files shipped as package data in ``ragpulse/store/migrations/``, named
``NNN_name.sql`` (``NNN`` = integer version, applied in ascending order). Applied versions are recorded in the
table ``schema_migrations`` (version, name, sha256 checksum of the file, applied_at).

Concurrency: the whole run holds a session-level ``pg_advisory_lock`` on a fixed key, so two replicas starting
at once never race; the second waits, then finds nothing left to apply. Each migration runs in its own
transaction together with its ``schema_migrations`` row, so a failing migration leaves no half-applied schema.
Works on PostgreSQL 14 and later (only core features are used).

Why a tiny runner instead of a library: the asyncpg-native candidates on PyPI (``asyncpg-trek``,
``pogo-migrate``, ``asyncpg-migrate``) are small single-maintainer projects built around their own CLI/config
layouts or up/down planning we do not need, and none takes an advisory lock; ``yoyo-migrations`` and ``alembic``
need a second, synchronous driver (psycopg/SQLAlchemy). Forward-only plain-SQL migrations under an advisory lock
are ~60 lines here and keep one driver (asyncpg).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from ragpulse.logging import get_logger

#: A plain or pooled asyncpg connection.
Conn: TypeAlias = "asyncpg.Connection[Any] | PoolConnectionProxy[Any]"

__all__ = ["MIGRATION_LOCK_KEY", "MIGRATION_TIMEOUT_S", "Conn", "Migration", "load_migrations", "migrate"]

#: Longest a migration (or the wait for another replica's) may take, seconds: far above the store's per-statement
#: ``command_timeout_s``, because a migration may build an index over every stored trace (migration 170 takes
#: about a minute per 3 million traces on a busy 2-core machine).
MIGRATION_TIMEOUT_S = 6 * 3600.0

#: Key of the session advisory lock held while migrating (arbitrary constant, unique to ragpulse).
MIGRATION_LOCK_KEY = 0x7261_6770_756C_7365 & 0x7FFF_FFFF_FFFF_FFFF  # "ragpulse"

_NAME_RE = re.compile(r"^(\d+)_([A-Za-z0-9_]+)\.sql$")
_log = get_logger(__name__)


@dataclass(frozen=True)
class Migration:
    """One migration file: ``version`` (from the ``NNN`` prefix), ``name``, SQL text and its sha256 checksum."""

    version: int
    name: str
    sql: str
    checksum: str


def load_migrations() -> list[Migration]:
    """Read the packaged migration files, sorted by version.

    Raises:
        RuntimeError: two files share a version (a packaging mistake).
    """
    out: dict[int, Migration] = {}
    folder = resources.files("ragpulse.store").joinpath("migrations")
    for entry in folder.iterdir():
        m = _NAME_RE.match(entry.name)
        if not m:
            continue
        version = int(m.group(1))
        if version in out:
            raise RuntimeError(f"duplicate migration version {version}: {entry.name}")
        sql = entry.read_text(encoding="utf-8")
        out[version] = Migration(version, m.group(2), sql, hashlib.sha256(sql.encode()).hexdigest())
    return [out[v] for v in sorted(out)]


async def migrate(conn: Conn) -> list[int]:
    """Apply every pending migration on ``conn``; return the versions applied now (``[]`` if up to date).

    Holds ``pg_advisory_lock(MIGRATION_LOCK_KEY)`` for the duration (waits for another migrating replica).
    Waiting for the lock and each migration may take up to :data:`MIGRATION_TIMEOUT_S`, whatever the
    connection's ``command_timeout``.
    A migration already applied with a different checksum is logged as a warning, not re-applied.

    Raises:
        asyncpg.PostgresError / OSError: the database failed; the failing migration was rolled back.
    """
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY, timeout=MIGRATION_TIMEOUT_S)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version     integer PRIMARY KEY,
                   name        text NOT NULL,
                   checksum    text NOT NULL,
                   applied_at  timestamptz NOT NULL DEFAULT now())"""
        )
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
        applied = {int(r["version"]): str(r["checksum"]) for r in rows}
        done: list[int] = []
        for mig in load_migrations():
            if mig.version in applied:
                if applied[mig.version] != mig.checksum:
                    _log.warning("migration_checksum_mismatch", version=mig.version, name=mig.name)
                continue
            async with conn.transaction():
                await conn.execute(mig.sql, timeout=MIGRATION_TIMEOUT_S)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    mig.version,
                    mig.name,
                    mig.checksum,
                )
            _log.info("migration_applied", version=mig.version, name=mig.name)
            done.append(mig.version)
        newer = sorted(v for v in applied if v not in {m.version for m in load_migrations()})
        if newer:
            _log.warning("schema_newer_than_code", unknown_versions=newer)
        return done
    finally:
        if not conn.is_closed():
            # a failed unlock is harmless: the session's end releases the lock
            with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
