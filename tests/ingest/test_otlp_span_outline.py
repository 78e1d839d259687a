"""The span outline an OTLP trace keeps for the portal's timeline (issue 31 item 1): every span's id, parent,
name, role, start offset and duration in milliseconds, and its error status — no texts."""

from __future__ import annotations

from typing import Any

from ragpulse.config import Settings
from ragpulse.ingest.otlp.conventions import SPAN_OUTLINE_MAX, TraceBuilder, span_outline
from ragpulse.ingest.otlp.spans import SpanData

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
T0 = 1_764_590_000_000_000_000
ROOT, RET, LLM = "a" * 16, "b" * 16, "c" * 16


def _span(sid: str, parent: str | None, name: str, start_ms: int, end_ms: int, **kw: Any) -> SpanData:
    return SpanData(
        trace_id=TID,
        span_id=sid,
        parent_span_id=parent,
        name=name,
        start_unix_nano=T0 + start_ms * 1_000_000,
        end_unix_nano=T0 + end_ms * 1_000_000,
        resource={"service.name": "hr-assistant"},
        **kw,
    )


SPANS = [
    _span(LLM, ROOT, "ChatOpenAI", 120, 1_020, attributes={"openinference.span.kind": "LLM"}, status_code=2),
    _span(ROOT, None, "rag.query", 0, 1_250, kind=2, attributes={"input.value": "How many days?"}),
    _span(RET, ROOT, "retrieve", 10, 110, attributes={"gen_ai.operation.name": "retrieval"}),
]


def test_outline_in_start_order_with_offsets_durations_roles_and_errors() -> None:
    assert span_outline(SPANS) == [
        {
            "span_id": ROOT,
            "parent_span_id": None,
            "name": "rag.query",
            "kind": "server",
            "start_ms": 0.0,
            "duration_ms": 1250.0,
            "error": False,
        },
        {
            "span_id": RET,
            "parent_span_id": ROOT,
            "name": "retrieve",
            "kind": "retrieval",
            "start_ms": 10.0,
            "duration_ms": 100.0,
            "error": False,
        },
        {
            "span_id": LLM,
            "parent_span_id": ROOT,
            "name": "ChatOpenAI",
            "kind": "LLM",
            "start_ms": 120.0,
            "duration_ms": 900.0,
            "error": True,
        },
    ]


def test_the_built_trace_carries_the_outline_in_its_attributes() -> None:
    trace = TraceBuilder(Settings().otlp).build(TID, SPANS)
    assert [s["name"] for s in trace.attributes["spans"]] == ["rag.query", "retrieve", "ChatOpenAI"]
    assert "How many days?" not in str(trace.attributes["spans"])


def test_outline_is_bounded() -> None:
    many = [_span(f"{i:016x}", None, f"s{i}", i, i + 1) for i in range(SPAN_OUTLINE_MAX + 20)]
    got = span_outline(many)
    assert len(got) == SPAN_OUTLINE_MAX
    assert got[-1]["name"] == f"s{SPAN_OUTLINE_MAX - 1}"
