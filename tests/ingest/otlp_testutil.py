"""Helpers for the OTLP tests: fixture location, an in-memory TraceSink, span grouping."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import Source, Trace
from ragpulse.protocols import AckCallback
from testsupport import shared_dir

REPO = Path(__file__).resolve().parents[2]


def fixtures_dir() -> Path:
    """The ingestion fixtures: ``tests/data/fixtures`` (or ``fixtures/`` of ``RAGPULSE_SHARED_DIR``)."""
    return shared_dir() / "fixtures"


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


def fixture_doc_contents(name: str, trace_id: str) -> list[str]:
    """Document contents straight from the fixture JSON, in rank order, for each convention's encoding."""
    doc = json.loads((fixtures_dir() / name).read_text("utf-8"))
    out: list[str] = []
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                if sp["traceId"].lower() != trace_id:
                    continue
                attrs = {a["key"]: a["value"] for a in sp.get("attributes", [])}
                i = 0
                while f"retrieval.documents.{i}.document.content" in attrs:
                    out.append(attrs[f"retrieval.documents.{i}.document.content"]["stringValue"])
                    i += 1
                docs = attrs.get("gen_ai.retrieval.documents")
                for v in (docs or {}).get("arrayValue", {}).get("values", []):
                    kv = {x["key"]: x["value"] for x in v["kvlistValue"]["values"]}
                    out.append(kv["content"]["stringValue"])
                for ev in sp.get("events", []):
                    if ev["name"] == "db.query.result":
                        ea = {a["key"]: a["value"] for a in ev["attributes"]}
                        out.append(ea["db.query.result.document"]["stringValue"])
    return out


def check_record(trace: Trace, rec: dict[str, Any], name: str, *, assembled: bool = True) -> None:
    """Assert ``trace`` matches the oracle record ``rec`` of fixture ``name`` (question, doc ids, scores and
    contents in rank order, answer, model, app/scenario, session, latency, convention) and, when the trace
    went through the assembler (``assembled``), its completeness."""
    assert trace.trace_id == rec["traceId"]
    assert trace.source is Source.OTLP
    assert trace.question == rec["question"]
    assert trace.doc_ids == rec["docIds"]
    assert [d.score for d in trace.documents] == rec["docScores"]
    assert [d.rank for d in trace.documents] == list(range(len(rec["docIds"])))
    assert trace.answer == rec["answer"]
    assert trace.model == rec["model"]
    assert trace.app == rec["app"]
    assert trace.scenario == rec["scenario"]
    assert trace.session_id == rec["sessionId"]  # the typed field (issue 28), no longer an attribute
    assert "session_id" not in trace.attributes
    if rec["latencyMs"] is None:
        assert trace.latency_s is None
    else:
        assert trace.latency_s == pytest.approx(rec["latencyMs"] / 1000, abs=1e-9)
    expected_contexts = fixture_doc_contents(name, rec["traceId"])
    assert len(expected_contexts) == len(rec["docIds"])
    assert trace.contexts == expected_contexts
    assert rec["convention"] in trace.attributes["conventions"]
    if assembled:
        assert trace.incomplete is not rec["complete"]
