"""Bad input loses nothing else (fix-ingest): an implausible token count, an impossible span time, a session id
that is a path segment and an over-long replay id — over Kafka and OTLP alike — are refused or taken as
unknown with a note; the trace itself is always kept. Storing them is in tests/store/test_store_bad_input.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.errors import BadRequest
from ragpulse.ingest.events import EventRejected, parse_event
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import ID_MAX_CHARS, TOKEN_COUNT_MAX, Trace, id_problem
from ragpulse.portal.evaluate import evaluate
from ragpulse.protocols import AckCallback

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
NOW_NS = 1_764_590_000_000_000_000
ROOT, LLM, LLM2 = "a" * 16, "c" * 16, "d" * 16


def _span(
    sid: str, parent: str | None, attrs: dict[str, Any], start: int = NOW_NS, end: int = NOW_NS + 10**9
) -> SpanData:
    return SpanData(
        trace_id=TID,
        span_id=sid,
        parent_span_id=parent,
        name="rag" if parent is None else "llm",
        start_unix_nano=start,
        end_unix_nano=end,
        attributes=attrs,
        resource={"service.name": "hr-assistant"},
    )


def _llm(sid: str, prompt: Any, completion: Any = 7) -> SpanData:
    return _span(
        sid,
        ROOT,
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.token_count.prompt": prompt,
            "llm.token_count.completion": completion,
            "output.value": "Sixteen weeks.",
        },
        NOW_NS + 10**8,
        NOW_NS + 9 * 10**8,
    )


def _root(**attrs: Any) -> SpanData:
    return _span(
        ROOT, None, {"openinference.span.kind": "CHAIN", "input.value": "How long is leave?", **attrs}
    )


def _build(spans: Sequence[SpanData]) -> Trace:
    return TraceBuilder(Settings().otlp).build(TID, spans)


def _event(**fields: Any) -> bytes:
    return json.dumps({"traceId": "t", "question": "q?", "answer": "a", **fields}).encode()


# -- 1. token counts ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "pointer"),
    [
        ({"promptTokens": 2147483648}, "/promptTokens"),
        ({"completion_tokens": 3_000_000_000}, "/completion_tokens"),
        ({"totalPromptTokens": 2**63}, "/totalPromptTokens"),
        ({"usage": [{"model": "m", "promptTokens": 2**31}]}, "/usage/0/promptTokens"),
    ],
)
def test_kafka_token_count_above_int32_is_a_schema_rejection_naming_the_field(
    fields: dict[str, Any], pointer: str
) -> None:
    with pytest.raises(EventRejected) as e:
        parse_event(_event(**fields))
    assert e.value.code == "schema"
    assert e.value.reason.startswith(f"schema: {pointer}: must be <= 2147483647")


def test_kafka_token_count_at_the_limit_is_kept() -> None:
    t = parse_event(_event(promptTokens=TOKEN_COUNT_MAX, completionTokens=0))
    assert (t.prompt_tokens, t.total_prompt_tokens) == (TOKEN_COUNT_MAX, TOKEN_COUNT_MAX)


class _NeverSink:
    async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None:  # pragma: no cover
        raise AssertionError("a bad event must not reach the engine")

    def has_room(self) -> bool:  # pragma: no cover
        return True


async def test_evaluate_refuses_an_implausible_token_count_as_a_bad_request() -> None:
    # was: judged, then the store write failed and the caller got 503 (retry) for good
    with pytest.raises(BadRequest, match=r"/promptTokens: must be <= 2147483647"):
        await evaluate(
            _NeverSink(), json.dumps({"question": "q?", "answer": "a", "promptTokens": 3e9}).encode()
        )


def test_otlp_token_count_above_int32_is_unknown_with_a_note_and_the_trace_is_kept() -> None:
    t = _build([_root(), _llm(LLM, 2**31)])
    assert t.answer == "Sixteen weeks."
    assert (t.prompt_tokens, t.completion_tokens, t.total_prompt_tokens, t.total_completion_tokens) == (
        None,
        None,
        None,
        None,
    )
    note = t.attributes["token_count_refused"]["llm.token_count.prompt"]
    assert note.startswith(f"2147483648 on span {LLM} is above 2147483647")


def test_otlp_other_calls_keep_their_usage_when_one_reports_an_implausible_count() -> None:
    t = _build([_root(), _llm(LLM, "9999999999"), _llm(LLM2, 120, 17)])
    assert (t.total_prompt_tokens, t.total_completion_tokens) == (120, 17)
    assert "llm.token_count.prompt" in t.attributes["token_count_refused"]


def test_otlp_sum_over_calls_above_int32_is_unknown_with_a_note() -> None:
    t = _build([_root(), _llm(LLM, 2_000_000_000), _llm(LLM2, 2_000_000_000)])
    assert t.total_prompt_tokens is None
    assert t.total_completion_tokens == 14
    assert t.attributes["token_count_refused"]["total_prompt_tokens"].startswith("4000000000 (the sum")


# -- 2. impossible times ------------------------------------------------------------------------------------


def test_otlp_latency_and_span_duration_from_implausible_times_are_unknown() -> None:
    root = _span(ROOT, None, {"openinference.span.kind": "CHAIN", "input.value": "q?"}, 1, 2**64 - 1)
    t = _build([root, _llm(LLM, 10)])
    assert t.time_replaced
    assert t.latency_s is None  # was 18446744073.7 s
    assert (
        t.attributes["latency_refused"] == "18446744073.709553 s is above 86400 s (one day): latency unknown"
    )
    outline = {s["span_id"]: s for s in t.attributes["spans"]}
    assert outline[ROOT]["duration_ms"] is None
    assert outline[ROOT]["start_ms"] is None
    assert outline[LLM]["start_ms"] == 0.0  # the earliest plausible start, not 1 ns after the epoch
    assert outline[LLM]["duration_ms"] == 800.0


@pytest.mark.parametrize(("start", "end"), [(1, NOW_NS + 10**9), (NOW_NS, 2**64 - 1)])
def test_otlp_latency_is_unknown_when_either_time_is_implausible(start: int, end: int) -> None:
    root = _span(ROOT, None, {"openinference.span.kind": "CHAIN", "input.value": "q?"}, start, end)
    t = _build([root, _llm(LLM, 10)])
    assert t.latency_s is None
    assert {s["span_id"]: s for s in t.attributes["spans"]}[ROOT]["duration_ms"] is None


def test_otlp_sender_with_a_wrong_clock_keeps_its_latency_and_records_the_skew() -> None:
    """A sender whose clock is 10 years ahead (every span around 2035-11-29): its times are refused, its
    durations need no clock — the root's 1 s is the trace's latency, the LLM span's 0.8 s its duration_ms — and
    attributes.clock_skew_s says by how much the clock is off (the sender's end minus the receive time)."""
    ahead = 10 * 365 * 86400 * 10**9
    root = _span(ROOT, None, {"openinference.span.kind": "CHAIN", "input.value": "q?"}, NOW_NS + ahead)
    root = replace(root, end_unix_nano=root.end_unix_nano + ahead)
    llm = _llm(LLM, 10)
    llm = replace(llm, start_unix_nano=llm.start_unix_nano + ahead, end_unix_nano=llm.end_unix_nano + ahead)
    before = datetime.now(UTC)
    t = _build([root, llm])
    after = datetime.now(UTC)
    assert (t.latency_s, t.time_replaced) == (1.0, True)
    assert t.end_time is not None
    assert before <= t.end_time <= after  # the receive time
    assert t.start_time == t.end_time - timedelta(seconds=1)
    sender_end_s = (NOW_NS + ahead + 10**9) / 1e9
    assert (
        sender_end_s - after.timestamp() - 0.01
        <= t.attributes["clock_skew_s"]
        <= sender_end_s - before.timestamp() + 0.01
    )
    assert "latency_refused" not in t.attributes
    outline = {s["span_id"]: s for s in t.attributes["spans"]}
    assert (outline[ROOT]["duration_ms"], outline[LLM]["duration_ms"]) == (1000.0, 800.0)


def test_otlp_plausible_times_keep_their_latency() -> None:
    t = _build([_root(), _llm(LLM, 10)])
    assert t.latency_s == 1.0
    assert not t.time_replaced


# -- 3. session ids -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sid", ["..", ".", "a/../b", "x/."])
def test_otlp_session_id_that_is_a_path_segment_is_dropped_with_the_reason(sid: str) -> None:
    t = _build([_root(**{"session.id": sid}), _llm(LLM, 10)])
    assert t.session_id is None
    assert t.attributes["id_refused"]["session_id"] == f"{sid!r} has a '.' or '..' path segment"


@pytest.mark.parametrize("field", ["sessionId", "session_id"])
def test_kafka_session_id_that_is_a_path_segment_is_dropped_with_the_reason(field: str) -> None:
    t = parse_event(_event(**{field: ".."}))
    assert t.trace_id == "t"
    assert t.session_id is None
    assert t.attributes["id_refused"] == {"session_id": "'..' has a '.' or '..' path segment"}


def test_kafka_legacy_session_attribute_is_refused_too_and_other_attributes_stay() -> None:
    t = parse_event(_event(attributes={"session_id": "../x", "tenant": "acme"}))
    assert t.session_id is None
    assert t.attributes == {
        "tenant": "acme",
        "id_refused": {"session_id": "'../x' has a '.' or '..' path segment"},
    }


@pytest.mark.parametrize("sid", ["..x", "x..", "sess/1", "42"])
def test_session_ids_the_id_rule_accepts_are_kept(sid: str) -> None:
    assert parse_event(_event(sessionId=sid)).session_id == sid
    assert _build([_root(**{"session.id": sid}), _llm(LLM, 10)]).session_id == sid


# -- 4. one id rule -------------------------------------------------------------------------------------------


def test_id_rule_has_one_length_limit() -> None:
    assert id_problem("x" * ID_MAX_CHARS) is None
    assert id_problem("x" * (ID_MAX_CHARS + 1)) == "is longer than 256 characters (257)"


def test_otlp_replay_trace_id_longer_than_the_kafka_limit_is_refused() -> None:
    long_id = "r" * 5000
    t = _build([_root(**{"ragpulse.trace.id": long_id}), _llm(LLM, 10)])
    assert t.trace_id == TID  # the OTLP trace id, as for any refused replay id
    assert (
        t.attributes["id_refused"]["ragpulse.trace.id"]
        == f"{long_id[:100]!r} is longer than 256 characters (5000)"
    )


def test_otlp_replay_trace_id_at_the_limit_is_kept() -> None:
    t = _build([_root(**{"ragpulse.trace.id": "r" * 256}), _llm(LLM, 10)])
    assert t.trace_id == "r" * 256


def test_kafka_ids_follow_the_same_length_rule() -> None:
    with pytest.raises(EventRejected) as e:
        parse_event(_event(traceId="t" * 257))
    assert e.value.code == "schema"
    with pytest.raises(EventRejected) as e:
        parse_event(_event(testCaseId="c" * 257, runId="r1"))
    assert e.value.reason == "bad_id: /testCaseId: is longer than 256 characters (257)"
    with pytest.raises(EventRejected) as e:
        parse_event(_event(traceId=10**300))
    assert e.value.reason == "bad_id: /traceId: is longer than 256 characters (301)"


def test_a_senders_attributes_cannot_overwrite_ragpulses_own_notes() -> None:
    carried = json.dumps({"id_refused": "nothing refused", "token_count_refused": {}, "tenant": "acme"})
    root = _root(**{"ragpulse.trace.id": "../x", "ragpulse.attributes": carried})
    t = _build([root, _llm(LLM, 2**40)])
    assert t.attributes["tenant"] == "acme"
    assert t.attributes["id_refused"] == {"ragpulse.trace.id": "'../x' has a '.' or '..' path segment"}
    assert "llm.token_count.prompt" in t.attributes["token_count_refused"]
