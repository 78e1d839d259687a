"""Lenient text decoding shared by the sources: one bad character never costs a trace.

SDKs cut strings at byte or UTF-16 boundaries (a half emoji, ``"\\ud83d"``; the first two bytes of a
three-byte character), and such text cannot be stored (PostgreSQL rejects lone surrogates) or encoded as
protobuf. Everything here replaces what cannot be UTF-8 with U+FFFD (``�``) and keeps the rest unchanged:

- :func:`repair_text`: a ``str`` with lone surrogates → the same text with each lone surrogate replaced
  (valid surrogate *pairs*, as ``json.loads`` leaves them when a sender escapes an emoji as two halves that
  were never joined, are joined).
- :func:`repair_json`: the same, applied to every string (keys included) of a parsed JSON value.
- :func:`decode_utf8`: bytes → ``str``, invalid UTF-8 sequences replaced.
- :func:`has_escaped_surrogate`: a cheap test on raw JSON text, so a clean payload is not walked at all.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REPLACEMENT", "decode_utf8", "has_escaped_surrogate", "repair_json", "repair_text"]

#: U+FFFD REPLACEMENT CHARACTER.
REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPED_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def repair_text(s: str) -> str:
    """``s`` with lone surrogates replaced by U+FFFD (pairs joined); ``s`` itself when it has none."""
    if not _SURROGATE.search(s):
        return s
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def repair_json(value: Any) -> Any:
    """``value`` (a parsed JSON value) with :func:`repair_text` applied to every string and key."""
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, list):
        return [repair_json(v) for v in value]
    if isinstance(value, dict):
        return {repair_text(k): repair_json(v) for k, v in value.items()}
    return value


def decode_utf8(data: bytes) -> str:
    """``data`` decoded as UTF-8, each invalid sequence replaced by U+FFFD."""
    return data.decode("utf-8", "replace")


def has_escaped_surrogate(data: bytes | str) -> bool:
    """True when JSON text ``data`` contains a ``\\uD800``–``\\uDFFF`` escape (a possible lone surrogate)."""
    if isinstance(data, str):
        return _ESCAPED_SURROGATE.search(data) is not None
    return _ESCAPED_SURROGATE_BYTES.search(data) is not None
