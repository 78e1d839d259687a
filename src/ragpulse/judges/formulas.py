"""Formulas of the reference-based metrics, as pure functions (no I/O, no model).

Every function returns a float in [0, 1] (or ``None`` where the metric is undefined) and is exact on the
edge cases the judges rely on: sums of precisions are accumulated as :class:`fractions.Fraction`, so a
perfect ranking scores exactly ``1.0``.

Sources:
- context precision: Ragas ``context_precision`` (mean of precision@k over the relevant positions k).
- context recall: Ragas ``context_recall`` (share of ground-truth statements attributable to the context).
- context relevance: TruLens ``context_relevance`` (share of retrieved chunks relevant to the question).
- answer correctness: Ragas ``answer_correctness`` (factual F1 of TP/FP/FN statements combined with the
  semantic similarity of answer and ground truth, weights 0.75 and 0.25 by default).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction

__all__ = [
    "answer_correctness",
    "average_precision",
    "bag",
    "cosine",
    "factual_f1",
    "share",
]


def average_precision(relevant: Sequence[bool]) -> float:
    """Rank-aware context precision of one ranked retrieval.

    ``relevant[i]`` says whether the chunk at rank ``i`` (0-based) is relevant. The score is the mean of
    precision@k over the positions k that hold a relevant chunk::

        score = Σ_k (precision@k · rel_k) / (number of relevant chunks)

    A perfect ranking (every relevant chunk above every irrelevant one) scores exactly 1.0; no relevant
    chunk, or an empty retrieval, scores 0.0.

    Example: ``[False, True, True]`` → (1/2 + 2/3) / 2 = 7/12 ≈ 0.5833.
    """
    hits = 0
    total = Fraction(0)
    for k, rel in enumerate(relevant, start=1):
        if rel:
            hits += 1
            total += Fraction(hits, k)
    if hits == 0:
        return 0.0
    return float(total / hits)


def share(flags: Sequence[bool]) -> float | None:
    """Share of true flags (``None`` for an empty sequence: undefined, the caller decides).

    Used for context recall (supported ground-truth statements / all ground-truth statements) and context
    relevance (relevant chunks / retrieved chunks).
    """
    if not flags:
        return None
    return sum(1 for f in flags if f) / len(flags)


def factual_f1(tp: int, fp: int, fn: int) -> float | None:
    """Ragas factual F1: ``TP / (TP + 0.5·(FP + FN))``.

    ``tp``: answer statements supported by the ground truth; ``fp``: answer statements not in the ground
    truth; ``fn``: ground-truth statements missing from the answer. Returns ``None`` when all three are 0
    (no statements at all: undefined).

    Raises:
        ValueError: a count is negative.
    """
    if min(tp, fp, fn) < 0:
        raise ValueError("statement counts must be >= 0")
    denom = Fraction(tp) + Fraction(fp + fn, 2)
    if denom == 0:
        return None
    return float(Fraction(tp) / denom)


def answer_correctness(
    f1: float, similarity: float | None, weights: tuple[float, float] = (0.75, 0.25)
) -> float:
    """Ragas answer correctness: ``w_f1·F1 + w_sim·similarity``, normalised by the weights' sum.

    Args:
        f1: factual F1 in [0, 1].
        similarity: semantic similarity in [0, 1]; ``None`` drops the similarity term (score = F1).
        weights: ``(w_f1, w_sim)``, non-negative, not both 0; default (0.75, 0.25) as in Ragas.

    Raises:
        ValueError: a weight is negative or both are 0.
    """
    w_f1, w_sim = weights
    if w_f1 < 0 or w_sim < 0 or (w_f1 + w_sim) == 0:
        raise ValueError(f"weights must be >= 0 and not both 0, got {weights}")
    if similarity is None:
        return _clip(f1)
    return _clip((w_f1 * f1 + w_sim * similarity) / (w_f1 + w_sim))


def cosine(a: Sequence[float] | Mapping[str, float], b: Sequence[float] | Mapping[str, float]) -> float:
    """Cosine similarity of two vectors (dense sequences or sparse ``{feature: weight}`` maps), clipped to [0, 1].

    Embedding cosines can be slightly negative; ragpulse clips them to 0 (scores live in [0, 1]). A zero
    vector gives 0.0.

    Raises:
        ValueError: dense vectors of different lengths.
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        dot = sum(w * b.get(k, 0.0) for k, w in a.items())
        na = math.sqrt(sum(w * w for w in a.values()))
        nb = math.sqrt(sum(w * w for w in b.values()))
    else:
        va = list(a.values()) if isinstance(a, Mapping) else list(a)
        vb = list(b.values()) if isinstance(b, Mapping) else list(b)
        if len(va) != len(vb):
            raise ValueError(f"vectors differ in length: {len(va)} != {len(vb)}")
        dot = math.fsum(x * y for x, y in zip(va, vb, strict=True))
        na = math.sqrt(math.fsum(x * x for x in va))
        nb = math.sqrt(math.fsum(y * y for y in vb))
    if na == 0 or nb == 0:
        return 0.0
    return _clip(dot / (na * nb))


def bag(tokens: Sequence[str]) -> dict[str, float]:
    """Term-frequency vector of a token list (for :func:`cosine`)."""
    return {k: float(v) for k, v in Counter(tokens).items()}


def _clip(x: float) -> float:
    if not math.isfinite(x):
        return 0.0
    return min(1.0, max(0.0, x))
