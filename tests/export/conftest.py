"""Fixtures for export tests: the process-wide metrics pipeline and fresh app-label folding per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragpulse import telemetry
from ragpulse.config import Settings
from ragpulse.export import install_metrics
from ragpulse.export.otel_setup import MetricsRuntime


@pytest.fixture
def metrics_runtime() -> Iterator[MetricsRuntime]:
    """The installed metrics pipeline, with the ``app`` label folding reset to a limit of 50."""
    rt = install_metrics(Settings(export_metrics_app_label_limit=50).export)
    telemetry.configure_app_label_limit(50)
    yield rt
    telemetry.configure_app_label_limit(50)
