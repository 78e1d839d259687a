"""Trace times from the wire: epoch numbers by magnitude, and the plausibility rule every source applies.

One rule for Kafka events and OTLP spans alike (``docs/ingestion.md``, "Timestamps"):

- :func:`epoch_to_datetime` reads a Unix epoch number in seconds, milliseconds, microseconds or nanoseconds,
  chosen by its magnitude (see :data:`EPOCH_UNITS`); values that no ``datetime`` can hold give ``None``.
- :func:`is_plausible` accepts a time from :data:`EARLIEST` (2000-01-01 UTC) up to :data:`MAX_AHEAD` (one day)
  after the receive time.
- :func:`plausible_times` applies the rule to a trace's start/end: an implausible end (or start) time is
  replaced by the receive time and the trace is flagged ``time_replaced`` (typed field of
  :class:`~ragpulse.model.Trace`), which keeps it out of the evaluation-lag histogram.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

__all__ = [
    "EARLIEST",
    "EPOCH_UNITS",
    "MAX_AHEAD",
    "epoch_to_datetime",
    "is_plausible",
    "minus_latency",
    "plausible_times",
]

#: Earliest plausible trace time (UTC).
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
#: How far after the receive time a trace time may lie (clock skew allowance).
MAX_AHEAD = timedelta(days=1)

#: ``(upper bound of |value|, divisor to seconds, unit name)``, checked in order: below 1e11 the value is
#: seconds (1e11 s is the year 5138), below 1e14 milliseconds, below 1e17 microseconds, else nanoseconds.
EPOCH_UNITS: tuple[tuple[float, float, str], ...] = (
    (1e11, 1.0, "s"),
    (1e14, 1e3, "ms"),
    (1e17, 1e6, "us"),
    (math.inf, 1e9, "ns"),
)


def epoch_to_datetime(value: float) -> datetime | None:
    """The UTC time of Unix epoch ``value`` in the unit its magnitude implies (:data:`EPOCH_UNITS`).

    Returns ``None`` for a non-finite value, a value too large for a float, or a time outside what
    ``datetime`` can represent (years 1–9999). Never raises.
    """
    try:
        v = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    if not math.isfinite(v):
        return None
    for bound, divisor, _ in EPOCH_UNITS:
        if abs(v) < bound:
            try:
                return datetime.fromtimestamp(v / divisor, tz=UTC)
            except (OverflowError, OSError, ValueError):
                return None
    return None  # pragma: no cover (the last bound is infinite)


def is_plausible(t: datetime, received_at: datetime) -> bool:
    """True when ``t`` is on or after :data:`EARLIEST` and at most :data:`MAX_AHEAD` after ``received_at``
    (naive times are taken as UTC)."""
    t = t if t.tzinfo else t.replace(tzinfo=UTC)
    received_at = received_at if received_at.tzinfo else received_at.replace(tzinfo=UTC)
    if t < EARLIEST:
        return False
    try:
        return t <= received_at + MAX_AHEAD
    except OverflowError:  # received_at near year 9999
        return True


def plausible_times(
    start: datetime | None,
    end: datetime | None,
    received_at: datetime,
    latency_s: float | None = None,
) -> tuple[datetime | None, datetime | None, bool]:
    """Apply the plausibility rule to a trace's ``(start, end)``; return ``(start, end, time_replaced)``.

    - an implausible ``end`` becomes ``received_at``; ``start`` then becomes ``end - latency_s`` when the
      latency is known and fits, else ``None``;
    - an implausible ``start`` with a plausible ``end`` becomes ``end - latency_s`` (or ``None``);
    - a missing time stays ``None`` and is not a replacement.

    Never raises.
    """
    replaced = False
    if end is not None and not is_plausible(end, received_at):
        end, replaced = received_at, True
        start = None
    if start is not None and not is_plausible(start, received_at):
        start, replaced = None, True
    if start is None and replaced and end is not None:
        start = minus_latency(end, latency_s)
    return start, end, replaced


def minus_latency(end: datetime, latency_s: float | None) -> datetime | None:
    """``end - latency_s`` seconds, or ``None`` when the latency is unknown, not finite or out of range."""
    if latency_s is None or not math.isfinite(latency_s) or latency_s < 0:
        return None
    try:
        return end - timedelta(seconds=latency_s)
    except (OverflowError, ValueError):
        return None
