"""``judges compare``: Cohen's kappa, the paired pass-rate interval, labels, gates (pure functions)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ragpulse.calibration.shadow import compare_pairs, gate, load_labels, parse_minimums
from ragpulse.errors import ConfigError


def _side(version: str, passed: bool, tokens: int, latency: float, status: str = "ok") -> dict[str, Any]:
    return {
        "version": version,
        "status": status,
        "score": 1.0 if passed else 0.0,
        "passed": passed,
        "latency_s": latency,
        "prompt_tokens": tokens,
        "completion_tokens": 0,
    }


def _pairs() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    cells = [(True, True, 40), (True, False, 10), (False, True, 5), (False, False, 45)]
    out = []
    for m, s, k in cells:
        for i in range(k):
            out.append((f"t{m:d}{s:d}{i}", _side("main1", m, 100, 1.0), _side("shad1", s, 40, 0.25)))
    out.append(("err", _side("main1", True, 100, 1.0), _side("shad1", False, 40, 0.25, status="error")))
    return out


def test_kappa_confusion_and_paired_interval() -> None:
    c = compare_pairs("faithfulness", _pairs())
    assert (c.pairs, c.scored) == (101, 100)
    assert c.confusion == {"both_pass": 40, "main_only": 10, "shadow_only": 5, "both_fail": 45}
    # p_o = 0.85, p_e = 0.5 * 0.45 + 0.5 * 0.55 = 0.5
    assert c.kappa == pytest.approx(0.7)
    assert c.agreement == pytest.approx(0.85)
    assert c.main_pass_rate == pytest.approx(0.5)
    assert c.shadow_pass_rate == pytest.approx(0.45)
    assert c.pass_rate_difference == pytest.approx(-0.05)
    se = math.sqrt(15 - 25 / 100) / 100
    assert c.pass_rate_difference_lower == pytest.approx(-0.05 - 1.96 * se)
    assert c.pass_rate_difference_upper == pytest.approx(-0.05 + 1.96 * se)
    assert (c.main_tokens, c.shadow_tokens, c.tokens_difference) == (100.0, 40.0, -60.0)
    assert c.latency_difference_s == pytest.approx(-0.75)
    assert (c.main_versions, c.shadow_versions) == (["main1"], ["shad1"])


def test_labels_and_gates(tmp_path: Path) -> None:
    f = tmp_path / "labels.jsonl"
    # the human label is the shadow's verdict on every both-pass and shadow-only trace, and "fail" on main-only
    lines = [f'{{"trace_id": "t11{i}", "label": 1}}' for i in range(40)]
    lines += [f'{{"trace_id": "t10{i}", "label": 0}}' for i in range(10)]
    f.write_text("\n".join(lines) + "\n\n", "utf-8")
    labels = load_labels(f)
    c = compare_pairs("faithfulness", _pairs(), labels)
    assert c.labelled == 50
    assert c.shadow_label_accuracy == 1.0
    assert c.main_label_accuracy == pytest.approx(40 / 50)
    assert c.shadow_label_kappa == 1.0
    outcomes = gate(c, parse_minimums(["kappa=0.7", "shadow_label_accuracy=0.99", "main_label_kappa=0.5"]))
    assert [(o.metric, o.met) for o in outcomes] == [
        ("kappa", True),
        ("shadow_label_accuracy", True),
        ("main_label_kappa", False),  # main passes all 50 labelled: kappa 0 (chance agreement)
    ]
    assert outcomes[2].actual == 0.0
    with pytest.raises(ConfigError, match=r"^--min 'kapa=0.7': expected METRIC=VALUE"):
        parse_minimums(["kapa=0.7"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"trace_id": "a", "label": 1}\n{"trace": "b"}\n', "utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:2: expected"):
        load_labels(bad)


def test_no_scored_pairs_gives_no_figures() -> None:
    c = compare_pairs("faithfulness", [])
    assert (c.kappa, c.pass_rate_difference, c.main_tokens) == (None, None, None)
    assert [o.met for o in gate(c, {"kappa": 0.1})] == [False]
