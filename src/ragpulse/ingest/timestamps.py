"""Trace times from the wire: epoch numbers by magnitude, and the plausibility rule every source applies.

One rule for Kafka events and OTLP spans alike (``docs/ingestion.md``, "Timestamps"):

- :func:`epoch_to_datetime` reads a Unix epoch number in seconds, milliseconds, microseconds or nanoseconds,
  chosen by its magnitude (see :data:`EPOCH_UNITS`); values that no ``datetime`` can hold give ``None``.
- :func:`is_plausible` accepts a time from :data:`EARLIEST` (2000-01-01 UTC) up to :data:`MAX_AHEAD` (one day)
  after the receive time.
- :func:`plausible_times` applies the rule to a trace's start/end: an implausible end (or start) time is
  replaced by the receive time and the trace is flagged ``time_replaced`` (typed field of
  :class:`~ragpulse.model.Trace`), which keeps it out of the evaluation-lag histogram.
- :func:`plausible_latency` accepts a latency from 0 to :data:`MAX_LATENCY` (one day); anything else (negative,
  ``1e297`` s, not finite) is unknown, with the reason.
- :func:`settle_times` applies both to a trace (what every source calls): times and latency as stored, plus the
  notes for the trace's attributes — ``latency_refused`` (why the latency is unknown) and ``clock_skew_s`` (the
  source's end time minus the receive time, seconds, when the end time was replaced: a sender whose clock is
  wrong keeps its latency when its durations are plausible, and the trace says by how much its clock is off).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

__all__ = [
    "EARLIEST",
    "EPOCH_UNITS",
    "MAX_AHEAD",
    "MAX_LATENCY",
    "SettledTimes",
    "epoch_to_datetime",
    "is_plausible",
    "minus_latency",
    "plausible_latency",
    "plausible_times",
    "settle_times",
]

#: Earliest plausible trace time (UTC).
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
#: How far after the receive time a trace time may lie (clock skew allowance).
MAX_AHEAD = timedelta(days=1)
#: Longest plausible end-to-end latency of one RAG request: a longer one is a unit or clock mistake.
MAX_LATENCY = timedelta(days=1)

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


def plausible_latency(latency_s: float | None) -> tuple[float | None, str | None]:
    """``(latency_s, None)`` when ``latency_s`` (seconds) is plausible — finite, from 0 to :data:`MAX_LATENCY`;
    ``(None, why)`` when it is not (``why`` e.g. ``"-0.005 s is negative"``); ``(None, None)`` when unknown.

    Never raises.
    """
    if latency_s is None:
        return None, None
    if not math.isfinite(latency_s):
        return None, f"{latency_s!r} s is not a finite number"
    if latency_s < 0:
        return None, f"{latency_s!r} s is negative"
    limit = MAX_LATENCY.total_seconds()
    if latency_s > limit:
        return None, f"{latency_s!r} s is above {limit:g} s (one day)"
    return latency_s, None


class SettledTimes(NamedTuple):
    """A trace's times after :func:`settle_times`: what the :class:`~ragpulse.model.Trace` stores."""

    start: datetime | None
    end: datetime | None
    latency_s: float | None
    time_replaced: bool
    #: ragpulse's notes for the trace's attributes: ``latency_refused`` (str) and ``clock_skew_s`` (float).
    notes: dict[str, Any]


def settle_times(
    start: datetime | None,
    end: datetime | None,
    received_at: datetime,
    latency_s: float | None,
    *,
    end_replaced: bool = False,
) -> SettledTimes:
    """The one rule for a trace's start, end and latency, whatever its source (docs/ingestion.md, "Timestamps").

    Args:
        start: the source's start time (``None``: derived as ``end - latency`` when both are known).
        end: the source's end time; ``None`` with ``end_replaced`` for one that no date can hold.
        received_at: when ragpulse received the trace.
        latency_s: the source's latency, seconds (Kafka ``latencyMs / 1000``; OTLP the root span's end minus
            start, which needs no correct clock): :func:`plausible_latency` decides whether it is kept.
        end_replaced: the source's end time existed but no date can hold it (replaced by ``received_at``).

    An implausible end (:func:`is_plausible`) is replaced by ``received_at`` and ``start`` becomes
    ``end - latency`` (:func:`plausible_times`); ``notes["clock_skew_s"]`` is then the source's end minus
    ``received_at`` (seconds, 3 decimals; negative when the sender's clock is behind). Never raises.
    """
    latency, why = plausible_latency(latency_s)
    notes: dict[str, Any] = {}
    if why is not None:
        notes["latency_refused"] = f"{why}: latency unknown"
    if end_replaced:
        end = received_at
    elif end is not None and not is_plausible(end, received_at):
        aware = end if end.tzinfo else end.replace(tzinfo=UTC)
        received = received_at if received_at.tzinfo else received_at.replace(tzinfo=UTC)
        notes["clock_skew_s"] = round((aware - received).total_seconds(), 3)
    if start is None and end is not None:
        start = minus_latency(end, latency)
    start, end, moved = plausible_times(start, end, received_at, latency)
    return SettledTimes(start, end, latency, end_replaced or moved, notes)
