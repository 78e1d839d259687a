"""Helpers for the OTLP tests: fixture location, an in-memory TraceSink, span grouping."""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import Trace
from ragpulse.protocols import AckCallback

REPO = Path(__file__).resolve().parents[2]


def fixtures_dir() -> Path:
    """``<shared>/fixtures``: ``RAGPULSE_SHARED_DIR`` or the sibling ``shared/`` of the repository; skip if absent."""
    env = os.environ.get("RAGPULSE_SHARED_DIR")
    d = (Path(env) if env else REPO / ".." / "shared") / "fixtures"
    if not (d / "expected-records.json").is_file():
        pytest.skip(f"shared fixtures not found at {d}")
    return d


def expected_records() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((fixtures_dir() / "expected-records.json").read_text("utf-8"))
    return data


class MemorySink:
    """A TraceSink that keeps submitted traces in a list."""

    def __init__(self) -> None:
        self.traces: list[Trace] = []
        self._changed = asyncio.Event()

    async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None:
        self.traces.append(trace)
        self._changed.set()

    def has_room(self) -> bool:
        return True

    def by_id(self) -> dict[str, Trace]:
        return {t.trace_id: t for t in self.traces}

    async def wait_for(self, n: int, timeout: float = 10.0) -> list[Trace]:  # noqa: ASYNC109
        """Wait until at least ``n`` traces arrived; fail after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            while len(self.traces) < n:
                self._changed.clear()
                await self._changed.wait()
        return self.traces


def group(spans: list[SpanData]) -> dict[str, list[SpanData]]:
    out: dict[str, list[SpanData]] = defaultdict(list)
    for s in spans:
        out[s.trace_id].append(s)
    return out


class FakeClock:
    """Monotonic clock advanced by hand."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt
