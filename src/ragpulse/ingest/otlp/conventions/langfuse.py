"""Langfuse OTel attributes (Langfuse SDK v3+, ``langfuse.*``).

Reads ``langfuse.trace.input`` / ``langfuse.trace.output`` (JSON or text), ``langfuse.trace.name``,
``langfuse.trace.metadata`` (JSON, or flattened ``langfuse.trace.metadata.<key>``; ``app`` and ``scenario``
keys are used), ``langfuse.observation.type`` (``generation``, ``retriever``, ``span`` …),
``langfuse.observation.input`` / ``.output``, ``langfuse.observation.model.name`` and ``session.id`` /
``user.id``.

Question: the trace input (text, ``question``/``query``/``input`` of an object, or the last user message of a
message list), else the last generation's input. Answer: the trace output likewise, else the last
generation's output. Documents: the output of ``retriever`` observations — a list of documents or
``{"documents": [...]}``, each a string or ``{id, content|page_content|text, score, metadata}``. Scenario:
metadata ``scenario``, else the trace name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.ingest.otlp.conventions.base import (
    MappedFields,
    as_text,
    last_ended,
    last_text,
    make_document,
    maybe_json,
    parse_messages,
    ranked,
    spans_in_start_order,
    top_span,
)
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import Document

__all__ = ["LangfuseMapper"]

_TYPE = "langfuse.observation.type"
_QUESTION_KEYS = ("question", "query", "input", "user_input", "prompt", "text")
_ANSWER_KEYS = ("answer", "output", "result", "response", "content", "text")


def _text(value: Any, keys: tuple[str, ...], role: str) -> str | None:
    v = maybe_json(value)
    if isinstance(v, str):
        return as_text(v)
    if isinstance(v, Mapping):
        for k in keys:
            t = as_text(v.get(k))
            if t:
                return t
        if isinstance(v.get("messages"), list):
            v = v["messages"]
        else:
            return None
    if isinstance(v, list):
        return last_text(parse_messages(v), (role, ""))
    return None


def _documents(value: Any) -> list[Document]:
    v = maybe_json(value)
    if isinstance(v, Mapping):
        v = v.get("documents")
    if not isinstance(v, list):
        return []
    docs = []
    for item in v:
        if isinstance(item, str):
            docs.append(Document(content=item))
        elif isinstance(item, Mapping):
            docs.append(
                make_document(
                    doc_id=item.get("id"),
                    content=[item.get("content"), item.get("page_content"), item.get("text")],
                    score=item.get("score"),
                    metadata=item.get("metadata"),
                )
            )
    return docs


def _metadata(span: SpanData, key: str) -> str | None:
    md = maybe_json(span.attributes.get("langfuse.trace.metadata"))
    if isinstance(md, Mapping) and as_text(md.get(key)):
        return as_text(md.get(key))
    return as_text(span.attributes.get(f"langfuse.trace.metadata.{key}"))


class LangfuseMapper:
    """Maps Langfuse OTel spans (see the module docstring)."""

    name = "langfuse"

    def match(self, spans: Sequence[SpanData]) -> bool:
        """True when any span carries a ``langfuse.trace.*`` or ``langfuse.observation.*`` attribute."""
        return any(
            k.startswith(("langfuse.trace.", "langfuse.observation.")) for s in spans for k in s.attributes
        )

    def map(self, spans: Sequence[SpanData]) -> MappedFields:
        """Question, answer, documents, model, app/scenario, session/user ids."""
        root = top_span(spans)
        ordered = ([root] if root else []) + [s for s in spans_in_start_order(spans) if s is not root]
        gens = [s for s in ordered if s.attributes.get(_TYPE) == "generation"]
        last_gen = last_ended(gens)
        out: MappedFields = {}
        attrs: dict[str, Any] = {"convention": self.name}

        for s in ordered:
            if "langfuse.trace.input" in s.attributes and out.get("question") is None:
                out["question"] = _text(s.attributes["langfuse.trace.input"], _QUESTION_KEYS, "user")
            if "langfuse.trace.output" in s.attributes and out.get("answer") is None:
                out["answer"] = _text(s.attributes["langfuse.trace.output"], _ANSWER_KEYS, "assistant")
        if last_gen is not None:
            a = last_gen.attributes
            if out.get("question") is None:
                out["question"] = _text(a.get("langfuse.observation.input"), _QUESTION_KEYS, "user")
            if out.get("answer") is None:
                out["answer"] = _text(a.get("langfuse.observation.output"), _ANSWER_KEYS, "assistant")
            out["model"] = as_text(a.get("langfuse.observation.model.name"))
            system = [
                t for r, t in parse_messages(maybe_json(a.get("langfuse.observation.input"))) if r == "system"
            ]
            out["model_context"] = "\n\n".join(system) if system else None

        retrievers = [s for s in ordered if s.attributes.get(_TYPE) == "retriever"]
        docs: list[Document] = []
        for r in retrievers:
            docs.extend(_documents(r.attributes.get("langfuse.observation.output")))
        out["documents"] = ranked(docs)
        out["retrieval_seen"] = bool(retrievers)

        for s in ordered:
            for field in ("app", "scenario"):
                if out.get(field) is None:
                    out[field] = _metadata(s, field)
            for key, attr in (("session_id", "session.id"), ("user_id", "user.id")):
                if key not in attrs and as_text(s.attributes.get(attr)):
                    attrs[key] = s.attributes[attr]
        if out.get("scenario") is None:
            out["scenario"] = next(
                (
                    as_text(s.attributes.get("langfuse.trace.name"))
                    for s in ordered
                    if s.attributes.get("langfuse.trace.name")
                ),
                None,
            )
        out["attributes"] = attrs
        return {k: v for k, v in out.items() if v is not None}
