"""Deterministic sampling by sha256 of the trace id."""

from __future__ import annotations

import hashlib

from ragpulse.engine import is_sampled, sample_point


def test_sample_point_is_sha256_prefix_over_2_64() -> None:
    tid = "4bf92f3577b34da6a3ce929d0e0e4736"
    expected = int(hashlib.sha256(tid.encode()).hexdigest()[:16], 16) / 2**64
    assert sample_point(tid) == expected
    assert 0.0 <= sample_point(tid) < 1.0


def test_same_decision_every_time_and_monotone_in_rate() -> None:
    ids = [f"trace-{i}" for i in range(2000)]
    first = [is_sampled(t, 0.3) for t in ids]
    assert first == [is_sampled(t, 0.3) for t in ids]
    # a trace sampled at 0.3 is also sampled at any higher rate
    assert all(is_sampled(t, 0.6) for t, s in zip(ids, first, strict=True) if s)
    share = sum(first) / len(ids)
    assert 0.27 < share < 0.33


def test_edge_rates() -> None:
    assert is_sampled("x", 1.0)
    assert not is_sampled("x", 0.0)
