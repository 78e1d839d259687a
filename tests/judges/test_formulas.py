"""Formulas of the reference metrics on hand-computed cases."""

from __future__ import annotations

import pytest

from ragpulse.judges.formulas import answer_correctness, average_precision, bag, cosine, factual_f1, share


def test_average_precision_perfect_ranking_is_exactly_one() -> None:
    assert average_precision([True]) == 1.0
    assert average_precision([True, True, True, False, False]) == 1.0
    # 1/1 + 2/2 + ... accumulates without rounding for long rankings too
    assert average_precision([True] * 97 + [False] * 3) == 1.0


def test_average_precision_hand_computed() -> None:
    # relevant at ranks 2 and 3: (1/2 + 2/3) / 2 = 7/12
    assert average_precision([False, True, True]) == pytest.approx(7 / 12, abs=1e-12)
    # relevant at ranks 1 and 3: (1/1 + 2/3) / 2 = 5/6
    assert average_precision([True, False, True]) == pytest.approx(5 / 6, abs=1e-12)
    # RGB-like labels 0,0,1,1,1: (1/3 + 2/4 + 3/5) / 3 = 0.47777…
    assert average_precision([False, False, True, True, True]) == pytest.approx((1 / 3 + 2 / 4 + 3 / 5) / 3)


def test_average_precision_edge_cases() -> None:
    assert average_precision([]) == 0.0
    assert average_precision([False, False]) == 0.0


def test_share() -> None:
    assert share([]) is None
    assert share([True, False, False, True]) == 0.5
    assert share([False]) == 0.0


def test_factual_f1() -> None:
    # TP=2, FP=1, FN=1 → 2 / (2 + 1) = 2/3
    assert factual_f1(2, 1, 1) == pytest.approx(2 / 3)
    assert factual_f1(3, 0, 0) == 1.0
    assert factual_f1(0, 2, 1) == 0.0
    assert factual_f1(0, 0, 0) is None
    with pytest.raises(ValueError):
        factual_f1(-1, 0, 0)


def test_answer_correctness_weights() -> None:
    # 0.75·(2/3) + 0.25·0.8 = 0.5 + 0.2 = 0.7
    assert answer_correctness(2 / 3, 0.8) == pytest.approx(0.7)
    assert answer_correctness(0.5, None) == 0.5
    # custom weights are normalised: (1·0.5 + 1·1.0)/2
    assert answer_correctness(0.5, 1.0, (1.0, 1.0)) == pytest.approx(0.75)
    assert answer_correctness(0.4, 0.9, (1.0, 0.0)) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        answer_correctness(0.5, 0.5, (0.0, 0.0))


def test_cosine() -> None:
    assert cosine([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0
    assert cosine([1.0, 0.0], [-1.0, 0.0]) == 0.0  # clipped
    assert cosine([3.0, 4.0], [4.0, 3.0]) == pytest.approx(24 / 25)
    assert cosine([0.0, 0.0], [1.0, 1.0]) == 0.0
    assert cosine(bag(["a", "b", "b"]), bag(["b"])) == pytest.approx(2 / (5**0.5))
    with pytest.raises(ValueError):
        cosine([1.0], [1.0, 2.0])
