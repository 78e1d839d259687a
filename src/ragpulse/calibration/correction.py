"""Pass rates corrected for the judge's own error (Rogan–Gladen), with a 95 % interval.

A judge's observed pass rate ``p`` mixes the true share of good answers ``θ`` with the judge's mistakes. With
the judge's sensitivity ``se`` (share of good answers it passes) and specificity ``sp`` (share of bad answers it
fails), both measured on human-labelled data by ``ragpulse calibrate --save``::

    p = θ·se + (1 − θ)·(1 − sp)      ⇒      θ = (p + sp − 1) / (se + sp − 1)

(Rogan W.J., Gladen B., "Estimating prevalence from the results of a screening test", Am. J. Epidemiol. 107,
1978). Label 1 ("good") is the positive class.

Interval: an adjusted Wald interval by the delta method that carries the uncertainty of all three estimated
proportions (the window's ``p`` and the calibration's ``se`` and ``sp``), as proposed by Lang and Reiczigel
("Confidence limits for prevalence of disease adjusted for estimated sensitivity and specificity", Prev. Vet.
Med. 113, 2014): each proportion is first shrunk Agresti–Coull style (``z²/2`` pseudo-successes and
pseudo-failures), then::

    Var(θ) ≈ [Var(p) + θ²·Var(se) + (1 − θ)²·Var(sp)] / (se + sp − 1)²

Why this and not a bootstrap: it is closed form, so every replica computes the same figure from the same stored
counts in microseconds, and the pseudo-counts keep the interval honest when a calibration set has no false
positives or negatives (a plain Wald interval then claims zero calibration uncertainty). Its coverage is checked
by simulation in ``tests/test_corrected_pass_rate.py`` (≥ 92 % in every cell of the grid the trust issue names).

No figure is given when the judge is barely better than chance (``se + sp − 1 < 0.1``: the correction divides
by that) or the window holds fewer than :data:`MIN_WINDOW` scored judgements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

MIN_WINDOW = 30
"""Fewest scored judgements in a window for which a corrected pass rate is reported."""

MIN_YOUDEN = 0.1
"""Smallest ``se + sp − 1`` (Youden's J) for which the correction is attempted."""


@dataclass(frozen=True, slots=True)
class CalibrationCounts:
    """A judge's confusion counts on human-labelled data (label 1 = good = positive class).

    Attributes:
        tp: good answers the judge passed.   fn: good answers the judge failed.
        tn: bad answers the judge failed.    fp: bad answers the judge passed.
    """

    tp: int
    fn: int
    tn: int
    fp: int

    @property
    def sensitivity(self) -> float | None:
        """``tp / (tp + fn)``; ``None`` without good answers."""
        n = self.tp + self.fn
        return self.tp / n if n else None

    @property
    def specificity(self) -> float | None:
        """``tn / (tn + fp)``; ``None`` without bad answers."""
        n = self.tn + self.fp
        return self.tn / n if n else None


@dataclass(frozen=True, slots=True)
class CorrectedPassRate:
    """A corrected pass rate in [0, 1] with its interval (``lower ≤ value ≤ upper``, all clipped to [0, 1])."""

    value: float
    lower: float
    upper: float
    observed: float
    n: int


def _adjusted(successes: float, n: float, z2: float) -> tuple[float, float]:
    """Agresti–Coull shrunk proportion and its variance: ``(x + z²/2) / (n + z²)``."""
    n_adj = n + z2
    p = (successes + z2 / 2) / n_adj
    return p, p * (1 - p) / n_adj


def corrected_pass_rate(
    passed: int, scored: int, calibration: CalibrationCounts, *, confidence: float = 0.95
) -> CorrectedPassRate | None:
    """The Rogan–Gladen pass rate of a window with ``passed`` of ``scored`` judgements passing.

    Returns ``None`` when no trustworthy figure exists: fewer than :data:`MIN_WINDOW` scored judgements, a
    calibration without both classes, or ``se + sp − 1 < MIN_YOUDEN``.
    """
    if scored < MIN_WINDOW or not 0 <= passed <= scored:
        return None
    se, sp = calibration.sensitivity, calibration.specificity
    if se is None or sp is None or se + sp - 1 < MIN_YOUDEN:
        return None
    observed = passed / scored
    value = (observed + sp - 1) / (se + sp - 1)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    z2 = z * z
    p_a, var_p = _adjusted(passed, scored, z2)
    se_a, var_se = _adjusted(calibration.tp, calibration.tp + calibration.fn, z2)
    sp_a, var_sp = _adjusted(calibration.tn, calibration.tn + calibration.fp, z2)
    youden_a = se_a + sp_a - 1
    if youden_a <= 0:
        return None
    centre = min(1.0, max(0.0, (p_a + sp_a - 1) / youden_a))
    var = (var_p + centre**2 * var_se + (1 - centre) ** 2 * var_sp) / youden_a**2
    half = z * math.sqrt(var)

    def clip(x: float) -> float:
        return min(1.0, max(0.0, x))

    value = clip(value)
    return CorrectedPassRate(
        value=value,
        lower=min(value, clip(centre - half)),
        upper=max(value, clip(centre + half)),
        observed=observed,
        n=scored,
    )
