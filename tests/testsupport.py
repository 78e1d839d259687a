"""Helpers shared by the test packages: the test data folder, free ports, subprocesses, a tansu broker,
a loopback HTTP server.

``tests/`` is on ``sys.path`` (pytest inserts the folder of the root ``conftest.py``), so any test module can
``import testsupport``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import asyncpg
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from ragpulse.model import CalibrationProfile

REPO = Path(__file__).resolve().parents[1]

#: Prefixes of the variables that configure ragpulse, the openai client and OpenTelemetry: no test sees the
#: developer's values (tests/conftest.py clears them).
CLEARED_PREFIXES = ("RAGPULSE_", "OPENAI_", "OTEL_")
#: The test-only variables the suite itself reads; they are kept (docs/dev/testing.md).
TEST_VARIABLES = frozenset({"RAGPULSE_SHARED_DIR", "RAGPULSE_TEST_PG_ADMIN_URL"})
#: The PostgreSQL server tests create their private databases on (trust auth).
ADMIN_URL = os.environ.get("RAGPULSE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to completion in a thread of its own (callers may be inside an event loop: an async
    fixture's, Playwright's)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _admin(admin_url: str, sql: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def private_db(admin_url: str = ADMIN_URL) -> Iterator[str]:
    """The URL of a fresh database ``ragpulse_test_<12 hex>`` on the server of ``admin_url`` (default: the
    test server), dropped (``WITH (FORCE)``) afterwards — the one way tests get a private database."""
    name = f"ragpulse_test_{uuid.uuid4().hex[:12]}"
    run_async(_admin(admin_url, f'CREATE DATABASE "{name}"'))
    try:
        yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
    finally:
        run_async(_admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


#: The data sets and ingestion fixtures the tests read, copied into the repository (tests/data/README.md).
TEST_DATA = REPO / "tests" / "data"


#: Where libpq and asyncpg look for a server's socket when a URL names no host.
_SOCKET_DIRS = ("/run/postgresql", "/var/run/postgresql", "/tmp")


def pg_server(url: str) -> tuple[str, int] | str:
    """Where the PostgreSQL server of ``url`` listens: ``(host, port)`` for TCP, else the path of its unix
    socket (``…/.s.PGSQL.<port>``) — for a URL such as ``postgresql://postgres@/db?host=/var/run/postgresql``, a
    percent-encoded socket directory as host, or no host at all."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    hostport = parts.netloc.rpartition("@")[2]
    if hostport.startswith("["):  # an IPv6 address
        host, _, rest = hostport[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = hostport.partition(":")
    host = query.get("host") or unquote(host)
    port = int(query.get("port") or port_text or 5432)
    if host and not host.startswith("/"):
        return host, port
    dirs = (host,) if host else _SOCKET_DIRS
    found = [f"{d}/.s.PGSQL.{port}" for d in dirs if Path(f"{d}/.s.PGSQL.{port}").exists()]
    return found[0] if found else f"{dirs[0]}/.s.PGSQL.{port}"


def pg_url_with(url: str, *, user: str | None = None, tcp: tuple[str, int] | None = None) -> str:
    """``url`` with another ``user`` (no password) and/or pointing at the TCP address ``tcp`` instead of its
    server (its ``host``/``port`` query parameters dropped); database and other parameters kept. For a socket URL
    as for a TCP one: tests derive URLs from the configured one with this, never by writing ``…@localhost``."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if user is not None:
        userinfo, at = user, "@"
    query = parts.query
    if tcp is not None:
        hostport = f"{tcp[0]}:{tcp[1]}"
        query = urlencode([(k, v) for k, v in parse_qsl(query) if k not in ("host", "port")])
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{hostport}", query=query))


def shared_dir() -> Path:
    """The test data folder (``datasets/<set>/``, ``fixtures/``): ``RAGPULSE_SHARED_DIR`` when set (a folder
    laid out the same way, e.g. the shared folder the copies came from), else the copy in the repository,
    ``tests/data``, so a clone anywhere runs every test."""
    env = os.environ.get("RAGPULSE_SHARED_DIR")
    return Path(env) if env else TEST_DATA


async def wait_until(
    cond: Callable[[], bool | Awaitable[bool]],
    timeout_s: float = 10.0,
    what: str = "the condition",
    *,
    interval_s: float = 0.01,
) -> None:
    """Wait (polling every ``interval_s`` seconds, without blocking the event loop) until ``cond()`` is true;
    ``cond`` may be a coroutine function (e.g. a database query: poll it less often).

    Raises:
        TimeoutError: ``cond()`` still false after ``timeout_s`` seconds; the message names ``what``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        got = cond()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(interval_s)


def scripted_judge_env(base_url: str, **extra: str) -> dict[str, str]:
    """The ``RAGPULSE_*`` settings (plus ``extra``) of a ragpulse process whose judge model is the scripted
    OpenAI-compatible server at ``base_url`` (:mod:`ragpulse.testing.openai_server`)."""
    return {
        "RAGPULSE_JUDGE_MODEL": "scripted-judge",
        "RAGPULSE_JUDGE_BASE_URL": base_url,
        "RAGPULSE_JUDGE_API_KEY": "test-key",
        **extra,
    }


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 20.0) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections.

    Raises:
        RuntimeError: ``proc`` exited, or ``timeout`` seconds passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.05)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM ``proc``, SIGKILL it when it has not exited after ``timeout`` seconds, and reap it."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def tansu_broker(binary: str, *, cluster_prefix: str, start_timeout: float = 20.0) -> Iterator[str]:
    """Run a tansu Kafka-protocol broker (memory storage) on a free port; yields its ``host:port``.

    Raises:
        RuntimeError: the broker did not accept connections within ``start_timeout`` seconds.
    """
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/", "--cluster-id", f"{cluster_prefix}-{uuid.uuid4().hex[:8]}",
         "--silent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_port(port, proc, "tansu broker", start_timeout)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) refuses connections when a replay's feeders (16 at once) hit a loaded
    # machine; real RAG endpoints have far larger backlogs.
    request_queue_size = 128


