"""Lenient text: what every source and the store do to text so that one bad character never costs a trace.

PostgreSQL rejects NUL in ``text``/``jsonb``, and a lone UTF-16 surrogate (``"\\ud83d"``, half an emoji cut
by an SDK) cannot be encoded as UTF-8 at all. The rule everywhere (Kafka events, OTLP requests, test-set
files, the store's last line of defence):

- invalid UTF-8 bytes decode to U+FFFD (:func:`decode_utf8`);
- lone surrogates become U+FFFD (:func:`clean_text`);
- NUL characters are removed (:func:`clean_text`).

Valid surrogate pairs never reach these functions: JSON decoders combine ``"\\ud83d\\ude00"`` into one code
point, so any surrogate left in a ``str`` is a lone one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, overload

__all__ = [
    "REPLACEMENT",
    "clean_json",
    "clean_text",
    "decode_utf8",
    "json_text_needs_cleaning",
    "needs_cleaning",
]

#: The Unicode replacement character that stands for what could not be decoded.
REPLACEMENT = "\ufffd"

_BAD = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def needs_cleaning(text: str) -> bool:
    """True when ``text`` holds a NUL or a lone surrogate."""
    return _BAD.search(text) is not None


@overload
def clean_text(text: str) -> str: ...
@overload
def clean_text(text: None) -> None: ...
def clean_text(text: str | None) -> str | None:
    """``text`` without NUL characters and with every lone surrogate replaced by U+FFFD (``None`` stays)."""
    if text is None or _BAD.search(text) is None:
        return text
    return _SURROGATE.sub(REPLACEMENT, text.replace("\x00", ""))


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


_JSON_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F]|0000)")


def json_text_needs_cleaning(text: str) -> bool:
    """True when JSON ``text`` may decode to a string with a NUL or a lone surrogate: it holds a ``\\u0000`` or
    a surrogate escape (a valid pair matches too; cleaning it changes nothing), or a raw one."""
    return _JSON_ESCAPE.search(text) is not None or _BAD.search(text) is not None


def decode_utf8(data: bytes) -> str:
    """``data`` decoded as UTF-8 with invalid bytes replaced by U+FFFD (never raises)."""
    return data.decode("utf-8", errors="replace")
