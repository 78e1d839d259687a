"""Agreement between a judge and human labels (calibration).

This module scores judges; it is not one, so it lives beside ``judges/`` (``ragpulse.judges.calibration`` is a
deprecated alias kept for one release).

Input: pairs of (judgement, human label), label 1 = good (faithful / relevant), 0 = bad. Judgements that are
not ``ok`` (``skipped`` or ``error``) have no score; they are counted in ``n_unscored`` and left out of every
metric, so a judge that abstains a lot shows it there instead of in its accuracy.

Metrics (positive class = label 1, prediction = ``judgement.passed``):

- ``accuracy`` = (tp + tn) / n.
- ``balanced_accuracy`` = (TPR + TNR) / 2, with TPR = tp / (tp + fn), TNR = tn / (tn + fp) (Brodersen et
  al., 2010, "The balanced accuracy and its posterior distribution"). Undefined (``None``) unless both label
  classes are among the scored pairs: with one class it would be TPR or TNR alone, not a balanced accuracy;
  the report says so in ``warnings``. It is the right headline number for skewed sets such as
  ares_human (172 faithful vs 28 unfaithful rows), where "always pass" scores 0.86 accuracy but 0.5 here.
- ``balanced_accuracy_ci``: 95 % percentile bootstrap interval (Efron & Tibshirani, 1993): resample the n
  scored pairs with replacement ``n_boot`` times using ``random.Random(seed)`` (deterministic for a given
  seed), take the 2.5th and 97.5th percentiles of the resampled balanced accuracies.
- ``f1``: F1 of the *failing* class (label 0 = what users want to catch): precision = tn / (tn + fn),
  recall = tn / (tn + fp), F1 = 2PR / (P + R) (0 when undefined).
- ``spearman``: Spearman's (1904) rank correlation between the judge's continuous score and the label,
  computed as the Pearson correlation of the average ranks (ties get the mean of the ranks they span), so
  it is the tie-corrected rho. ``None`` when either side is constant.
- ``confusion``: ``tp`` (label 1, passed), ``fp`` (label 0, passed), ``tn`` (label 0, failed),
  ``fn`` (label 1, failed).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ragpulse.model import Judgement, JudgementStatus

__all__ = [
    "CalibrationReport",
    "Confusion",
    "average_ranks",
    "balanced_accuracy",
    "bootstrap_ci",
    "calibrate",
    "confusion",
    "f1_failing",
    "spearman",
]


@dataclass(frozen=True)
class Confusion:
    """Confusion counts with label 1 as the positive class and ``passed`` as the prediction."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    @property
    def n(self) -> int:
        """Number of scored pairs."""
        return self.tp + self.fp + self.tn + self.fn


