"""Calibration metrics on hand-computed confusion matrices, and the heuristic judge on ares_human."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from ragpulse.calibration.agreement import (
    Confusion,
    average_ranks,
    balanced_accuracy,
    bootstrap_ci,
    calibrate,
    confusion,
    f1_failing,
    spearman,
)
from ragpulse.config import Settings
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.judges.frame import error, ok, skipped
from ragpulse.model import Backend, Judgement, Trace
from testsupport import shared_dir

COMMON: dict[str, Any] = {"judge": "faithfulness", "version": "v", "backend": Backend.HEURISTIC}


def judged(score: float, threshold: float = 0.5) -> Judgement:
    return ok(score=score, threshold=threshold, **COMMON)


def test_confusion_and_rates_by_hand() -> None:
    # (passed, label): tp=3, fp=1, tn=2, fn=2
    pairs = [(True, 1)] * 3 + [(True, 0)] + [(False, 0)] * 2 + [(False, 1)] * 2
    c = confusion(pairs)
    assert c == Confusion(tp=3, fp=1, tn=2, fn=2)
    assert c.n == 8
    # TPR = 3/5, TNR = 2/3 → (0.6 + 0.6667) / 2
    assert balanced_accuracy(c) == pytest.approx((3 / 5 + 2 / 3) / 2)
    # failing class: P = tn/(tn+fn) = 2/4, R = tn/(tn+fp) = 2/3 → F1 = 2·0.5·(2/3)/(0.5 + 2/3) = 4/7
    assert f1_failing(c) == pytest.approx(4 / 7)
    # one label class only: TPR (or TNR) alone is not a balanced accuracy
    assert balanced_accuracy(Confusion(tp=5)) is None
    assert balanced_accuracy(Confusion(tp=3, fn=1)) is None
    assert balanced_accuracy(Confusion(tn=2, fp=2)) is None
    assert balanced_accuracy(Confusion()) is None
    assert f1_failing(Confusion(tp=3, fn=1)) == 0.0


def test_spearman_with_average_ranks() -> None:
    assert average_ranks([10, 20, 20, 30]) == [1.0, 2.5, 2.5, 4.0]
    # no ties: 1 − 6·Σd²/(n(n²−1)) = 1 − 6·2/24 = 0.5
    assert spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    # ties: ranks x = [1, 2.5, 2.5, 4], y = [1.5, 1.5, 3.5, 3.5] → 3 / sqrt(4.5 · 4)
    assert spearman([1, 2, 2, 3], [0, 0, 1, 1]) == pytest.approx(3 / math.sqrt(18))
    assert spearman([1, 1, 1], [0, 1, 0]) is None
    with pytest.raises(ValueError):
        spearman([1, 2], [1])


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    pairs = [(True, 1)] * 30 + [(False, 1)] * 5 + [(False, 0)] * 8 + [(True, 0)] * 4
    a = bootstrap_ci(pairs, n_boot=500, seed=7)
    assert a == bootstrap_ci(pairs, n_boot=500, seed=7)
    point = balanced_accuracy(confusion(pairs))
    assert a is not None
    assert point is not None
    assert a[0] < point < a[1]
    assert bootstrap_ci([], n_boot=10) is None
    # one label class → no interval (balanced accuracy undefined)
    assert bootstrap_ci([(True, 1)] * 5, n_boot=50) is None
    # both classes, all predictions right → a degenerate interval at the point
    assert bootstrap_ci([(True, 1)] * 5 + [(False, 0)] * 5, n_boot=50) == (1.0, 1.0)


def test_calibrate_excludes_and_counts_unscored() -> None:
    js = [
        judged(0.9),  # passed, label 1 → tp
        judged(0.2),  # failed, label 0 → tn
        judged(0.6),  # passed, label 0 → fp
        judged(0.4),  # failed, label 1 → fn
        skipped(reason="abstained", **COMMON),
        error(reason="judge_unavailable: HTTP 429", **COMMON),
    ]
    rep = calibrate(js, [1, 0, 0, 1, 1, 0], n_boot=200)
    assert (rep.n, rep.n_unscored) == (4, 2)
    assert rep.unscored_reasons == {"abstained": 1, "judge_unavailable": 1}
    assert rep.confusion == Confusion(tp=1, fp=1, tn=1, fn=1)
    assert rep.accuracy == 0.5
    assert rep.balanced_accuracy == 0.5
    assert rep.f1 == 0.5
    # scores [0.9, 0.2, 0.6, 0.4] vs labels [1, 0, 0, 1]: ranks [4,1,3,2] vs [3.5,1.5,1.5,3.5] → 2/sqrt(5·4)
    assert rep.spearman == pytest.approx(2 / math.sqrt(20))
    assert rep.backend == "heuristic"
    assert rep.threshold == 0.5
    d = rep.to_dict()
    assert d["confusion"] == {"tp": 1, "fp": 1, "tn": 1, "fn": 1}
    assert isinstance(d["balanced_accuracy_ci"], list)
    assert len(d["balanced_accuracy_ci"]) == 2
    json.dumps(d)
    # a threshold override re-decides passed from the score: 0.6 now fails → tn
    rep = calibrate(js, [1, 0, 0, 1, 1, 0], threshold=0.7, n_boot=10)
    assert rep.confusion == Confusion(tp=1, fp=0, tn=2, fn=1)
    assert rep.threshold == 0.7
    with pytest.raises(ValueError):
        calibrate(js[:2], [1])
    with pytest.raises(ValueError):
        calibrate(js[:1], [2])


@pytest.mark.integration  # slow check (200 labelled rows, ~1 s CPU): the integration lane, docs/dev/testing.md
def test_heuristic_faithfulness_on_ares_human() -> None:
    path = shared_dir() / "datasets" / "ares_human" / "ares_human.sample.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    judge = HeuristicFaithfulnessJudge(Settings(), {})
    js = [
        judge.evaluate(
            Trace(trace_id=r["id"], question=r["question"], documents=r["contexts"], answer=r["answer"])
        )
        for r in rows
    ]
    rep = calibrate(js, [int(r["answer_faithfulness"]) for r in rows])
    # measured: 200 scored, tp 131, fp 1, tn 27, fn 41 → BA = (131/172 + 27/28) / 2 = 0.8630
    assert rep.n == 200
    assert rep.n_unscored == 0
    assert rep.confusion == Confusion(tp=131, fp=1, tn=27, fn=41)
    assert rep.balanced_accuracy == pytest.approx((131 / 172 + 27 / 28) / 2)
    assert rep.balanced_accuracy is not None
    assert rep.balanced_accuracy >= 0.80
    assert rep.balanced_accuracy_ci == pytest.approx((0.810, 0.907), abs=0.001)


def test_calibrate_one_label_class_says_so() -> None:
    # labels all 1: tp 2 (0.9, 0.7), fn 1 (0.2) → TPR 2/3 would have been printed as "balanced accuracy"
    rep = calibrate([judged(0.9), judged(0.7), judged(0.2)], [1, 1, 1], n_boot=50)
    assert rep.confusion == Confusion(tp=2, fn=1)
    assert rep.accuracy == pytest.approx(2 / 3)
    assert rep.balanced_accuracy is None
    assert rep.balanced_accuracy_ci is None
    assert rep.label_counts == {"0": 0, "1": 3}
    assert rep.warnings == [
        "only label 1 among the 3 scored cases: balanced accuracy is undefined "
        "(it would be the true-positive rate alone); add cases with label 0"
    ]
    rep = calibrate([judged(0.9), judged(0.2)], [1, 0], n_boot=50)
    assert (rep.balanced_accuracy, rep.warnings, rep.label_counts) == (1.0, [], {"0": 1, "1": 1})
