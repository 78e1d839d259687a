"""Threshold syntax and evaluation against a report."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.errors import ConfigError
from ragpulse.replay import Threshold, evaluate_thresholds, parse_thresholds

REPORT: dict[str, Any] = {
    "pass_rate": 0.8,
    "coverage": 0.9,
    "averages": {"faithfulness": 0.85, "keyword": None},
    "judges": {
        "faithfulness": {"mean": 0.85, "pass_rate": 0.75, "coverage": 0.9},
        "keyword": {"mean": None, "pass_rate": None, "coverage": 0.0},
    },
}


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
