"""The mapper seam and helpers shared by the convention mappers.

A mapper reads the spans of one trace and returns the trace fields it found (:data:`MappedFields`); the
builder (:mod:`ragpulse.ingest.otlp.conventions`) merges the results of every matching mapper, first mapper
first. Keys of :data:`MappedFields`: ``question``, ``answer``, ``model``, ``app``, ``scenario``, ``context``
(an explicitly reported context) and ``model_context`` (the system message / instructions given to the
model) as ``str``; ``documents`` (``list[Document]``); ``retrieval_seen`` (``bool``: a retrieval step is in the
trace, even if it found nothing) and ``attributes`` (``dict``: ``session_id``, ``user_id``, ``convention`` …).
A mapper leaves out what it did not find.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import Document

__all__ = [
    "ConventionMapper",
    "MappedFields",
    "as_float",
    "as_text",
    "doc_id_from_metadata",
    "indexed",
    "last_ended",
    "last_text",
    "make_document",
    "maybe_json",
    "message_text",
    "parse_messages",
    "ranked",
    "spans_in_start_order",
    "top_span",
]

MappedFields = dict[str, Any]


class ConventionMapper(Protocol):
    """Maps the spans of one trace to trace fields for one instrumentation convention.

    Attributes:
        name: the convention's name (``openinference``, ``otel-genai``, ``openllmetry``, ``custom``).
    """

    name: str

    def match(self, spans: Sequence[SpanData]) -> bool:
        """True when the spans use this convention (cheap: looks at attribute names only)."""
        ...

    def map(self, spans: Sequence[SpanData]) -> MappedFields:
        """The fields found (see the module docstring). Never raises for odd attribute values."""
        ...


def spans_in_start_order(spans: Sequence[SpanData]) -> list[SpanData]:
    """Spans sorted by start time (ties: end time, then span id), so results do not depend on export order."""
    return sorted(spans, key=lambda s: (s.start_unix_nano, s.end_unix_nano, s.span_id))


def top_span(spans: Sequence[SpanData]) -> SpanData | None:
    """The trace's root span if present, else ``None``."""
    roots = [s for s in spans if s.is_root]
    return spans_in_start_order(roots)[0] if roots else None


def last_ended(spans: Sequence[SpanData]) -> SpanData | None:
    """The span that ended last (the first of them on a tie), or ``None`` for no spans."""
    return max(spans, key=lambda s: s.end_unix_nano) if spans else None


def maybe_json(value: Any) -> Any:
    """Parse ``value`` as JSON when it is a string holding a JSON object, array or string literal."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("{", "[", '"'):
            try:
                return json.loads(s)
            except (ValueError, RecursionError):  # not JSON, or nested too deeply to parse: keep the text
                return value
    return value


def as_text(value: Any) -> str | None:
    """A non-blank string value as is, numbers as text; ``None`` for anything else."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    return None


def as_float(value: Any) -> float | None:
    """A number (or numeric string) as ``float``; ``None`` otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_INDEX_RE_CACHE: dict[str, re.Pattern[str]] = {}


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Collect flattened list attributes ``<prefix>.<i>.<rest>`` into ``[{rest: value}, …]`` ordered by ``i``.

    Gaps in the indexes are skipped (the order of the present indexes is kept).
    """
    pat = _INDEX_RE_CACHE.get(prefix)
    if pat is None:
        pat = re.compile(re.escape(prefix) + r"\.(\d+)\.(.+)$")
        _INDEX_RE_CACHE[prefix] = pat
    groups: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        m = pat.match(key)
        if m:
            groups.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [groups[i] for i in sorted(groups)]


def message_text(content: Any) -> str | None:
    """Text of a message ``content``: a string, or a list of parts (``{"type": "text", "content"|"text": …}``)."""
    if isinstance(content, str):
        return content if content.strip() else None
    if isinstance(content, Mapping):
        for key in ("content", "text", "value"):
            t = message_text(content.get(key))
            if t:
                return t
        return None
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") not in (
                None,
                "text",
                "input_text",
                "output_text",
            ):
                continue
            t = message_text(part)
            if t:
                texts.append(t)
        return "\n".join(texts) if texts else None
    return None


#: LangChain message ``type`` → chat role.
_MESSAGE_TYPES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def parse_messages(value: Any) -> list[tuple[str, str]]:
    """``(role, text)`` pairs from a message list in OTel GenAI parts form or chat-completions form.

    Accepts a structured list (``arrayValue`` of ``kvlistValue``) or its JSON-string form; each message is
    ``{"role", "parts": [{"type": "text", "content"}]}``, ``{"role", "content"}`` or a LangChain message
    ``{"type": "human"|"ai"|"system"|"tool", "content"}``. A bare parts list (as in
    ``gen_ai.system_instructions``) yields one ``("system", text)`` pair. Messages without text are skipped.
    """
    v = maybe_json(value)
    if isinstance(v, str):
        return [("system", v)] if v.strip() else []
    if isinstance(v, Mapping):
        v = [v]
    if not isinstance(v, list):
        return []
    if v and all(
        isinstance(p, Mapping) and "role" not in p and "type" in p and p["type"] not in _MESSAGE_TYPES
        for p in v
    ):
        t = message_text(v)
        return [("system", t)] if t else []
    out: list[tuple[str, str]] = []
    for msg in v:
        if not isinstance(msg, Mapping):
            continue
        role = str(msg.get("role") or _MESSAGE_TYPES.get(str(msg.get("type")), ""))
        text = message_text(msg.get("parts")) if "parts" in msg else message_text(msg.get("content"))
        if text:
            out.append((role, text))
    return out


_ID_KEYS = ("id", "doc_id", "document_id", "chunk_id", "_id")


def doc_id_from_metadata(metadata: Any) -> str | None:
    """A document id from retriever metadata (``id``, ``doc_id``, ``document_id``, ``chunk_id``, ``_id``)."""
    md = maybe_json(metadata)
    if isinstance(md, Mapping):
        for key in _ID_KEYS:
            t = as_text(md.get(key))
            if t:
                return t
    return None


def make_document(
    *, doc_id: Any, content: Sequence[Any], score: Any = None, metadata: Any = None
) -> Document:
    """A :class:`~ragpulse.model.Document` from raw attribute values.

    Args:
        doc_id: the reported id; when it is not text, the id comes from ``metadata``
            (:func:`doc_id_from_metadata`), else ``None``.
        content: candidate content values, first non-blank text wins; ``""`` when none is text.
        score: a number or numeric string (``None`` otherwise).
        metadata: a mapping or its JSON-string form; anything else gives ``{}``.
    """
    md = maybe_json(metadata)
    return Document(
        id=as_text(doc_id) or doc_id_from_metadata(md),
        content=next((t for t in map(as_text, content) if t), ""),
        score=as_float(score),
        metadata=dict(md) if isinstance(md, Mapping) else {},
    )


def ranked(docs: Sequence[Document]) -> list[Document]:
    """The documents with ``rank`` set to their 0-based position."""
    return [d.model_copy(update={"rank": i}) for i, d in enumerate(docs)]


def last_text(messages: Sequence[tuple[str, str]], roles: Sequence[str]) -> str | None:
    """The text of the last ``(role, text)`` message whose role is in ``roles``, or ``None``."""
    picked = [t for role, t in messages if role in roles]
    return picked[-1] if picked else None
