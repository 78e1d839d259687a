"""Time windows of the portal and CLI: ``since``/``until`` as ISO-8601 times or relative spans (``24h``, ``7d``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from ragpulse.services.errors import BadRequest

__all__ = ["parse_span", "parse_time", "window"]

_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_span(text: str) -> timedelta:
    """``30s``, ``15m``, ``24h``, ``7d``, ``2w`` → a timedelta.

    Raises:
        BadRequest: not such a span.
    """
    m = _SPAN.match(text)
    if not m:
        raise BadRequest(f"invalid time span {text!r}: expected e.g. 15m, 24h or 7d")
    return timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])


def parse_time(text: str | None, *, now: datetime | None = None) -> datetime | None:
    """An ISO-8601 time (naive = UTC) or a relative span meaning that long before ``now``; ``None`` stays.

    Raises:
        BadRequest: neither.
    """
    if text is None or not text.strip():
        return None
    t = text.strip()
    if _SPAN.match(t):
        return (now or datetime.now(UTC)) - parse_span(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError as e:
        raise BadRequest(
            f"invalid time {text!r}: expected ISO-8601 (2026-12-01T10:00:00Z) or a span (24h)"
        ) from e
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def window(since: str | None, until: str | None, default: timedelta) -> tuple[datetime, datetime]:
    """``(since, until)`` with ``until`` defaulting to now and ``since`` to ``until - default``.

    Raises:
        BadRequest: a bad time, or ``since`` not before ``until``.
    """
    now = datetime.now(UTC)
    end = parse_time(until, now=now) or now
    start = parse_time(since, now=now) or end - default
    if start >= end:
        raise BadRequest("since must be before until")
    return start, end
