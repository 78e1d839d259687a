"""Text redaction for teams that may not keep production text (``settings.store.redact_text``).

A redacted text is stored as ``sha256:<64 hex>`` of its UTF-8 bytes, plus its length in characters in a
separate column, so equal texts can still be matched and sizes analysed without keeping the text.
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["ATTRIBUTE_TEXT_LIMIT", "redact", "redact_attributes", "redact_reason"]

#: String attribute values longer than this (characters) are redacted too (they may carry prompts/answers).
ATTRIBUTE_TEXT_LIMIT = 64


def redact(text: str | None) -> str | None:
    """``sha256:<hex>`` of ``text`` (UTF-8), or ``None`` for ``None``."""
    if text is None:
        return None
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def redact_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """Copy of ``attributes`` with string values over :data:`ATTRIBUTE_TEXT_LIMIT` characters redacted.

    Nested mappings and lists are walked; short strings, numbers and booleans are kept.
    """

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return redact(v) if len(v) > ATTRIBUTE_TEXT_LIMIT else v
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return {k: walk(v) for k, v in attributes.items()}


def redact_reason(reason: str, ok: bool) -> str:
    """The reason kept for a redacted judgement: ``""`` for ``ok`` (free text may quote the answer), else
    its machine reason code (``no_reference``, ``judge_unavailable``, …)."""
    if ok:
        return ""
    return reason.split(":", 1)[0].strip() or "redacted"
