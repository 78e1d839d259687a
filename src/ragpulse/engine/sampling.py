"""Deterministic sampling: the same trace id gets the same decision on every replica and every run."""

from __future__ import annotations

import hashlib

__all__ = ["is_sampled", "sample_point"]

_SCALE = float(1 << 64)


def sample_point(trace_id: str) -> float:
    """Map a trace id to a point in [0, 1): the first 8 bytes of ``sha256(trace_id)`` (UTF-8) over 2**64."""
    digest = hashlib.sha256(trace_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


def is_sampled(trace_id: str, rate: float) -> bool:
    """True when the trace is judged at sampling ``rate`` (0–1): ``sample_point(trace_id) < rate``.

    ``rate >= 1`` samples everything and ``rate <= 0`` nothing, without hashing.
    """
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    return sample_point(trace_id) < rate
