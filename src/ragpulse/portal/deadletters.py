"""Dead letters: inputs a source could not process (Kafka messages, OTLP requests), with reason and origin.

Shared by ``GET /api/v1/dead-letters`` and the CLI. The payload is shown as text when it is UTF-8 (cut to
:data:`PREVIEW_CHARS`), else as base64 of its first bytes. Under ``store.redact_text`` no payload is shown
(``payload_encoding`` ``redacted``, ``redacted`` true): dead letters written then keep no payload, and rows
written before redaction was turned on keep theirs in the database but are not served.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from ragpulse.errors import BadRequest
from ragpulse.query import DEFAULT_LIMIT, Page, decode_cursor, encode_cursor
from ragpulse.store import PostgresStore

__all__ = ["PREVIEW_CHARS", "DeadLetter", "list_dead_letters"]

#: Characters of a payload shown.
PREVIEW_CHARS = 2000


class DeadLetter(BaseModel):
    """One dead letter. ``origin``: where it came from (Kafka topic/partition/offset, OTLP peer …, as the
    source recorded it); ``payload_encoding`` is ``utf-8`` or ``base64``; ``payload_bytes`` the full size."""

    id: int
    source: str
    reason: str
    origin: dict[str, Any]
    created_at: datetime
    payload: str
    payload_encoding: str
    payload_bytes: int
    #: no payload is shown: texts are stored redacted (``payload_encoding`` is ``redacted``, ``payload`` empty)
    redacted: bool = False


def _preview(data: bytes) -> tuple[str, str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(data[: PREVIEW_CHARS * 3 // 4]).decode(), "base64"
    return (text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"), "utf-8"


async def list_dead_letters(
    store: PostgresStore,
    *,
    source: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    redact_text: bool = False,
) -> Page[DeadLetter]:
    """Dead letters newest first, optionally of one ``source`` (``kafka``, ``otlp``); ``redact_text``: show no
    payload of any row (also of rows stored before redaction was turned on).

    Raises:
        BadRequest: a bad cursor or limit.
    """
    if not 1 <= limit <= 500:
        raise BadRequest("limit must be 1–500")
    before = None
    if cursor is not None:
        key = decode_cursor(cursor, 1)[0]
        if not isinstance(key, int):
            raise BadRequest(f"invalid cursor {cursor[:40]!r}")
        before = key
    rows = await store.dead_letter_page(source=source, limit=limit + 1, before_id=before)
    items = []
    for r in rows[:limit]:
        data = bytes(r["payload"])
        meta = dict(r["meta"] or {})
        hidden = redact_text or bool(meta.get("redacted"))
        text, enc = ("", "redacted") if hidden else _preview(data)
        size = meta.get("payload_bytes", len(data)) if meta.get("redacted") else len(data)
        items.append(
            DeadLetter(
                id=r["id"],
                source=r["source"],
                reason=r["reason"],
                origin=meta,
                created_at=r["created_at"],
                payload=text,
                payload_encoding=enc,
                payload_bytes=int(size),
                redacted=hidden,
            )
        )
    nxt = encode_cursor([rows[limit - 1]["id"]]) if len(rows) > limit else None
    return Page[DeadLetter](items=items, next_cursor=nxt)
