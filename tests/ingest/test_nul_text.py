"""NUL characters (U+0000) in every kind of text field, from every source, through the real store.

PostgreSQL stores no NUL in ``text`` and its ``jsonb`` refuses ``\\u0000`` too. The one rule
(:mod:`ragpulse.textclean`, docs/ingestion.md "Timestamps"): every source removes NUL (and makes lone surrogates
U+FFFD) when it decodes, before anything is judged or stored, and the store applies the same rule to every text
it writes (the last line of defence). Before, OTLP kept NUL in the trace the judges saw (only the store removed
it), and a raw NUL byte in a JSON string (``"q<0x00>x"``, which strict JSON forbids) dead-lettered a Kafka event
(``not_json: Invalid control character``) and failed an OTLP/JSON request (400).
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from ragpulse.config import Settings
from ragpulse.ingest.events import parse_event
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.decode import decode_json, decode_protobuf
from ragpulse.ingest.otlp.spans import request_to_spans
from ragpulse.model import Trace, TraceOutcome, TraceResult
from ragpulse.store import PostgresStore

N = "\u0000"

#: A Kafka event with a NUL in every kind of field: top-level strings, string arrays, documents (id, content,
#: nested metadata keys and values), nested attributes, turns, usage, an error object, the session id.
KAFKA_EVENT: dict[str, Any] = {
    "traceId": f"nul{N}-1",
    "spanId": f"s{N}1",
    "question": f"How many{N} days?",
    "answer": f"25{N} days.",
    "context": f"ctx{N}",
    "documents": [
        {
            "id": f"d{N}1",
            "content": f"New employees{N} get 25 days.",
            "metadata": {f"k{N}": f"v{N}", "n": {f"deep{N}": [f"l{N}"]}},
        }
    ],
    "model": f"gpt{N}-4o",
    "app": f"hr{N}",
    "scenario": f"leave{N}",
    "timestamp": "2026-03-14T12:00:00Z",
    "expectedAnswer": f"25{N}",
    "keywords": [f"25{N}"],
    "runId": f"r{N}1",
    "testCaseId": f"c{N}1",
    "attributes": {f"a{N}": {f"b{N}": f"c{N}", "list": [f"x{N}"]}},
    "error": {"type": f"Timeout{N}", "message": f"upstream{N}"},
    "notEvaluable": f"why{N}",
    "sessionId": f"chat{N}-8",
    "turns": [{"question": f"tq{N}", "answer": f"ta{N}"}],
    "usage": [{"model": f"gpt{N}-4o", "promptTokens": 12, "completionTokens": 3}],
}

#: What every one of those fields is once the NUL is removed.
KAFKA_CLEAN = {
    "trace_id": "nul-1",
    "span_id": "s1",
    "question": "How many days?",
    "answer": "25 days.",
    "context": "ctx",
    "model": "gpt-4o",
    "app": "hr",
    "scenario": "leave",
    "expected_answer": "25",
    "keywords": ("25",),
    "run_id": "r1",
    "test_case_id": "c1",
    "not_evaluable": "why",
    "session_id": "chat-8",
    "error": "Timeout: upstream",
}


def _kv(key: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "value": value}


def _s(text: str) -> dict[str, Any]:
    return {"stringValue": text}


TID = "ab" * 16

#: An OTLP/JSON request with a NUL in a resource attribute, the scope name, the span name, a string attribute's
#: key and value, a nested kvlist, an array, an event name and attribute, the status message and JSON texts
#: inside attributes (``\\u0000`` escapes: the mapped metadata and ``ragpulse.attributes``).
OTLP_DOC: dict[str, Any] = {
    "resourceSpans": [
        {
            "resource": {"attributes": [_kv("service.name", _s(f"hr{N}"))]},
            "scopeSpans": [
                {
                    "scope": {"name": f"openinference.instrumentation{N}"},
                    "spans": [
                        {
                            "traceId": TID,
                            "spanId": "1" * 16,
                            "name": f"rag{N}",
                            "startTimeUnixNano": "1764590000000000000",
                            "endTimeUnixNano": "1764590000900000000",
                            "status": {"code": 2, "message": f"Gateway{N} 504"},
                            "attributes": [
                                _kv("openinference.span.kind", _s("CHAIN")),
                                _kv("input.value", _s(f"How many{N} days?")),
                                _kv("output.value", _s(f"25{N} days.")),
                                _kv("session.id", _s(f"chat{N}-8")),
                                _kv(f"x{N}", {"kvlistValue": {"values": [_kv(f"y{N}", _s(f"z{N}"))]}}),
                                _kv("arr", {"arrayValue": {"values": [_s(f"e{N}")]}}),
                                _kv("ragpulse.attributes", _s('{"p\\u0000": "q\\u0000"}')),
                            ],
                            "events": [
                                {
                                    "name": f"ev{N}",
                                    "timeUnixNano": "1764590000100000000",
                                    "attributes": [_kv(f"e{N}", _s(f"v{N}"))],
                                }
                            ],
                        },
                        {
                            "traceId": TID,
                            "spanId": "2" * 16,
                            "parentSpanId": "1" * 16,
                            "name": "retrieve",
                            "startTimeUnixNano": "1764590000100000000",
                            "endTimeUnixNano": "1764590000200000000",
                            "attributes": [
                                _kv("openinference.span.kind", _s("RETRIEVER")),
                                _kv("retrieval.documents.0.document.id", _s(f"d{N}1")),
                                _kv(
                                    "retrieval.documents.0.document.content",
                                    _s(f"New employees{N} get 25 days."),
                                ),
                                _kv(
                                    "retrieval.documents.0.document.metadata", _s('{"k\\u0000": "v\\u0000"}')
                                ),
                            ],
                        },
                    ],
                }
            ],
        }
    ]
}


def _nul_in(value: Any) -> list[str]:
    """Where ``value`` (a trace's JSON dump) still holds a NUL: the paths, empty when there is none."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str) and N in v:
            found.append(path)
        elif isinstance(v, dict):
            for k, x in v.items():
                if N in str(k):
                    found.append(f"{path}/<key {k!r}>")
                stack.append((f"{path}/{k}", x))
        elif isinstance(v, list):
            stack.extend((f"{path}/{i}", x) for i, x in enumerate(v))
    return found


def _otlp_trace(body: bytes, *, protobuf: bool = False) -> Trace:
    decoded = decode_protobuf(body) if protobuf else decode_json(body)
    assert decoded.rejected_spans == 0
    spans = request_to_spans(decoded.request, "ragpulse").spans
    return TraceBuilder(Settings().otlp).build(TID, spans)


def _otlp_protobuf() -> bytes:
    data: bytes = decode_json(json.dumps(OTLP_DOC).encode()).request.SerializeToString()
    return data


def test_kafka_event_nul_in_every_field_is_removed_before_judging() -> None:
    t = parse_event(json.dumps(KAFKA_EVENT).encode())
    assert _nul_in(t.model_dump(mode="json")) == []
    assert {k: getattr(t, k) for k in KAFKA_CLEAN} == KAFKA_CLEAN
    d = t.documents[0]
    assert (d.id, d.content, d.metadata) == (
        "d1",
        "New employees get 25 days.",
        {"k": "v", "n": {"deep": ["l"]}},
    )
    assert t.attributes == {"a": {"b": "c", "list": ["x"]}}
    assert [(u.question, u.answer) for u in t.turns] == [("tq", "ta")]
    assert [u.model for u in t.usage] == ["gpt-4o"]


def test_kafka_raw_nul_byte_in_a_json_string_keeps_the_trace() -> None:
    """``{"question": "q<0x00>x"}``: strict JSON forbids a raw control character; the event was dead-lettered."""
    t = parse_event(b'{"traceId": "raw-1", "question": "How many\x00 days?", "answer": "25\tdays."}')
    assert (t.question, t.answer) == ("How many days?", "25\tdays.")


def test_otlp_nul_in_every_field_kind_is_removed_before_judging() -> None:
    for t in (_otlp_trace(json.dumps(OTLP_DOC).encode()), _otlp_trace(_otlp_protobuf(), protobuf=True)):
        assert _nul_in(t.model_dump(mode="json")) == []  # the judges see what the store keeps
        assert (t.question, t.answer, t.app, t.session_id) == ("How many days?", "25 days.", "hr", "chat-8")
        assert t.error == "Gateway 504"
        d = t.documents[0]
        assert (d.id, d.content, d.metadata) == ("d1", "New employees get 25 days.", {"k": "v"})
        assert t.attributes["p"] == "q"  # from ragpulse.attributes, a JSON text with \u0000 escapes
        assert [s["name"] for s in t.attributes["spans"]] == ["rag", "retrieve"]


def test_otlp_spans_carry_no_nul_to_any_mapper() -> None:
    """Whatever a convention mapper reads — names, keys, values, nested kvlists, arrays, events, the status —
    is clean already, so no mapper can carry a NUL into a trace."""
    spans = request_to_spans(decode_json(json.dumps(OTLP_DOC).encode()).request, "ragpulse").spans
    root = spans[0]
    assert (root.name, root.status_message, root.scope_name) == (
        "rag",
        "Gateway 504",
        "openinference.instrumentation",
    )
    assert (root.attributes["x"], root.attributes["arr"], root.resource["service.name"]) == (
        {"y": "z"},
        ["e"],
        "hr",
    )
    assert [(e.name, dict(e.attributes)) for e in root.events] == [("ev", {"e": "v"})]


def test_otlp_json_raw_nul_byte_keeps_the_request() -> None:
    body = json.dumps(OTLP_DOC).replace("How many\\u0000 days?", "How many\x00 days?").encode()
    assert b"How many\x00 days?" in body
    assert _otlp_trace(body).question == "How many days?"


async def test_nul_in_every_field_kind_is_stored_through_postgresql(pg_url: str) -> None:
    """Both sources' traces, a trace built in code with NUL everywhere (the store's own rule) and a dead letter
    whose key, reason and meta hold NUL: all stored, read back without NUL and with the texts as cleaned."""
    kafka = parse_event(json.dumps(KAFKA_EVENT).encode())
    otlp_json = _otlp_trace(json.dumps(OTLP_DOC).encode())
    raw = kafka.model_copy(  # the store is the last line of defence: nothing upstream cleaned this one
        update={
            "trace_id": "raw-2",
            "question": f"q{N}",
            "attributes": {f"k{N}": {f"n{N}": [f"v{N}"]}},
            "reference_contexts": (f"r{N}",),
        }
    )
    store = await PostgresStore.connect(pg_url, Settings(store_database_url=pg_url).store)
    try:
        report = await store.write_results(
            [TraceResult(trace=t, outcome=TraceOutcome.EVALUATED) for t in (kafka, otlp_json, raw)]
        )
        assert report.trace_inserted == {"nul-1", TID, "raw-2"}
        got_kafka = await store.get_trace("nul-1")
        assert got_kafka is not None
        assert {k: getattr(got_kafka.trace, k) for k in KAFKA_CLEAN} == KAFKA_CLEAN
        assert got_kafka.trace.documents[0].metadata == {"k": "v", "n": {"deep": ["l"]}}
        got_otlp = await store.get_trace(TID)
        assert got_otlp is not None
        assert (got_otlp.trace.question, got_otlp.trace.attributes["p"]) == ("How many days?", "q")
        assert got_otlp.trace.documents[0].metadata == {"k": "v"}
        got_raw = await store.get_trace("raw-2")
        assert got_raw is not None
        assert (got_raw.trace.question, got_raw.trace.attributes) == ("q", {"k": {"n": ["v"]}})
        assert got_raw.trace.reference_contexts == ("r",)
        for got in (got_kafka, got_otlp, got_raw):
            assert _nul_in(got.trace.model_dump(mode="json")) == []
        await store.write_dead_letter(
            "kafka",
            f"schema{N}: /question",
            b'{"traceId": "x\\u0000"}',
            {"key": f"k{N}1", f"m{N}": [f"v{N}"]},
        )
        conn = await asyncpg.connect(pg_url)
        try:
            row = await conn.fetchrow("SELECT reason, payload, meta::text AS meta FROM dead_letters")
        finally:
            await conn.close()
        assert row is not None
        assert (row["reason"], json.loads(row["meta"])) == ("schema: /question", {"key": "k1", "m": ["v"]})
        assert bytes(row["payload"]) == b'{"traceId": "x\\u0000"}'  # the message as it came (bytea)
    finally:
        await store.close()
