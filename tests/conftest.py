"""Fixtures shared by every test package: a private PostgreSQL database per test, the scripted judge server."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from ragpulse.testing.openai_server import ScriptedOpenAIServer
from testsupport import CLEARED_PREFIXES, TEST_VARIABLES, private_db

#: Fixtures that start or need an outside service (PostgreSQL, embedded PostgreSQL, the tansu Kafka broker,
#: promtool/Prometheus, a browser): a test using any of them, directly or through another fixture, is marked
#: ``integration``. Tests that need such a service without a fixture carry the marker themselves.
INTEGRATION_FIXTURES = frozenset(
    {
        "pg_url",
        "pg_url_session",
        "store_url",
        "embedded_settings",
        "kafka_bootstrap",
        "promtool",
        "prometheus_bin",
        "portal",
        "browser",
    }
)


def _shell_settings() -> list[str]:
    return [k for k in os.environ if k.startswith(CLEARED_PREFIXES) and k not in TEST_VARIABLES]


#: A test still running after this many seconds gets its asyncio tasks' stacks written (:func:`_hang_watchdog`;
#: environment variable ``PYTEST_HANG_DUMP_S``).
HANG_DUMP_S = float(os.environ.get("PYTEST_HANG_DUMP_S", "300"))


def _dump_asyncio_tasks(signum: int, frame: FrameType | None) -> None:
    """``kill -USR1 <pytest pid>``: write the stack of every task of the running event loop to stderr (shown
    with the test's report if it then fails, e.g. by pytest-timeout) and to
    ``$TMPDIR/pytest-asyncio-tasks-<pid>.txt`` (readable while it hangs). This is where an async test waits:
    ``py-spy dump`` shows only the loop's ``select``."""
    buf = io.StringIO()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        buf.write("no running event loop\n")
    else:
        for task in asyncio.all_tasks(loop):
            buf.write(f"--- {task!r}\n")
            task.print_stack(file=buf)
    text = f"=== asyncio tasks at {time.strftime('%H:%M:%S')}\n{buf.getvalue()}"
    with contextlib.suppress(Exception):  # e.g. a reentrant write: the signal came mid-write to stderr
        sys.stderr.write(text)
        sys.stderr.flush()
    path = Path(tempfile.gettempdir()) / f"pytest-asyncio-tasks-{os.getpid()}.txt"
    with path.open("a", encoding="utf-8") as out:
        out.write(text)


@pytest.fixture(autouse=True)
def _hang_watchdog() -> Iterator[None]:
    """After :data:`HANG_DUMP_S` seconds of one test, write its asyncio tasks (:func:`_dump_asyncio_tasks`)."""
    timer = threading.Timer(HANG_DUMP_S, os.kill, (os.getpid(), signal.SIGUSR1))
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()


def pytest_configure(config: pytest.Config) -> None:
    """Clear the shell's settings once for the whole process, before collection and session fixtures (servers
    and brokers started for a whole session inherit the clean environment); ``SIGUSR1`` prints the asyncio
    tasks (:func:`_dump_asyncio_tasks`)."""
    for key in _shell_settings():
        del os.environ[key]
    signal.signal(signal.SIGUSR1, _dump_asyncio_tasks)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses an :data:`INTEGRATION_FIXTURES` fixture as ``integration``, so
    ``pytest -m "not integration"`` is the fast lane (docs/dev/testing.md). Nothing is deselected by default."""
    for item in items:
        if INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest) -> None:
    """A test that is not marked ``integration`` but reaches an :data:`INTEGRATION_FIXTURES` fixture at run time
    (``request.getfixturevalue``, which :func:`pytest_collection_modifyitems` cannot see) fails at once, naming
    the fixture: the fast lane never needs PostgreSQL, Kafka or a browser. Only function-scoped requests are
    checked (a wider fixture's request belongs to no single test)."""
    item = request.node
    if (
        fixturedef.argname in INTEGRATION_FIXTURES
        and isinstance(item, pytest.Item)
        and item.get_closest_marker("integration") is None
    ):
        pytest.fail(
            f"{item.nodeid} uses the integration fixture {fixturedef.argname!r} without the integration "
            "marker: mark it (pytest.param(..., marks=pytest.mark.integration) for one case)",
            pytrace=False,
        )


@pytest.fixture
def promtool() -> str:
    """Path of ``promtool`` (Debian package ``prometheus``); the test is skipped without it."""
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    return found


@pytest.fixture
def prometheus_bin() -> str:
    """Path of the ``prometheus`` server binary; the test is skipped without it."""
    found = shutil.which("prometheus")
    if found is None:
        pytest.skip("prometheus not installed (Debian package prometheus)")
    return found


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test (and every CLI subprocess it starts with the inherited environment) runs without
    ``RAGPULSE_*``, ``OPENAI_*`` and ``OTEL_*`` settings, except :data:`TEST_VARIABLES`; a test that needs one
    sets it with ``monkeypatch.setenv`` (undone after the test)."""
    for key in _shell_settings():
        monkeypatch.delenv(key)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """URL of a fresh, empty database on the test PostgreSQL server, dropped after the test."""
    with private_db() as url:
        yield url


@pytest.fixture(scope="session")
def pg_url_session() -> Iterator[str]:
    """Like :func:`pg_url` but shared by a whole test session (tests must not depend on emptiness)."""
    with private_db() as url:
        yield url


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
