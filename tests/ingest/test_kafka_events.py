"""Kafka event schema and mapping: the shared fixture oracle plus edge cases."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest

from ragpulse.ingest.events import EventRejected, event_schema, parse_event
from ragpulse.model import Source
from testsupport import shared_dir


def _fixture_lines() -> tuple[list[bytes], list[dict[str, Any]]]:
    fx = shared_dir() / "fixtures"
    lines = (fx / "kafka-events.jsonl").read_bytes().splitlines()
    oracle = json.loads((fx / "expected-records.json").read_text(encoding="utf-8"))["kafka-events.jsonl"]
    return lines, oracle


def test_schema_file_is_valid_2020_12_and_packaged() -> None:
    schema = event_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("2020-12/schema")
    for camel in ("traceId", "retrievedDocIds", "latencyMs", "expectedAnswer", "runId", "testCaseId"):
        assert camel in schema["properties"]
    for snake in ("trace_id", "retrieved_doc_ids", "latency_ms", "expected_answer", "run_id", "test_case_id"):
        assert snake in schema["properties"]


def test_fixture_events_match_oracle() -> None:
    lines, oracle = _fixture_lines()
    assert len(lines) == len(oracle) == 9
    for line, exp in zip(lines, oracle, strict=True):
        if exp["disposition"] == "reject" and exp["traceId"] is None:
            with pytest.raises(EventRejected) as ei:
                parse_event(line)
            assert ei.value.code == "not_json", line[:80]
            continue
        t = parse_event(line)
        assert t.trace_id == exp["traceId"]
        assert t.source is Source.KAFKA
        if exp["disposition"] == "reject":
            # A valid event without a question is not dead-lettered: the engine stores it as not_evaluable.
            assert exp["reason"] == "missing required field: question"
            assert t.question is None
            assert t.answer == "Up to four days per week after probation."
            continue
        if exp["disposition"] == "duplicate":
            assert line == lines[0]  # byte-identical redelivery; the store's upsert keeps one result
            assert t == parse_event(lines[0])
            continue
        assert t.question == exp["question"]
        assert t.doc_ids == exp["docIds"]
        assert len(t.contexts) == exp["contextsCount"]
        assert t.model == exp["model"]
        assert t.app == exp["app"]
        if "answerStartsWith" in exp:
            assert t.answer is not None
            assert t.answer.startswith(exp["answerStartsWith"])
        if "answerContains" in exp:
            assert exp["answerContains"] in (t.answer or "")
        if "contextChars" in exp:
            assert len(t.contexts[0]) == exp["contextChars"]
            assert hashlib.sha256(t.contexts[0].encode()).hexdigest() == exp["contextSha256"]
        if "timestampUtc" in exp:
            want = datetime.fromisoformat(exp["timestampUtc"].replace("Z", "+00:00"))
            assert t.end_time == want
            assert t.end_time.utcoffset() is not None
            assert t.end_time.tzinfo == UTC


def test_emoji_and_surrogate_pairs_decoded() -> None:
    lines, _ = _fixture_lines()
    t = parse_event(lines[8])
    assert t.question == "Can I expense the cake for my team's 🎉 launch party? 🍰"
    assert "👩\u200d💻" in (t.answer or "")
    assert "👍🏽" in (t.answer or "")


def test_snake_case_documents_latency_and_replay_identity() -> None:
    ev = {
        "trace_id": "ABCDEF0123456789ABCDEF0123456789",
        "question": "q?",
        "documents": [
            {"id": "d1", "content": "first", "score": 0.9, "metadata": {"src": "kb"}},
            {"id": 7, "text": "second"},
        ],
        "answer": "a",
        "latency_ms": 1500,
        "timestamp": "2026-03-14T12:00:00Z",
        "run_id": "run-1",
        "test_case_id": "case-3",
        "expected_answer": "ref",
        "keywords": "alpha, beta；gamma",
        "attributes": {"user": "u1"},
        "scenario": "s",
        "unknownField": 1,
    }
    t = parse_event(json.dumps(ev).encode())
    assert t.trace_id == "abcdef0123456789abcdef0123456789"
    assert t.doc_ids == ["d1", "7"]
    assert t.contexts == ["first", "second"]
    assert t.documents[0].score == 0.9
    assert t.documents[0].metadata == {"src": "kb"}
    assert t.documents[1].rank == 1
    assert t.latency_s == 1.5
    assert t.end_time == datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
    assert t.start_time == datetime(2026, 3, 14, 11, 59, 58, 500000, tzinfo=UTC)
    assert (t.run_id, t.test_case_id, t.expected_answer) == ("run-1", "case-3", "ref")
    assert t.keywords == ("alpha", "beta", "gamma")
    assert t.attributes == {"user": "u1"}
    assert t.scenario == "s"


def test_camel_case_wins_and_context_string_and_epoch_ms() -> None:
    ev = {
        "traceId": "t-1",
        "trace_id": "t-2",
        "question": "q",
        "context": "the whole context",
        "answer": "a",
        "latencyMs": 20,
        "timestamp": 1773489600000,
        "keywords": ["k1", " ", "k2"],
        "expectedAnswer": "e",
        "runId": "r",
        "testCaseId": "c",
    }
    t = parse_event(json.dumps(ev).encode())
    assert t.trace_id == "t-1"
    assert t.documents == ()
    assert t.contexts == ["the whole context"]
    assert t.end_time == datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
    assert t.latency_s == 0.02
    assert t.keywords == ("k1", "k2")
    assert (t.run_id, t.test_case_id, t.expected_answer) == ("r", "c", "e")


def test_ids_without_contexts_and_uneven_lists() -> None:
    t = parse_event(b'{"traceId": 42, "retrievedDocIds": ["a", "b"], "contexts": ["x"]}')
    assert t.trace_id == "42"
    assert t.doc_ids == ["a", "b"]
    assert t.contexts == ["x"]
    assert t.question is None
    assert t.answer is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "not_json: empty message"),
        (b"   ", "not_json: empty message"),
        (None, "not_json: empty message"),
        (b"\xff\xfe{}", "not_json: Expecting value: line 1 column 1 (char 0)"),  # lenient: U+FFFD U+FFFD {}
        (b'{"traceId": "a", "question": NaN}', "not_json: NaN is not a valid JSON number"),
        (b"[1, 2]", "schema: /: must be of type object, got array of length 2"),
        (b'{"question": "q", "answer": "a"}', "schema: /: missing required field traceId (or trace_id)"),
        (b'{"traceId": "   "}', "schema: /traceId: must be a non-blank string or a non-negative integer"),
        (b'{"traceId": ["x"]}', "schema: /traceId: must be a non-blank string or a non-negative integer"),
        (
            b'{"traceId": "a", "contexts": ["ok", 3]}',
            "schema: /contexts/1: must be of type string or null, got integer",
        ),
        (
            b'{"traceId": "a", "question": 5}',
            "schema: /question: must be of type string or null, got integer",
        ),
        (b'{"traceId": "a", "promptTokens": -1}', "schema: /promptTokens: must be >= 0, got integer"),
        (
            b'{"traceId": "a", "documents": [{"score": "high"}]}',
            "schema: /documents/0/score: must be of type number or null, got string of length 4",
        ),
        (
            b'{"traceId": "a", "timestamp": "yesterday"}',
            "schema: /timestamp: a string of 9 characters is not an RFC 3339 date-time",
        ),
    ],
)
def test_rejections_have_clear_reasons(raw: bytes | None, reason: str) -> None:
    with pytest.raises(EventRejected) as ei:
        parse_event(raw)
    assert ei.value.reason == reason
    assert ei.value.code == reason.split(":")[0]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (
            b'{"traceId": "a", "question": ["my salary is 5k"]}',
            "schema: /question: ['my salary is 5k'] is not of type 'string', 'null'",
        ),
        (
            b'{"traceId": "a", "timestamp": "secret plan"}',
            "schema: /timestamp: 'secret plan' is not an RFC 3339 date-time",
        ),
    ],
)
def test_values_are_quoted_only_with_log_text(raw: bytes, reason: str) -> None:
    """Reasons reach logs and dead-letter headers: the value (maybe question text) only with log_text on."""
    with pytest.raises(EventRejected) as ei:
        parse_event(raw, log_text=True)
    assert ei.value.reason == reason
    with pytest.raises(EventRejected) as off:
        parse_event(raw)
    assert "salary" not in off.value.reason
    assert "secret" not in off.value.reason
    assert off.value.reason.startswith(reason.split(":", 2)[0] + ":" + reason.split(":", 2)[1])


def test_too_large() -> None:
    raw = json.dumps({"traceId": "a", "context": "x" * 2000}).encode()
    with pytest.raises(EventRejected) as ei:
        parse_event(raw, max_bytes=1000)
    assert ei.value.reason == f"too_large: {len(raw)} bytes > 1000"
    assert parse_event(raw, max_bytes=len(raw)).context == "x" * 2000


def test_trace_to_event_round_trips() -> None:
    from ragpulse.ingest.events import trace_to_event
    from ragpulse.model import Document, Trace

    t = Trace(
        trace_id="0123456789abcdef0123456789abcdef",
        question="问题?",
        documents=(
            Document(id="d1", content="c1", score=0.5, metadata={"k": 1}),
            Document(content="c2", rank=1),
        ),
        answer="a",
        model="m",
        app="app",
        scenario="sc",
        latency_s=1.25,
        end_time=datetime(2026, 3, 14, 12, 0, tzinfo=UTC),
        attributes={"reference_contexts": ["r1"], "context_labels": [1, 0]},
        run_id="run-1",
        test_case_id="c-1",
        expected_answer="e",
        keywords=("k1", "k2"),
        source=Source.REPLAY,
    )
    ev = trace_to_event(t)
    assert ev["runId"] == "run-1"
    assert ev["testCaseId"] == "c-1"
    assert ev["latencyMs"] == 1250.0
    back = parse_event(json.dumps(ev, ensure_ascii=False).encode())
    assert back.source is Source.KAFKA
    assert back.model_dump(exclude={"source", "start_time"}) == t.model_dump(exclude={"source", "start_time"})
    assert back.start_time == datetime(2026, 3, 14, 11, 59, 58, 750000, tzinfo=UTC)


def test_deeply_nested_message_is_rejected_not_raised() -> None:
    """A 200 KB message of nested arrays must be dead-lettered, not kill the consume loop (poison pill)."""
    with pytest.raises(EventRejected) as ei:
        parse_event(b"[" * 100_000 + b"]" * 100_000)
    assert ei.value.reason == "too_deep: JSON nested deeper than 64 levels"
    assert ei.value.code == "too_deep"
    deep_attr = b'{"traceId": "a", "attributes": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
    with pytest.raises(EventRejected, match=r"^too_deep: JSON nested deeper than 64 levels$"):
        parse_event(deep_attr)


def test_event_key_of_unreadable_values_is_none() -> None:
    from ragpulse.ingest.publish import event_key

    assert event_key(b'{"traceId": "abc", "question": "q"}') == b"abc"
    assert event_key(b'{"trace_id": 7}') == b"7"
    assert event_key(b"{oops") is None
    assert event_key(b"\xff\xfe") is None
    assert event_key(b"[" * 100_000 + b"]" * 100_000) is None


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("Sorry, something went wrong… upstream timeout", "Sorry, something went wrong… upstream timeout"),
        (True, "error"),
        ({"type": "TimeoutError", "message": "upstream\ntimeout"}, "TimeoutError: upstream timeout"),
        ({"code": 504}, '{"code": 504}'),
        (False, None),
        ("", None),
        (None, None),
    ],
)
def test_error_field_marks_a_failed_request(value: object, error: str | None) -> None:
    t = parse_event(
        json.dumps({"traceId": "e", "question": "q", "answer": "Sorry…", "error": value}).encode()
    )
    assert t.error == error


async def test_errored_kafka_event_is_stored_not_evaluable_trace_error() -> None:
    from ragpulse.config import Settings
    from ragpulse.engine import Engine
    from ragpulse.model import TraceOutcome
    from ragpulse.testing.fakes import MemoryStore, ScriptedJudge

    judge = ScriptedJudge("faithfulness", 0.0)
    store = MemoryStore()
    async with Engine({"faithfulness": judge}, store, Settings().engine) as engine:
        raw = {
            "traceId": "err-1",
            "question": "q",
            "answer": "Sorry, something went wrong",
            "error": "timeout",
        }
        await engine.submit(parse_event(json.dumps(raw).encode()))
        await engine.drain(10)
    stored = store.traces["err-1"]
    assert stored.outcome is TraceOutcome.NOT_EVALUABLE
    assert stored.outcome_reason == "trace_error"
    assert stored.judgements == ()


def test_replay_via_kafka_carries_error_and_not_evaluable() -> None:
    from ragpulse.ingest.events import trace_to_event
    from ragpulse.model import Trace

    t = Trace(
        trace_id="r1", question="q", run_id="run", error="boom", not_evaluable="rag_endpoint_failed: HTTP 500"
    )
    back = parse_event(json.dumps(trace_to_event(t)).encode())
    assert back.error == "boom"
    assert back.not_evaluable == "rag_endpoint_failed: HTTP 500"
    assert back.run_id == "run"
