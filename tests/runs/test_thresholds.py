"""Threshold syntax and evaluation against a report."""

from __future__ import annotations

import pytest

from ragpulse.errors import ConfigError
from ragpulse.runs.gate import Threshold, evaluate_thresholds, gate_thresholds, parse_thresholds
from ragpulse.runs.report_model import MetricRef, RunReport, parse_metric

REPORT = RunReport.from_json(
    {
        "run_id": "r",
        "test_set": "t",
        "pass_rate": 0.8,
        "coverage": 0.9,
        "averages": {"faithfulness": 0.85, "keyword": None},
        "judges": {
            "faithfulness": {"mean": 0.85, "pass_rate": 0.75, "coverage": 0.9},
            "keyword": {"mean": None, "pass_rate": None, "coverage": 0.0},
        },
    }
)


def test_parse_all_forms() -> None:
    ts = parse_thresholds(["pass_rate=0.8", "coverage=0.95,faithfulness=0.85", "faithfulness.pass_rate=0.9"])
    assert ts == [
        Threshold("pass_rate", 0.8),
        Threshold("coverage", 0.95),
        Threshold("faithfulness", 0.85),
        Threshold("faithfulness.pass_rate", 0.9),
    ]
    assert parse_thresholds(["relevancy.mean=0.5"]) == [Threshold("relevancy", 0.5)]
    assert str(Threshold("pass_rate", 0.8)) == "pass_rate=0.8"


@pytest.mark.parametrize("bad", ["pass_rate", "=0.5", "pass_rate=high", "pass_rate=1.5", "9x=0.1", "a=nan"])
def test_parse_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_thresholds([bad])


def test_evaluate_met_and_breached() -> None:
    ok = parse_thresholds(["pass_rate=0.8", "coverage=0.9", "faithfulness=0.85", "faithfulness.coverage=0.9"])
    assert evaluate_thresholds(REPORT, ok) == []
    bad = parse_thresholds(["pass_rate=0.81", "faithfulness.pass_rate=0.9", "keyword=0.1", "nosuch=0.1"])
    breaches = evaluate_thresholds(REPORT, bad)
    assert [(b.threshold.metric, b.actual) for b in breaches] == [
        ("pass_rate", 0.8),
        ("faithfulness.pass_rate", 0.75),
        ("keyword", None),
        ("nosuch", None),
    ]
    assert breaches[0].message == "pass_rate 0.800 < 0.81"
    assert "no value" in breaches[2].message


def test_default_coverage_applies_only_with_thresholds() -> None:
    only_pass = parse_thresholds(["pass_rate=0.5"])
    breaches = evaluate_thresholds(REPORT, only_pass, default_coverage=0.95)
    assert [(b.threshold.metric, b.actual) for b in breaches] == [("coverage", 0.9)]
    # an explicit coverage threshold replaces the default
    assert evaluate_thresholds(REPORT, parse_thresholds(["coverage=0.9"]), default_coverage=0.95) == []
    assert evaluate_thresholds(REPORT, [], default_coverage=0.95) == []


def test_metric_names_parse_from_the_right() -> None:
    assert parse_metric("pass_rate") == MetricRef(judge=None, field="pass_rate")
    assert parse_metric("faithfulness") == MetricRef(judge="faithfulness", field="mean")
    assert parse_metric("faithfulness.pass_rate") == MetricRef(judge="faithfulness", field="pass_rate")
    # a judge name with dots keeps them; only a known suffix is split off
    assert parse_metric("acme.v2.coverage") == MetricRef(judge="acme.v2", field="coverage")
    assert parse_metric("acme.v2") == MetricRef(judge="acme.v2", field="mean")


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("pass_rat=0.5", "'pass_rat'"),
        ("nosuchjudge=0.5", "'nosuchjudge'"),
        ("faithfulness.pass_rat=0.5", "'faithfulness.pass_rat'"),
    ],
)
def test_unknown_metric_or_judge_is_a_usage_error_naming_it(spec: str, named: str) -> None:
    with pytest.raises(ConfigError, match="unknown metric or judge") as e:
        parse_thresholds([spec], judges={"faithfulness", "keyword"})
    assert named in str(e.value)
    assert "judges: faithfulness, keyword" in str(e.value)


def test_gate_needs_a_threshold() -> None:
    with pytest.raises(ConfigError, match="no threshold to check"):
        gate_thresholds({}, [], 0.95)
    assert gate_thresholds({"pass_rate": 0.5}, [], 0.95) == [
        Threshold("pass_rate", 0.5),
        Threshold("coverage", 0.95),
    ]
