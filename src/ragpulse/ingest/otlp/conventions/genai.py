"""OpenTelemetry GenAI semantic conventions (``gen_ai.*``, Development status, v1.40+).

Reads ``gen_ai.operation.name`` (``invoke_workflow``, ``invoke_agent``, ``retrieval``, ``chat``,
``generate_content``, ``text_completion``), ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
``gen_ai.system_instructions`` in structured form (``arrayValue`` of ``kvlistValue``) or as JSON strings,
``gen_ai.retrieval.query.text``, ``gen_ai.retrieval.documents`` (``[{id, score}]``; ``content``/``text`` and
``metadata`` are read when present as extra properties), ``gen_ai.request.model`` /
``gen_ai.response.model``, ``gen_ai.workflow.name`` (→ scenario) and ``gen_ai.conversation.id``. Older
message forms carried as span events are read too (see :func:`call_messages`).

Question: the root's last user message, else the first retrieval query, else the answering model call's last
user message. Answer: the root's last assistant message, else the answering model call's
(:func:`~ragpulse.ingest.otlp.conventions.base.resolve_answer`). Documents: ``gen_ai.retrieval.documents``,
else the ``gen_ai.tool.call.result`` of ``execute_tool`` spans, else the answering call's ``tool`` messages.
Model: the answering call's response model, else its request model. Context: its system instructions and
system messages. App: not defined by the convention (the builder falls back to ``service.name``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.ingest.otlp.conventions.base import (
    OUTPUT_ROLES,
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

__all__ = ["GenAiMapper", "call_messages", "is_model_call"]

OP = "gen_ai.operation.name"
_MODEL_OPS = {"chat", "generate_content", "text_completion"}
_MARKERS = (OP, "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.retrieval.documents")
_EVENT_MARKERS = frozenset(
    {"gen_ai.content.prompt", "gen_ai.content.completion", "gen_ai.choice", "gen_ai.user.message"}
)


def is_model_call(span: SpanData) -> bool:
    """A span that calls a generative model (chat/generate_content/text_completion, or carries a model name
    without another operation)."""
    op = span.attributes.get(OP)
    if op is not None:
        return str(op) in _MODEL_OPS
    return "gen_ai.request.model" in span.attributes or "gen_ai.response.model" in span.attributes


#: Per-message events (``gen_ai.{role}.message``: opentelemetry-instrumentation-openai-v2 names them after the
#: request's role, so an o-series ``developer`` message arrives as ``gen_ai.developer.message``).
_ROLE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.developer.message": "developer",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_text(attrs: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        v = maybe_json(attrs.get(key))
        if isinstance(v, Mapping):
            v = v.get("content")
        t = as_text(v) if not isinstance(v, list) else None
        if t:
            return t
    return None


def call_messages(span: SpanData, direction: str) -> list[tuple[str, str]]:
    """``(role, text)`` messages of a model call, ``direction`` ``input`` or ``output``.

    Current form: ``gen_ai.input.messages`` / ``gen_ai.output.messages``. Older forms, as span events:
    ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` with a JSON ``gen_ai.prompt`` /
    ``gen_ai.completion`` message list (v1.26-1.27), and ``gen_ai.{system,developer,user,assistant,tool}.message`` /
    ``gen_ai.choice`` with ``content`` or ``message`` (v1.28-1.36).
    """
    msgs = parse_messages(span.attributes.get(f"gen_ai.{direction}.messages"))
    if msgs:
        return msgs
    old_event, old_attr = (
        ("gen_ai.content.prompt", "gen_ai.prompt")
        if direction == "input"
        else ("gen_ai.content.completion", "gen_ai.completion")
    )
    out: list[tuple[str, str]] = []
    for e in span.events:
        if e.name == old_event:
            out.extend(parse_messages(e.attributes.get(old_attr)))
        elif direction == "input" and e.name in _ROLE_EVENTS:
            t = _event_text(e.attributes, "content", "gen_ai.event.content")
            if t:
                out.append((_ROLE_EVENTS[e.name], t))
        elif direction == "output" and e.name == "gen_ai.choice":
            t = _event_text(e.attributes, "message", "content", "gen_ai.event.content")
            if t:
                out.append(("assistant", t))
    return out


def _documents(value: Any) -> list[Document]:
    v = maybe_json(value)
    if not isinstance(v, list):
        return []
    docs = []
    for item in v:
        item = maybe_json(item)
        if isinstance(item, str):
            docs.append(Document(content=item))
            continue
        if not isinstance(item, Mapping):
            continue
        docs.append(
            make_document(
                doc_id=item.get("id"),
                content=[item.get("content"), item.get("text"), item.get("page_content")],
                score=item.get("score"),
                metadata=item.get("metadata"),
            )
        )
    return docs


def _model(span: SpanData) -> str | None:
    a = span.attributes
    return as_text(a.get("gen_ai.response.model")) or as_text(a.get("gen_ai.request.model"))


def _call(span: SpanData) -> LlmCall:
    """A model call: system instructions as ``system`` messages, then its input messages; its output is the
    last assistant output message."""
    inputs = [("system", t) for _, t in parse_messages(span.attributes.get("gen_ai.system_instructions"))]
    inputs += call_messages(span, "input")
    return call_of(span, inputs, last_text(call_messages(span, "output"), OUTPUT_ROLES))


class GenAiMapper:
    """Maps OTel GenAI spans (see the module docstring)."""

    name = "otel-genai"

    def match(self, spans: Sequence[SpanData]) -> bool:
        """True when any span carries ``gen_ai.operation.name``, GenAI messages or retrieval documents."""
        return any(k in s.attributes for s in spans for k in _MARKERS) or any(
            e.name in _EVENT_MARKERS for s in spans for e in s.events
        )

    def map(self, spans: Sequence[SpanData]) -> MappedFields:
        """Question, answer, documents, context, model, scenario, conversation id."""
        ordered = spans_in_start_order(spans)
        root = top_span(spans)
        calls = [s for s in ordered if is_model_call(s)]
        retrievals = [s for s in ordered if str(s.attributes.get(OP, "")) == "retrieval"]
        tools = [s for s in ordered if str(s.attributes.get(OP, "")) == "execute_tool"]
        out: MappedFields = {}
        attrs: dict[str, Any] = {"convention": self.name}

        question = None
        if root is not None and not is_model_call(root):
            question = last_text(parse_messages(root.attributes.get("gen_ai.input.messages")), ("user",))
        if question is None:
            for r in retrievals:
                question = as_text(r.attributes.get("gen_ai.retrieval.query.text"))
                if question:
                    break
        out["question"] = question

        answer = None
        if root is not None and not is_model_call(root):
            answer = answer_text(
                last_text(parse_messages(root.attributes.get("gen_ai.output.messages")), OUTPUT_ROLES)
            )

        docs: list[Document] = []
        for r in retrievals or ordered:
            docs.extend(_documents(r.attributes.get("gen_ai.retrieval.documents")))
        out["retrieval_seen"] = bool(retrievals) or bool(docs)
        resolve_answer(
            out,
            [_call(s) for s in calls],
            root=root,
            answer=answer,
            documents=docs,
            tool_outputs=[s.attributes.get("gen_ai.tool.call.result") for s in tools],
            model_of=_model,
        )

        for s in ([root] if root else []) + ordered:
            wf = as_text(s.attributes.get("gen_ai.workflow.name"))
            if wf and "scenario" not in out:
                out["scenario"] = wf
            conv = as_text(s.attributes.get("gen_ai.conversation.id"))
            if conv and "session_id" not in attrs:
                attrs["session_id"] = conv
        out["attributes"] = attrs
        return {k: v for k, v in out.items() if v is not None}