@dataclass(frozen=True)
class CalibrationReport:
    """Result of :func:`calibrate`. Metrics are ``None`` when there is nothing scored to compute them on.

    Attributes:
        n: scored pairs (status ``ok``); metrics are computed on these.
        n_unscored: pairs whose judgement was ``skipped`` or ``error`` (excluded from the metrics).
        unscored_reasons: ``{reason code: count}`` of the unscored judgements.
        accuracy / balanced_accuracy / f1 / spearman: see the module docstring (0–1; Spearman −1–1).
        balanced_accuracy_ci: 95 % bootstrap interval ``[low, high]`` of the balanced accuracy.
        confusion: see :class:`Confusion`.
        threshold: the pass threshold that produced ``passed``.
        backend: backend of the judge (``llm`` / ``heuristic``), if known.
        label_counts: ``{"0": count, "1": count}`` of the human labels of the scored pairs.
        warnings: one sentence per caveat, e.g. only one label class among the scored pairs.
    """

    n: int
    n_unscored: int
    accuracy: float | None
    balanced_accuracy: float | None
    balanced_accuracy_ci: tuple[float, float] | None
    f1: float | None
    spearman: float | None
    confusion: Confusion
    threshold: float | None = None
    backend: str | None = None
    unscored_reasons: dict[str, int] = field(default_factory=dict)
    label_counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the ``calibrate --json`` object): ``confusion`` as ``{tp, fp, tn, fn}``."""
        d = asdict(self)
        d["balanced_accuracy_ci"] = list(self.balanced_accuracy_ci) if self.balanced_accuracy_ci else None
        return d


def confusion(pairs: Sequence[tuple[bool, int]]) -> Confusion:
    """Count ``(predicted pass, label)`` pairs; label 1 is the positive class."""
    tp = sum(1 for p, y in pairs if p and y == 1)
    fp = sum(1 for p, y in pairs if p and y == 0)
    tn = sum(1 for p, y in pairs if not p and y == 0)
    fn = sum(1 for p, y in pairs if not p and y == 1)
    return Confusion(tp=tp, fp=fp, tn=tn, fn=fn)


def balanced_accuracy(c: Confusion) -> float | None:
    """(TPR + TNR) / 2; ``None`` unless both label classes occur (one rate alone is not balanced)."""
    if not (c.tp + c.fn and c.tn + c.fp):
        return None
    return (c.tp / (c.tp + c.fn) + c.tn / (c.tn + c.fp)) / 2


def f1_failing(c: Confusion) -> float:
    """F1 of the failing class (label 0): 2·P·R / (P + R) with P = tn/(tn+fn), R = tn/(tn+fp); 0 if undefined."""
    precision = c.tn / (c.tn + c.fn) if c.tn + c.fn else 0.0
    recall = c.tn / (c.tn + c.fp) if c.tn + c.fp else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks of ``values``; tied values all get the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson correlation of the average ranks of ``x`` and ``y``.

    Returns ``None`` for fewer than 2 pairs or when either side is constant.

    Raises:
        ValueError: ``x`` and ``y`` differ in length.
    """
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} scores but {len(y)} labels")
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def bootstrap_ci(
    pairs: Sequence[tuple[bool, int]], *, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the balanced accuracy of ``(predicted pass, label)`` pairs.

    Deterministic: resampling uses ``random.Random(seed)``. Resamples whose balanced accuracy is undefined
    (one label class) are dropped. Returns ``None`` for an empty input or one with a single label class.
    """
    if not pairs or len({y for _, y in pairs}) < 2:
        return None
    rng = random.Random(seed)
    n = len(pairs)
    stats: list[float] = []
    for _ in range(n_boot):
        sample = [pairs[rng.randrange(n)] for _ in range(n)]
        ba = balanced_accuracy(confusion(sample))
        if ba is not None:
            stats.append(ba)
    if not stats:
        return None
    stats.sort()
    alpha = (1.0 - level) / 2
    lo = stats[min(len(stats) - 1, max(0, math.floor(alpha * len(stats))))]
    hi = stats[min(len(stats) - 1, max(0, math.ceil((1 - alpha) * len(stats)) - 1))]
    return (lo, hi)


def calibrate(
    judgements: Sequence[Judgement],
    labels: Sequence[int],
    *,
    threshold: float | None = None,
    n_boot: int = 2000,
    seed: int = 0,
) -> CalibrationReport:
    """Compare judgements with human 0/1 labels (same order, same length).

    Args:
        judgements: one judgement per case.
        labels: human labels, 1 = good, 0 = bad.
        threshold: re-decide ``passed`` as ``score >= threshold`` instead of using each judgement's own
            ``passed`` (lets ``calibrate --threshold`` try thresholds without re-judging).
        n_boot / seed: bootstrap resamples and seed for the interval.

    Raises:
        ValueError: lengths differ or a label is not 0/1.
    """
    if len(judgements) != len(labels):
        raise ValueError(f"calibrate: {len(judgements)} judgements but {len(labels)} labels")
    pairs: list[tuple[bool, int]] = []
    scores: list[float] = []
    ys: list[float] = []
    unscored: dict[str, int] = {}
    backend: str | None = None
    used_threshold = threshold
    for j, y in zip(judgements, labels, strict=True):
        if y not in (0, 1):
            raise ValueError(f"calibrate: label must be 0 or 1, got {y!r}")
        backend = backend or j.backend.value
        if j.status is not JudgementStatus.OK or j.score is None:
            code = j.reason_code or j.status.value
            unscored[code] = unscored.get(code, 0) + 1
            continue
        if used_threshold is None:
            used_threshold = j.threshold
        passed = j.score >= threshold if threshold is not None else bool(j.passed)
        pairs.append((passed, y))
        scores.append(j.score)
        ys.append(float(y))
    c = confusion(pairs)
    label_counts = {"0": c.tn + c.fp, "1": c.tp + c.fn}
    warnings: list[str] = []
    if c.n and min(label_counts.values()) == 0:
        only = "1" if label_counts["1"] else "0"
        rate = "true-positive" if only == "1" else "true-negative"
        warnings.append(
            f"only label {only} among the {c.n} scored cases: balanced accuracy is undefined "
            f"(it would be the {rate} rate alone); add cases with label {1 - int(only)}"
        )
    return CalibrationReport(
        n=c.n,
        n_unscored=sum(unscored.values()),
        accuracy=(c.tp + c.tn) / c.n if c.n else None,
        balanced_accuracy=balanced_accuracy(c),
        balanced_accuracy_ci=bootstrap_ci(pairs, n_boot=n_boot, seed=seed),
        f1=f1_failing(c) if c.n else None,
        spearman=spearman(scores, ys),
        confusion=c,
        threshold=used_threshold,
        backend=backend,
        unscored_reasons=unscored,
        label_counts=label_counts,
        warnings=warnings,
    )
