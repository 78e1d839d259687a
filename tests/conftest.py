"""Fixtures shared by every test package: a private PostgreSQL database per test, the scripted judge server."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import asyncpg
import pytest

from ragpulse.testing.openai_server import ScriptedOpenAIServer

#: Server for tests (the machine's PostgreSQL, trust auth). Override with RAGPULSE_TEST_PG_ADMIN_URL.
ADMIN_URL = os.environ.get("RAGPULSE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def _create_db(name: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def _drop_db(name: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def _url_for(name: str) -> str:
    base, _, _ = ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


def _private_db() -> Iterator[str]:
    name = f"ragpulse_test_{uuid.uuid4().hex[:12]}"
    _run(_create_db(name))
    try:
        yield _url_for(name)
    finally:
        _run(_drop_db(name))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """URL of a fresh, empty database on the test PostgreSQL server, dropped after the test."""
    yield from _private_db()


@pytest.fixture(scope="session")
def pg_url_session() -> Iterator[str]:
    """Like :func:`pg_url` but shared by a whole test session (tests must not depend on emptiness)."""
    yield from _private_db()


@pytest.fixture(scope="session")
def _openai_server_session() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def openai_server(_openai_server_session: ScriptedOpenAIServer) -> Iterator[ScriptedOpenAIServer]:
    """The scripted OpenAI-compatible judge server (one per session), emptied (no queued replies, rules,
    schedule, embeddings or records) for each test."""
    _openai_server_session.reset()
    yield _openai_server_session
    _openai_server_session.reset()
