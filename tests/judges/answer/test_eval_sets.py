"""The figures docs/judges.md gives for the evaluation sets of examples/eval/ (issue 29), pinned: a change of
the offline judges that moves them must update the documented tables too."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse.calibration.agreement import calibrate
from ragpulse.calibration.calibrate import load_cases
from ragpulse.config import Settings
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.judges.answer.relevancy import HeuristicRelevancyJudge

EVAL = Path(__file__).resolve().parents[3] / "examples" / "eval"


@pytest.mark.integration  # slow check (labelled data sets through the heuristic judges, ~0.7-1 s each): the integration lane, docs/dev/testing.md
@pytest.mark.parametrize(
    ("stem", "label", "confusion", "balanced_accuracy"),
    [
        ("dialogue_faithfulness.tune", "faithful", (85, 4, 81, 0), 0.976),
        ("dialogue_faithfulness.holdout", "faithful", (83, 10, 75, 2), 0.929),
        ("summary_faithfulness.tune", "faithful", (87, 16, 72, 1), 0.903),
        ("summary_faithfulness.holdout", "faithful", (84, 13, 74, 3), 0.908),
        ("relevancy_forms.tune", "relevant", (38, 3, 73, 38), 0.730),  # question_coverage/v5 (v4: 44/4/72/32)
        ("relevancy_forms.holdout", "relevant", (43, 10, 66, 33), 0.717),  # v5 (v4: 45/10/66/31)
    ],
)
def test_eval_set_figures(
    stem: str, label: str, confusion: tuple[int, int, int, int], balanced_accuracy: float
) -> None:
    settings = Settings()
    judge = (
        HeuristicRelevancyJudge(settings, {})
        if label == "relevant"
        else HeuristicFaithfulnessJudge(settings, {})
    )
    traces, labels = load_cases(EVAL / f"{stem}.jsonl", label)
    report = calibrate([judge.evaluate(t) for t in traces], labels)
    c = report.confusion
    assert (c.tp, c.fp, c.tn, c.fn) == confusion
    assert report.balanced_accuracy == pytest.approx(balanced_accuracy, abs=5e-4)
