"""Sessions, earlier turns and the app's token usage on the trace (issue 28): the Kafka event fields, the older
``attributes.session_id`` lifted into the typed field, and the price table's cost (``None``, never 0, for a
model missing from it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragpulse.ingest.events import EventRejected, parse_event, trace_to_event
from ragpulse.model import ModelPrice, ModelUsage, Trace, Turn

PRICES = {
    "gpt-4o-mini": ModelPrice(prompt=0.15, completion=0.60),
    "judge-x": ModelPrice(prompt=1, completion=2),
}


def _event(**kw: Any) -> bytes:
    return json.dumps(
        {"traceId": "t-1", "question": "And for part-timers?", "answer": "Eight weeks.", **kw}
    ).encode()


def test_kafka_session_turns_and_tokens_map_to_trace_fields() -> None:
    t = parse_event(
        _event(
            sessionId="sess-42",
            turns=[
                {"question": "How long is parental leave?", "answer": "Sixteen weeks."},
                {"question": "Paid?"},
            ],
            model="gpt-4o-mini",
            promptTokens=120,
            completionTokens=17,
            totalPromptTokens=160,
            totalCompletionTokens=25,
            usage=[
                {"model": "gpt-4o-mini", "promptTokens": 120, "completionTokens": 17},
                {"model": "small-rewriter", "prompt_tokens": 40, "completion_tokens": 8, "calls": 1},
            ],
        )
    )
    assert t.session_id == "sess-42"
    assert t.turns == (
        Turn(question="How long is parental leave?", answer="Sixteen weeks."),
        Turn(question="Paid?"),
    )
    assert (t.prompt_tokens, t.completion_tokens, t.total_prompt_tokens, t.total_completion_tokens) == (
        120,
        17,
        160,
        25,
    )
    assert t.usage == (
        ModelUsage(model="gpt-4o-mini", prompt_tokens=120, completion_tokens=17),
        ModelUsage(model="small-rewriter", prompt_tokens=40, completion_tokens=8),
    )
    # one model of the trace is not in the table: the tokens are known, the cost is not (never 0)
    assert t.app_cost(PRICES) is None
    priced = {**PRICES, "small-rewriter": ModelPrice(prompt=0.5, completion=1.0)}
    assert t.app_cost(priced) == pytest.approx((120 * 0.15 + 17 * 0.60 + 40 * 0.5 + 8 * 1.0) / 1e6)


def test_snake_case_and_answer_tokens_only() -> None:
    t = parse_event(_event(session_id=7, model="gpt-4o-mini", prompt_tokens=1000, completion_tokens=500))
    assert t.session_id == "7"
    # totals default to the answering call's tokens, counted under the trace's model
    assert (t.total_prompt_tokens, t.total_completion_tokens) == (1000, 500)
    assert t.usage == (ModelUsage(model="gpt-4o-mini", prompt_tokens=1000, completion_tokens=500),)
    assert t.app_cost(PRICES) == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)


def test_no_tokens_means_no_usage_and_no_cost() -> None:
    t = parse_event(_event(model="gpt-4o-mini"))
    assert (t.prompt_tokens, t.total_prompt_tokens, t.usage) == (None, None, ())
    assert t.app_cost(PRICES) is None
    # a model without a name is never priced
    anon = Trace(trace_id="x", prompt_tokens=10, completion_tokens=1)
    assert anon.usage == (ModelUsage(model=None, prompt_tokens=10, completion_tokens=1),)
    assert anon.app_cost(PRICES) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("promptTokens", -1),
        ("completionTokens", 1.5),
        ("turns", [{"answer": "no question"}]),
        ("sessionId", [1]),
    ],
)
def test_bad_fields_are_rejected_with_a_reason(field: str, value: Any) -> None:
    with pytest.raises(EventRejected) as ei:
        parse_event(_event(**{field: value}))
    assert ei.value.code == "schema"
    assert f"/{field}" in ei.value.reason


def test_older_attribute_session_id_becomes_the_field() -> None:
    t = parse_event(_event(attributes={"session_id": " s-1 ", "tier": "gold"}))
    assert t.session_id == "s-1"
    assert t.attributes == {"tier": "gold"}
    # a sender keeps it readable for older receivers
    assert t.wire_attributes()["session_id"] == "s-1"


def test_round_trip_through_the_event() -> None:
    t = Trace(
        trace_id="r-1",
        question="q",
        answer="a",
        model="m",
        session_id="s",
        turns=(Turn(question="q0", answer="a0"),),
        prompt_tokens=3,
        completion_tokens=4,
        total_prompt_tokens=30,
        total_completion_tokens=40,
        usage=(ModelUsage(model="m", prompt_tokens=30, completion_tokens=40, calls=2),),
    )
    back = parse_event(json.dumps(trace_to_event(t)).encode())
    assert back.model_dump(exclude={"source"}) == t.model_dump(exclude={"source"})
