"""Langfuse OTel attributes (Langfuse SDK v3+, ``langfuse.*``).

Reads ``langfuse.trace.input`` / ``langfuse.trace.output`` (JSON or text), ``langfuse.trace.name``,
``langfuse.trace.metadata`` (JSON, or flattened ``langfuse.trace.metadata.<key>``; ``app`` and ``scenario``
keys are used), ``langfuse.observation.type`` (``generation``, ``retriever``, ``span`` …),
``langfuse.observation.input`` / ``.output``, ``langfuse.observation.model.name`` and ``session.id`` /
``user.id``.

Question: the trace input (text, ``question``/``query``/``input`` of an object, or the last user message of a
message list), else the answering generation's input. Answer: the trace output likewise, else the answering
generation's output (:func:`~ragpulse.ingest.otlp.conventions.base.resolve_answer`). Documents: the output of
``retriever`` observations — a list of documents or ``{"documents": [...]}``, each a string or ``{id,
content|page_content|text, score, metadata}`` — else the output of ``tool`` observations, else the
answering generation's ``tool`` messages. Scenario:
metadata ``scenario``, else the trace name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.ingest.otlp.conventions.base import (
    LlmCall,
    MappedFields,
    answer_text,
    as_text,
    last_text,
    make_document,
    maybe_json,
    parse_messages,
    resolve_answer,
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


def _call(span: SpanData) -> LlmCall:
    """A ``generation`` observation: its input messages (a plain-text input as one user message) and its
    output text."""
    raw = span.attributes.get("langfuse.observation.input")
    inputs = parse_messages(maybe_json(raw))
    if inputs == [("system", raw)] and isinstance(raw, str):  # plain text, not a message list
        inputs = [("user", raw)]
    if not inputs:
        text = _text(raw, _QUESTION_KEYS, "user")
        inputs = [("user", text)] if text else []
    output = answer_text(_text(span.attributes.get("langfuse.observation.output"), _ANSWER_KEYS, "assistant"))
    return LlmCall(span, inputs, output)


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
        tools = [s for s in ordered if s.attributes.get(_TYPE) == "tool"]
        out: MappedFields = {}
        attrs: dict[str, Any] = {"convention": self.name}

        answer = None
        for s in ordered:
            if "langfuse.trace.input" in s.attributes and out.get("question") is None:
                out["question"] = _text(s.attributes["langfuse.trace.input"], _QUESTION_KEYS, "user")
            if "langfuse.trace.output" in s.attributes and answer is None:
                answer = answer_text(_text(s.attributes["langfuse.trace.output"], _ANSWER_KEYS, "assistant"))

        retrievers = [s for s in ordered if s.attributes.get(_TYPE) == "retriever"]
        docs: list[Document] = []
        for r in retrievers:
            docs.extend(_documents(r.attributes.get("langfuse.observation.output")))
        out["retrieval_seen"] = bool(retrievers)
        resolve_answer(
            out,
            [_call(s) for s in gens],
            root=root,
            answer=answer,
            documents=docs,
            tool_outputs=[s.attributes.get("langfuse.observation.output") for s in tools],
            model_of=lambda s: as_text(s.attributes.get("langfuse.observation.model.name")),
        )

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
