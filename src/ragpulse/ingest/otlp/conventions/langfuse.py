"""Langfuse OTel attributes (Langfuse SDK v3+, ``langfuse.*``).

Reads ``langfuse.trace.input`` / ``langfuse.trace.output`` (JSON or text), ``langfuse.trace.name``,
``langfuse.trace.metadata`` (JSON, or flattened ``langfuse.trace.metadata.<key>``; ``app`` and ``scenario``
keys are used), ``langfuse.trace.tags`` (``app:<name>`` / ``scenario:<name>``), ``langfuse.observation.type`` (``generation``, ``retriever``, ``span`` …),
``langfuse.observation.input`` / ``.output``, ``langfuse.observation.model.name`` and ``session.id`` /
``user.id``.

Question: the trace input (text, ``question``/``query``/``input`` of an object, or the last user message of a
message list), else the answering generation's input. Answer: the trace output likewise, else the answering
generation's output (:func:`~ragpulse.ingest.otlp.conventions.base.resolve_answer`). Documents: the output of
``retriever`` observations — a list of documents or ``{"documents": [...]}``, each a string or ``{id,
content|page_content|text, score, metadata}`` — else the output of ``tool`` observations, else the
answering generation's ``tool`` messages. App: metadata ``app``, else a tag ``app:<name>``, else the resource
``service.name`` unless it is the SDK's default ``unknown_service:…``, else the trace name, else the root
observation's name. Scenario: metadata ``scenario``, else a tag ``scenario:<name>``, else the trace name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.ingest.otlp.conventions.base import (
    LlmCall,
    MappedFields,
    answer_text,
    as_text,
    call_of,
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
    # SDK 4+ JSON-encodes each flattened metadata value ("\"checkout\""): decode a JSON string literal
    flat = maybe_json(span.attributes.get(f"langfuse.trace.metadata.{key}"))
    return as_text(flat)


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
    return call_of(
        span, inputs, _text(span.attributes.get("langfuse.observation.output"), _ANSWER_KEYS, "assistant")
    )


def _tagged(ordered: Sequence[SpanData], key: str) -> str | None:
    """The value of the first Langfuse trace tag ``<key>:<value>`` (or ``<key>=<value>``) in
    ``langfuse.trace.tags`` (a list of strings, or its JSON text)."""
    for s in ordered:
        tags = maybe_json(s.attributes.get("langfuse.trace.tags"))
        for tag in tags if isinstance(tags, list | tuple) else ():
            name, sep, value = str(tag).partition(":") if ":" in str(tag) else str(tag).partition("=")
            if sep and name.strip().lower() == key and value.strip():
                return value.strip()
    return None


def _app_fallback(ordered: Sequence[SpanData], root: SpanData | None) -> str | None:
    """The app when no metadata ``app`` is set: a trace tag ``app:<name>``, else the resource ``service.name``
    when the app set one, else (the SDK's default ``unknown_service:python``) the Langfuse trace name, else the
    root observation's name."""
    tagged = _tagged(ordered, "app")
    if tagged:
        return tagged
    service = next((s.service_name for s in ordered if s.service_name), None)
    if service and not service.startswith("unknown_service"):
        return service
    name = next((as_text(s.attributes.get("langfuse.trace.name")) for s in ordered), None)
    return name or (root.name if root is not None and root.name else None)


#: Trace attribute → the Langfuse attributes it is read from, first found wins: the SDK's ``session.id`` /
#: ``user.id``, the ``langfuse.session.id`` / ``langfuse.user.id`` form, and a ``sessionId`` / ``userId`` in the
#: trace metadata (``langfuse.trace.metadata.*``).
_ID_ATTRIBUTES = (
    ("session_id", "session.id"),
    ("session_id", "langfuse.session.id"),
    ("session_id", "langfuse.trace.metadata.sessionId"),
    ("session_id", "langfuse.trace.metadata.session_id"),
    ("user_id", "user.id"),
    ("user_id", "langfuse.user.id"),
    ("user_id", "langfuse.trace.metadata.userId"),
)


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
            for key, attr in _ID_ATTRIBUTES:
                if key not in attrs and as_text(s.attributes.get(attr)):
                    attrs[key] = s.attributes[attr]
        if out.get("scenario") is None:
            out["scenario"] = _tagged(ordered, "scenario")
        if out.get("scenario") is None:
            out["scenario"] = next(
                (
                    as_text(s.attributes.get("langfuse.trace.name"))
                    for s in ordered
                    if s.attributes.get("langfuse.trace.name")
                ),
                None,
            )
        if out.get("app") is None:
            out["app"] = _app_fallback(ordered, root)
        out["attributes"] = attrs
        return {k: v for k, v in out.items() if v is not None}
