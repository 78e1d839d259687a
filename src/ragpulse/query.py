"""The query kit shared by every list of the portal and the CLI: pages of list results with their opaque keyset
cursors, and time windows (``since``/``until`` as ISO-8601 times or relative spans such as ``24h``, ``7d``).

A list answers ``{"items": [...], "next_cursor": "…" | null}``; a cursor is the URL-safe base64 of a small JSON
array holding the sort key of the page's last item (e.g. ``[received_at ISO-8601, trace_id]``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ragpulse.errors import BadRequest

__all__ = [
    "DEFAULT_LIMIT",
    "LIVE_SOURCES",
    "SOURCE_CHOICES",
    "Page",
    "SourceScope",
    "before",
    "bounds",
    "decode_cursor",
    "encode_cursor",
    "parse_span",
    "parse_time",
    "source_scope",
    "time_key",
    "window",
]

#: Items per page when no ``limit`` is given.
DEFAULT_LIMIT = 50

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list, newest first; ``next_cursor`` fetches the next page (``None`` on the last)."""

    items: list[T]
    next_cursor: str | None = None


def encode_cursor(key: list[Any]) -> str:
    """The cursor for sort key ``key`` (JSON-able values; datetimes as ISO-8601)."""
    raw = json.dumps([v.isoformat() if isinstance(v, datetime) else v for v in key], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, width: int) -> list[Any]:
    """The sort key inside ``cursor`` (a list of ``width`` values).

    Raises:
        BadRequest: the cursor was not made by :func:`encode_cursor`.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError) as e:
        raise BadRequest(f"invalid cursor {cursor[:40]!r}") from e
    if not isinstance(key, list) or len(key) != width:
        raise BadRequest(f"invalid cursor {cursor[:40]!r}")
    return key


def time_key(cursor: str | None) -> tuple[datetime, str] | None:
    """Decode a ``[time, id]`` cursor (``None`` stays ``None``).

    Raises:
        BadRequest: not such a cursor.
    """
    if cursor is None:
        return None
    key = decode_cursor(cursor, 2)
    try:
        return datetime.fromisoformat(str(key[0])), str(key[1])
    except ValueError as e:
        raise BadRequest(f"invalid cursor {cursor[:40]!r}") from e


# Time windows

_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_span(text: str) -> timedelta:
    """``30s``, ``15m``, ``24h``, ``7d``, ``2w`` → a timedelta.

    Raises:
        BadRequest: not such a span.
    """
    m = _SPAN.match(text)
    if not m:
        raise BadRequest(f"invalid time span {text[:100]!r}: expected e.g. 15m, 24h or 7d")
    try:
        return timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])
    except (OverflowError, ValueError) as e:  # more than timedelta's 999999999 days
        raise BadRequest(f"invalid time span {text[:100]!r}: too long") from e


def before(t: datetime, span: timedelta, text: str) -> datetime:
    """``t - span``; ``text`` (the span as given) names it in the error.

    Raises:
        BadRequest: the result is before year 1 (``since=999999d``).
    """
    try:
        return t - span
    except OverflowError as e:
        raise BadRequest(f"invalid time span {text[:100]!r}: reaches before year 1") from e


_EPOCH_MS = re.compile(r"^\d{11,15}$")


def parse_time(text: str | None, *, now: datetime | None = None) -> datetime | None:
    """An ISO-8601 time (naive = UTC), Unix epoch milliseconds (11–15 digits: Grafana's ``${__from}`` /
    ``${__to}`` and its ``from``/``to`` URL parameters), a relative span meaning that long before ``now``
    (``24h``; Grafana's ``now-24h`` and ``now`` too);
    ``None`` stays. The one time parser of the API's and the UI's ``since``/``until``.

    Raises:
        BadRequest: none of these.
    """
    if text is None or not text.strip():
        return None
    t = text.strip()
    if t == "now" or (t.startswith("now-") and _SPAN.match(t[4:])):  # Grafana's relative times
        return before(now or datetime.now(UTC), parse_span(t[4:]) if t != "now" else timedelta(0), t)
    if _SPAN.match(t):
        return before(now or datetime.now(UTC), parse_span(t), t)
    if _EPOCH_MS.match(t):
        try:
            return datetime.fromtimestamp(int(t) / 1000, UTC)
        except (OverflowError, OSError, ValueError) as e:
            raise BadRequest(f"invalid time {text!r}: epoch milliseconds out of range") from e
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError as e:
        raise BadRequest(
            f"invalid time {text!r}: expected ISO-8601 (2026-12-01T10:00:00Z) or a span (24h)"
        ) from e
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def bounds(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``(since, until)`` as :func:`parse_time` reads them, either ``None`` when not given; a span ``since``
    (``1h``) is that long before ``until`` when ``until`` is a time, else before now — so a window that came
    with an end (a Grafana link) and then gets a shorter span stays a window, never "since after until".

    Raises:
        BadRequest: a bad time.
    """
    now = datetime.now(UTC)
    end = parse_time(until, now=now)
    return parse_time(since, now=end or now), end


def window(since: str | None, until: str | None, default: timedelta) -> tuple[datetime, datetime]:
    """``(since, until)`` (:func:`bounds`) with ``until`` defaulting to now and ``since`` to
    ``until - default``.

    Raises:
        BadRequest: a bad time, or ``since`` not before ``until``.
    """
    start, end = bounds(since, until)
    end = end or datetime.now(UTC)
    if start is None:
        try:
            start = end - default
        except OverflowError as e:
            raise BadRequest(f"invalid time {str(until)[:100]!r}: too early") from e
    if start >= end:
        raise BadRequest("since must be before until")
    return start, end


# Sources of traces

#: What ``source`` may say in the API and the UI: ``live`` (the default: traffic from the RAG services, Kafka
#: and OTLP, without the traces of replay runs sent through them), one source, or ``all`` (replays and
#: ``/evaluate`` calls too).
SOURCE_CHOICES = ("live", "kafka", "otlp", "replay", "api", "all")
#: The sources of live traffic.
LIVE_SOURCES = ("kafka", "otlp")


class SourceScope(BaseModel):
    """A ``source`` choice for the store: traces whose source is ``only`` (when set) and not one of
    ``excluded``."""

    only: str | None = None
    excluded: tuple[str, ...] = ()
    #: ``live``: traces of a run are left out too, whatever their transport (``replay --via kafka|otlp``)
    no_runs: bool = False


def source_scope(source: str | None, *, include_api: bool = False, run_id: str | None = None) -> SourceScope:
    """The traces a ``source`` choice (:data:`SOURCE_CHOICES`) means. Not given: ``live`` — unless a
    ``run_id`` is asked for (a run's traces are replays) or ``include_api`` (the older switch), which mean
    ``all``.

    Raises:
        BadRequest: not one of :data:`SOURCE_CHOICES`.
    """
    if source is None or not source.strip():
        source = "all" if run_id is not None or include_api else "live"
    source = source.strip()
    if source not in SOURCE_CHOICES:
        raise BadRequest(f"unknown source {source!r}: one of {', '.join(SOURCE_CHOICES)}")
    if source == "all":
        return SourceScope()
    if source == "live":
        return SourceScope(excluded=("replay", "api"), no_runs=True)
    return SourceScope(only=source)