@contextmanager
def serve_http(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` with a ``ThreadingHTTPServer`` on a free loopback port in a thread; yields the base
    URL ``http://127.0.0.1:<port>`` and shuts the server down afterwards."""
    srv = _Server(("127.0.0.1", 0), handler)
    # shutdown() waits for the next poll: 0.05 s instead of the default 0.5 s per server
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


async def pg_count(url: str, sql: str) -> int:
    """The integer result of ``sql`` (a ``SELECT count(*) …``) on the database at ``url``."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


def calibration_profile(
    version: str, *, name: str = "ares", judge: str = "faithfulness"
) -> CalibrationProfile:
    """A calibration profile of ``judge`` at ``version`` with sensitivity = specificity = 0.9 (tp 90, fn 10,
    tn 90, fp 10 of 200 labelled cases): corrected pass rate = (observed − 0.1) / 0.8."""
    return CalibrationProfile(
        name=name, judge=judge, judge_version=version, dataset_sha256="0" * 64, n=200, tp=90, fn=10, tn=90,
        fp=10, sensitivity=0.9, sensitivity_lower=None, sensitivity_upper=None, specificity=0.9,
        specificity_lower=None, specificity_upper=None,
    )  # fmt: skip


async def report_json(store: Any, report: Any) -> dict[str, Any]:
    """The JSON report as ``--json`` writes it (``runs.reports.write_report_json``: case rows and case
    diagnoses read from ``store``), parsed."""
    import io
    import json

    from ragpulse.runs.reports import write_report_json

    out = io.StringIO()
    await write_report_json(store, report, out)
    return dict(json.loads(out.getvalue()))


#: How long one attempt of a Kafka test helper's broker call may take, seconds (aiokafka retries some calls
#: without limit, e.g. ``committed`` while the group coordinator answers with a retriable error).
KAFKA_ATTEMPT_S = 30.0


async def committed(bootstrap: str, group: str, topic: str, partitions: int = 3) -> dict[int, int | None]:
    """Committed offsets of ``group`` on ``topic``, per partition: a fresh consumer's ``committed``
    (OffsetFetch; it does not join the group). An attempt that takes over :data:`KAFKA_ATTEMPT_S` is made again
    with a new client, three times at most, then fails the test naming the group."""
    for attempt in range(3):
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            async with asyncio.timeout(KAFKA_ATTEMPT_S):
                await c.start()
                return {p: await c.committed(TopicPartition(topic, p)) for p in range(partitions)}
        except TimeoutError:
            print(f"committed offsets of {group}: attempt {attempt + 1} timed out after {KAFKA_ATTEMPT_S} s")
        finally:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(10):
                    await c.stop()
    raise AssertionError(f"the broker did not give the committed offsets of group {group} in 3 attempts")
