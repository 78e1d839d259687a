"""OpenInference convention (Arize ``openinference-semantic-conventions``).

Reads ``openinference.span.kind`` (CHAIN, AGENT, RETRIEVER, RERANKER, LLM …), ``input.value`` /
``output.value`` (plain text or JSON per ``*.mime_type``), ``retrieval.documents.<i>.document.{id,content,
score,metadata}``, ``reranker.output_documents.<i>.document.*``, ``llm.input_messages.<i>.message.{role,
content}`` (or ``message.contents.<j>.message_content.text``), ``llm.output_messages…``, ``llm.model_name``
(newer ``llm.response.model_name`` / ``llm.request.model_name``), ``session.id``, ``user.id`` and ``metadata``
(a JSON string; ``app`` and ``scenario`` keys are used).

Question: the root span's ``input.value``, else the first retriever's, else the last user message of the
answering LLM span. Answer: the root span's ``output.value`` (not a streaming repr), else the answering LLM
span's last assistant message (see :func:`~ragpulse.ingest.otlp.conventions.base.resolve_answer`).
Documents: the last reranker's output documents, else every retriever's documents in start order, else the
``output.value`` of ``TOOL`` spans, else the ``tool`` messages of the answering call. A
document without ``document.id`` takes its id from its metadata (``id``/``doc_id``/…) — the LangChain
instrumentor emits no ids — else ``None`` (its rank still gives the position). Context: the system
message(s) of the answering LLM span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.ingest.otlp.conventions.base import (
    LlmCall,
    MappedFields,
    answer_text,
    as_text,
    indexed,
    last_text,
    make_document,
    maybe_json,
    message_text,
    parse_messages,
    resolve_answer,
    spans_in_start_order,
    top_span,
)
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import Document

__all__ = ["OpenInferenceMapper"]

KIND = "openinference.span.kind"
_QUESTION_KEYS = ("question", "query", "input", "user_input", "text", "prompt")
_ANSWER_KEYS = ("answer", "result", "output", "response", "text", "content")
_NON_TOP_KINDS = {"RETRIEVER", "RERANKER", "EMBEDDING", "LLM", "TOOL", "GUARDRAIL", "EVALUATOR", "PROMPT"}


def _kind(span: SpanData) -> str:
    return str(span.attributes.get(KIND, "")).upper()


def _value_text(span: SpanData, key: str, fields: tuple[str, ...]) -> str | None:
    """``input.value``/``output.value`` as text: plain text as is, a JSON string literal decoded, the first
    string under one of ``fields`` of a JSON object, or the last user (input) / assistant (output) message of
    its ``messages`` list (agent frameworks such as LangGraph)."""
    raw = span.attributes.get(key)
    if raw is None:
        return None
    mime = str(span.attributes.get(key.replace(".value", ".mime_type"), "")).lower()
    parsed = maybe_json(raw)
    if isinstance(parsed, str):
        return as_text(parsed)
    if isinstance(parsed, Mapping):
        for f in fields:
            t = as_text(parsed.get(f))
            if t:
                return t
        role = "user" if key == "input.value" else "assistant"
        return last_text(parse_messages(parsed.get("messages")), (role,))
    if "json" in mime:
        return None
    return as_text(raw)


def _messages(span: SpanData, prefix: str) -> list[tuple[str, str]]:
    out = []
    for m in indexed(span.attributes, prefix):
        role = str(m.get("message.role", ""))
        text = as_text(m.get("message.content"))
        if text is None:
            parts = [
                {"type": "text", "text": v}
                for k, v in sorted(m.items())
                if k.startswith("message.contents.") and k.endswith("message_content.text")
            ]
            text = message_text(parts)
        if text:
            out.append((role, text))
    return out


def _documents(span: SpanData, prefix: str) -> list[Document]:
    return [
        make_document(
            doc_id=d.get("document.id"),
            content=[d.get("document.content")],
            score=d.get("document.score"),
            metadata=d.get("document.metadata"),
        )
        for d in indexed(span.attributes, prefix)
    ]


def _model(span: SpanData) -> str | None:
    a = span.attributes
    return (
        as_text(a.get("llm.response.model_name"))
        or as_text(a.get("llm.model_name"))
        or as_text(a.get("llm.request.model_name"))
    )


def _call(span: SpanData) -> LlmCall:
    """An LLM span as a model call: ``llm.input_messages`` (else ``input.value`` as the user message) and the
    last assistant ``llm.output_messages`` (else a plain-text ``output.value``)."""
    inputs = _messages(span, "llm.input_messages")
    if not inputs:
        text = _value_text(span, "input.value", _QUESTION_KEYS)
        inputs = [("user", text)] if text else []
    output = answer_text(last_text(_messages(span, "llm.output_messages"), ("assistant", "")))
    if output is None:
        output = answer_text(_value_text(span, "output.value", _ANSWER_KEYS))
    return LlmCall(span, inputs, output)


class OpenInferenceMapper:
    """Maps OpenInference spans (see the module docstring)."""

    name = "openinference"

    def match(self, spans: Sequence[SpanData]) -> bool:
        """True when any span carries ``openinference.span.kind``."""
        return any(KIND in s.attributes for s in spans)

    def map(self, spans: Sequence[SpanData]) -> MappedFields:
        """Question, answer, documents, context, model, app/scenario, session/user ids."""
        ordered = spans_in_start_order(spans)
        root = top_span(spans)
        top = root if root is not None and _kind(root) not in _NON_TOP_KINDS else None
        if top is None:
            chains = [s for s in ordered if _kind(s) in ("CHAIN", "AGENT")]
            top = chains[0] if chains else None
        retrievers = [s for s in ordered if _kind(s) == "RETRIEVER"]
        rerankers = [s for s in ordered if _kind(s) == "RERANKER"]
        llms = [s for s in ordered if _kind(s) == "LLM"]
        tools = [s for s in ordered if _kind(s) == "TOOL"]
        out: MappedFields = {}
        attrs: dict[str, Any] = {"convention": self.name}

        question = _value_text(top, "input.value", _QUESTION_KEYS) if top else None
        if question is None:
            for r in retrievers:
                question = _value_text(r, "input.value", _QUESTION_KEYS)
                if question:
                    break
        out["question"] = question

        docs: list[Document] = []
        for rr in reversed(rerankers):
            docs = _documents(rr, "reranker.output_documents")
            if docs:
                break
        if not docs:
            for r in retrievers:
                docs.extend(_documents(r, "retrieval.documents"))
        out["retrieval_seen"] = bool(retrievers or rerankers)

        resolve_answer(
            out,
            [_call(s) for s in llms],
            root=root,
            answer=answer_text(_value_text(top, "output.value", _ANSWER_KEYS)) if top else None,
            documents=docs,
            tool_outputs=[s.attributes.get("output.value") for s in tools],
            model_of=_model,
        )

        candidates = ([top] if top else []) + ordered
        for s in candidates:
            md = maybe_json(s.attributes.get("metadata"))
            if isinstance(md, Mapping) and (as_text(md.get("app")) or as_text(md.get("scenario"))):
                out["app"] = as_text(md.get("app"))
                out["scenario"] = as_text(md.get("scenario"))
                break
        for s in candidates:
            if "session_id" not in attrs and as_text(s.attributes.get("session.id")):
                attrs["session_id"] = s.attributes["session.id"]
            if "user_id" not in attrs and as_text(s.attributes.get("user.id")):
                attrs["user_id"] = s.attributes["user.id"]
        out["attributes"] = attrs
        return {k: v for k, v in out.items() if v is not None}
