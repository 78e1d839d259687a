"""Pages of list results and their opaque keyset cursors (shared by every list of the portal and the CLI).

A list answers ``{"items": [...], "next_cursor": "…" | null}``; a cursor is the URL-safe base64 of a small JSON
array holding the sort key of the page's last item (e.g. ``[received_at ISO-8601, trace_id]``).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from ragpulse.services.errors import BadRequest

__all__ = ["DEFAULT_LIMIT", "Page", "decode_cursor", "encode_cursor", "time_key"]

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
