"""Lenient text, shared by every source and the store: one bad character never costs a trace.

SDKs cut strings at byte or UTF-16 boundaries (a half emoji, ``"\\ud83d"``; the first two bytes of a
three-byte character), and such text cannot be stored (PostgreSQL rejects lone surrogates and NUL) or encoded
as protobuf. Everything here replaces what cannot be UTF-8 with U+FFFD (``�``) and keeps the rest unchanged:

- :func:`repair_text`: a ``str`` with lone surrogates → the same text with each lone surrogate replaced
  (valid surrogate *pairs*, as ``json.loads`` leaves them when a sender escapes an emoji as two halves that
  were never joined, are joined).
- :func:`clean_text`: :func:`repair_text` plus NUL removal — what the store applies to every text it writes.
- :func:`repair_json` / :func:`clean_json`: the same, applied to every string (keys included) of a parsed
  JSON value.
- :func:`decode_utf8`: bytes → ``str``, invalid UTF-8 sequences replaced.
- :func:`has_escaped_surrogate` / :func:`json_text_needs_cleaning`: cheap tests on raw JSON text, so a clean
  payload is not walked at all.

Used by Kafka events (:mod:`ragpulse.ingest.events`), OTLP decoding (:mod:`ragpulse.ingest.otlp.decode`),
test-set files (:mod:`ragpulse.runs.testset_files`) and the store's rows (:mod:`ragpulse.store.rows`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, overload

from ragpulse.model import BIDI_CONTROLS

__all__ = [
    "BIDI_CONTROLS",
    "REPLACEMENT",
    "clean_json",
    "clean_text",
    "decode_utf8",
    "has_bidi_control",
    "has_escaped_surrogate",
    "json_text_needs_cleaning",
    "mark_bidi",
    "needs_cleaning",
    "repair_json",
    "repair_text",
]

#: U+FFFD REPLACEMENT CHARACTER.
REPLACEMENT = "\ufffd"

#: :data:`ragpulse.model.BIDI_CONTROLS` (defined with the id rule that refuses them).
_BIDI_RE = re.compile("[\u202a-\u202e\u2066-\u2069]")

_SURROGATE = re.compile("[\ud800-\udfff]")
_BAD = re.compile("[\x00\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPED_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_ESCAPED_BAD = re.compile(r"\\u(?:[dD][89a-fA-F]|0000)")


def repair_text(s: str) -> str:
    """``s`` with lone surrogates replaced by U+FFFD (pairs joined); ``s`` itself when it has none."""
    if not _SURROGATE.search(s):
        return s
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def needs_cleaning(text: str) -> bool:
    """True when ``text`` holds a NUL or a surrogate code point. ASCII text (``str.isascii`` reads a flag
    CPython keeps on every string) can hold only the NUL, found without a regex."""
    if text.isascii():
        return "\x00" in text
    return _BAD.search(text) is not None


@overload
def clean_text(text: str) -> str: ...
@overload
def clean_text(text: None) -> None: ...
def clean_text(text: str | None) -> str | None:
    """``text`` without NUL characters and with lone surrogates replaced by U+FFFD (``None`` stays)."""
    if text is None or not needs_cleaning(text):
        return text
    return repair_text(text.replace("\x00", ""))


def repair_json(value: Any) -> Any:
    """``value`` (a parsed JSON value) with :func:`repair_text` applied to every string and key."""
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, list):
        return [repair_json(v) for v in value]
    if isinstance(value, dict):
        return {repair_text(k): repair_json(v) for k, v in value.items()}
    return value


def clean_json(value: Any) -> Any:
    """``value`` (parsed JSON: dicts, lists, strings, numbers) with :func:`clean_text` applied to every string,
    keys included (containers are rebuilt; call it only when :func:`json_text_needs_cleaning` says so)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def has_escaped_surrogate(data: bytes | str) -> bool:
    """True when JSON text ``data`` contains a ``\\uD800``–``\\uDFFF`` escape (a possible lone surrogate)."""
    if isinstance(data, str):
        return _ESCAPED_SURROGATE.search(data) is not None
    return _ESCAPED_SURROGATE_BYTES.search(data) is not None


def json_text_needs_cleaning(text: str) -> bool:
    """True when JSON ``text`` may decode to a string with a NUL or a lone surrogate: it holds a ``\\u0000`` or
    a surrogate escape (a valid pair matches too; cleaning it changes nothing), or a raw one."""
    return _ESCAPED_BAD.search(text) is not None or _BAD.search(text) is not None


def decode_utf8(data: bytes) -> str:
    """``data`` decoded as UTF-8, each invalid sequence replaced by U+FFFD (never raises)."""
    return data.decode("utf-8", "replace")


def has_bidi_control(text: str) -> bool:
    """True when ``text`` holds one of :data:`BIDI_CONTROLS`."""
    return _BIDI_RE.search(text) is not None


def mark_bidi(text: str) -> str:
    """``text`` with each of :data:`BIDI_CONTROLS` replaced by its visible name, ``[U+202E]`` (what the portal
    shows instead of the invisible control)."""
    return _BIDI_RE.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)
