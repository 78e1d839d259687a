"""Deterministic sampling by sha256 of the trace id."""

from __future__ import annotations

import hashlib

import pytest

from ragpulse.engine import is_sampled, sample_point
from ragpulse.engine.sampling import SamplingPolicy, SamplingRule, parse_predicate
from ragpulse.errors import ConfigError
from ragpulse.model import Document, Source, Trace


def test_sample_point_is_sha256_prefix_over_2_64() -> None:
    tid = "4bf92f3577b34da6a3ce929d0e0e4736"
    expected = int(hashlib.sha256(tid.encode()).hexdigest()[:16], 16) / 2**64
    assert sample_point(tid) == expected
    assert 0.0 <= sample_point(tid) < 1.0


def test_same_decision_every_time_and_monotone_in_rate() -> None:
    ids = [f"trace-{i}" for i in range(2000)]
    first = [is_sampled(t, 0.3) for t in ids]
    assert first == [is_sampled(t, 0.3) for t in ids]
    # a trace sampled at 0.3 is also sampled at any higher rate
    assert all(is_sampled(t, 0.6) for t, s in zip(ids, first, strict=True) if s)
    share = sum(first) / len(ids)
    assert 0.27 < share < 0.33


def test_edge_rates() -> None:
    assert is_sampled("x", 1.0)
    assert not is_sampled("x", 0.0)


# -- the sampling policy: precedence and predicates --------------------------------------------------------------


def _t(trace_id: str = "t", **kw: object) -> Trace:
    return Trace.model_validate({"trace_id": trace_id, "source": Source.KAFKA, **kw})


def test_precedence_test_traffic_then_predicates_then_rules_then_rate() -> None:
    policy = SamplingPolicy.build(
        0.0,
        rules=[SamplingRule(rate=0.0, app="shop", scenario="refunds"), SamplingRule(rate=1.0, app="shop")],
        always_judge=['attributes.user.feedback == "negative"'],
    )
    # test traffic beats everything, even a global rate of 0
    assert policy.decide(_t(source=Source.REPLAY)).by == "test_traffic"
    assert policy.decide(_t(source=Source.API)).sampled
    assert policy.decide(_t(run_id="nightly")).by == "test_traffic"
    # an always-judge predicate beats the rule that would drop the trace
    d = policy.decide(_t(app="shop", scenario="refunds", attributes={"user.feedback": "negative"}))
    assert (d.sampled, d.by) == (True, 'always_judge:attributes.user.feedback == "negative"')
    # the first matching rule wins
    d = policy.decide(_t(app="shop", scenario="refunds"))
    assert (d.sampled, d.by, d.rate) == (False, "rule:shop/refunds", 0.0)
    d = policy.decide(_t(app="shop", scenario="orders"))
    assert (d.sampled, d.by, d.rate) == (True, "rule:shop/*", 1.0)
    # no rule: the global rate
    d = policy.decide(_t(app="hr"))
    assert (d.sampled, d.by, d.rate) == (False, "rate", 0.0)


def test_rule_rates_are_deterministic_like_the_global_rate() -> None:
    policy = SamplingPolicy.build(1.0, rules=[SamplingRule(rate=0.3, app="shop")])
    ids = [f"trace-{i}" for i in range(500)]
    assert [policy.decide(_t(i, app="shop")).sampled for i in ids] == [is_sampled(i, 0.3) for i in ids]


@pytest.mark.parametrize(
    ("predicate", "trace", "expected"),
    [
        ("top_document_score < 0.3", _t(documents=[Document(content="a", score=0.2, rank=0)]), True),
        (
            "top_document_score < 0.3",
            _t(
                documents=[Document(content="b", score=0.1, rank=1), Document(content="a", score=0.9, rank=0)]
            ),
            False,
        ),
        ("top_document_score < 0.3", _t(), False),  # no documents: a missing field matches nothing
        ("latency_s >= 10", _t(latency_s=12.5), True),
        ("latency_s >= 10", _t(latency_s=3), False),
        ('answer contains "SORRY"', _t(answer="Sorry, I cannot help."), True),
        ('app != "shop"', _t(), False),  # missing app: not even != matches
        ('app != "shop"', _t(app="hr"), True),
        ("attributes.tier < 3", _t(attributes={"tier": "2"}), False),  # ordering needs numbers on both sides
        ("attributes.flagged == true", _t(attributes={"flagged": True}), True),
    ],
)
def test_predicates(predicate: str, trace: Trace, expected: bool) -> None:
    assert parse_predicate(predicate)(trace) is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("feedback negative", "is not"),
        ("nosuchfield == 1", "unknown field 'nosuchfield'"),
        ("attributes.x == negative", "not a JSON literal"),
        ('latency_s > "10"', "needs a number"),
        ("answer contains 3", "needs a string"),
        ('app == ["a"]', "must be a number, string"),
    ],
)
def test_bad_predicates_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_predicate(text)
