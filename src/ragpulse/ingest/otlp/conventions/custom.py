"""Home-grown instrumentation: trace fields read from attribute names given in ``settings.attributes``.

``otlp_attributes`` maps a field to one attribute name or a list of names (first present wins, root span
first, then the other spans in start order)::

    otlp_attributes:
      question: [myrag.question, app.query]
      answer: myrag.answer
      context: myrag.context          # context string given to the model
      model: myrag.model
      app: myrag.app
      scenario: myrag.scenario
      session_id: myrag.session
      documents: myrag.documents      # list (structured or JSON string) of objects or strings
      document_id: doc_id             # keys inside each document object (defaults: id, content, score)
      document_content: text
      document_score: similarity

This mapper runs before the built-in conventions, so a configured name wins over theirs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.errors import ConfigError
from ragpulse.ingest.otlp.conventions.base import (
    MappedFields,
    as_float,
    as_text,
    maybe_json,
    spans_in_start_order,
    top_span,
)
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import Document

__all__ = ["FIELDS", "AttributeMapper"]

_TEXT_FIELDS = ("question", "answer", "context", "model", "app", "scenario", "session_id")
_DOC_KEYS = {"document_id": "id", "document_content": "content", "document_score": "score"}
#: Keys accepted in ``settings.attributes``.
FIELDS = frozenset((*_TEXT_FIELDS, "documents", *_DOC_KEYS))


def _names(value: Any, key: str) -> list[str]:
    if isinstance(value, str) and value.strip():
        return [value.strip()]
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) and v.strip() for v in value):
        return [v.strip() for v in value]
    raise ConfigError(f"otlp_attributes.{key} must be an attribute name or a list of names")


class AttributeMapper:
    """Reads the attribute names configured in ``settings.attributes`` (see the module docstring).

    Raises:
        ConfigError: an unknown key or a value that is not a name / list of names.
    """

    name = "custom"

    def __init__(self, overrides: Mapping[str, Any]) -> None:
        unknown = sorted(set(overrides) - FIELDS)
        if unknown:
            raise ConfigError(
                f"otlp_attributes: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(FIELDS))}"
            )
        self._names = {k: _names(v, k) for k, v in overrides.items() if k not in _DOC_KEYS}
        self._doc_keys = {
            k: (_names(overrides[k], k)[0] if k in overrides else default) for k, default in _DOC_KEYS.items()
        }

    @property
    def configured(self) -> bool:
        """True when at least one field is mapped."""
        return bool(self._names)

    def match(self, spans: Sequence[SpanData]) -> bool:
        """True when any span carries one of the configured attribute names."""
        wanted = {n for names in self._names.values() for n in names}
        return any(k in wanted for s in spans for k in s.attributes)

    def _first(self, spans: list[SpanData], field: str) -> Any:
        for name in self._names.get(field, ()):
            for s in spans:
                if name in s.attributes:
                    return s.attributes[name]
        return None

    def map(self, spans: Sequence[SpanData]) -> MappedFields:
        """The configured fields found on the spans."""
        root = top_span(spans)
        ordered = ([root] if root else []) + [s for s in spans_in_start_order(spans) if s is not root]
        out: MappedFields = {}
        attrs: dict[str, Any] = {"convention": self.name}
        for field in _TEXT_FIELDS:
            t = as_text(self._first(ordered, field))
            if t is not None:
                if field == "session_id":
                    attrs["session_id"] = t
                else:
                    out[field] = t
        raw = maybe_json(self._first(ordered, "documents"))
        if isinstance(raw, list):
            docs = []
            for item in raw:
                item = maybe_json(item)
                if isinstance(item, Mapping):
                    docs.append(
                        Document(
                            id=as_text(item.get(self._doc_keys["document_id"])),
                            content=as_text(item.get(self._doc_keys["document_content"])) or "",
                            score=as_float(item.get(self._doc_keys["document_score"])),
                        )
                    )
                elif as_text(item):
                    docs.append(Document(content=str(item)))
            out["documents"] = [d.model_copy(update={"rank": i}) for i, d in enumerate(docs)]
        out["attributes"] = attrs
        return out
