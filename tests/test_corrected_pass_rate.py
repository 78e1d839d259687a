"""The Rogan–Gladen corrected pass rate: exact values, refusals, and interval coverage by simulation."""

from __future__ import annotations

import random

import pytest

from ragpulse.calibration.correction import CalibrationCounts, CorrectedPassRate, corrected_pass_rate

GOOD_JUDGE = CalibrationCounts(tp=90, fn=10, tn=90, fp=10)  # se = sp = 0.9


def test_point_estimate_inverts_the_judge_error() -> None:
    est = corrected_pass_rate(80, 100, GOOD_JUDGE)
    assert est is not None
    assert est.observed == 0.8
    assert est.value == pytest.approx((0.8 + 0.9 - 1) / (0.9 + 0.9 - 1))  # 0.875
    assert est.lower < 0.875 < est.upper
    assert est.n == 100


def test_estimate_is_clipped_to_the_unit_interval() -> None:
    high = corrected_pass_rate(99, 100, GOOD_JUDGE)
    low = corrected_pass_rate(5, 100, GOOD_JUDGE)
    assert high is not None
    assert low is not None
    assert high.value == 1.0
    assert high.upper == 1.0
    assert low.value == 0.0
    assert low.lower == 0.0


@pytest.mark.parametrize(
    ("passed", "scored", "calibration"),
    [
        (20, 29, GOOD_JUDGE),  # window below 30 scored judgements
        (50, 100, CalibrationCounts(tp=55, fn=45, tn=54, fp=46)),  # se + sp - 1 = 0.09 < 0.1
        (50, 100, CalibrationCounts(tp=90, fn=10, tn=0, fp=0)),  # calibration without bad answers
        (101, 100, GOOD_JUDGE),  # impossible counts
    ],
)
def test_no_figure_without_a_trustworthy_basis(
    passed: int, scored: int, calibration: CalibrationCounts
) -> None:
    assert corrected_pass_rate(passed, scored, calibration) is None


def _binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(1 for _ in range(n) if rng.random() < p)


def _coverage(theta: float, se: float, sp: float, window: int, sims: int = 400) -> float:
    """Share of seeded simulations whose interval covers the true pass rate ``theta``.

    Each simulation draws a calibration set of 200 human-labelled cases (half good on average), the judge's
    verdicts on it, and a window of ``window`` live judgements, then asks for the corrected interval.
    """
    rng = random.Random(f"{theta}/{se}/{sp}/{window}")
    covered = 0
    for _ in range(sims):
        n_good = _binomial(rng, 200, 0.5)
        tp = _binomial(rng, n_good, se)
        tn = _binomial(rng, 200 - n_good, sp)
        good = _binomial(rng, window, theta)
        passed = _binomial(rng, good, se) + _binomial(rng, window - good, 1 - sp)
        est = corrected_pass_rate(passed, window, CalibrationCounts(tp, n_good - tp, tn, 200 - n_good - tn))
        assert isinstance(est, CorrectedPassRate)
        covered += est.lower <= theta <= est.upper
    return covered / sims


@pytest.mark.integration  # slow check (simulation, ~2 s CPU): the integration lane, docs/dev/testing.md
def test_interval_covers_the_truth_in_every_cell() -> None:
    cells = [
        (theta, se, sp, window)
        for theta in (0.6, 0.8, 0.95)
        for se, sp in ((0.9, 0.9), (0.8, 0.95))
        for window in (500, 5000)
    ]
    coverage = {cell: _coverage(*cell) for cell in cells}
    for cell, share in coverage.items():
        print(f"theta={cell[0]} se={cell[1]} sp={cell[2]} n={cell[3]}: coverage {share:.3f}")
    assert min(coverage.values()) >= 0.92, coverage
