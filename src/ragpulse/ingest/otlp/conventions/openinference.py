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
    OUTPUT_ROLES,
    LlmCall,
    MappedFields,
    answer_text,
    as_text,
    call_of,
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
# "message": LlamaIndex chat engines (`CondenseQuestionChatEngine.chat` input `{"message": …}`)
_QUESTION_KEYS = ("question", "query", "input", "user_input", "message", "text", "prompt")
_ANSWER_KEYS = ("answer", "result", "output", "response", "text", "content")
_NON_TOP_KINDS = {"RETRIEVER", "RERANKER", "EMBEDDING", "LLM", "TOOL", "GUARDRAIL", "EVALUATOR", "PROMPT"}


def _kind(span: SpanData) -> str:
    return str(span.attributes.get(KIND, "")).upper()


#: Keys under which instrumentations wrap a call's arguments (``input.value`` = ``{"input_args": {...}}``).
_ARG_WRAPPERS = frozenset({"input_args", "kwargs", "inputs"})

#: Tools that only end an agent loop (DSPy ReAct's ``finish``): their output ("Completed.") is no document.
_LOOP_END_TOOLS = frozenset({"finish", "finish.__call__"})


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
    if isinstance(parsed, Mapping) and len(parsed) == 1:
        inner = next(iter(parsed.values()))
        if next(iter(parsed)) in _ARG_WRAPPERS and isinstance(inner, Mapping):
            parsed = inner  # DSPy: {"input_args": {"question": …}}; wrapped keyword arguments
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


#: ``message_content.type`` values of reasoning parts (never judged as the answer).
_REASONING_PARTS = frozenset({"reasoning", "thinking", "redacted_thinking"})


def _messages(span: SpanData, prefix: str) -> list[tuple[str, str]]:
    out = []
    for m in indexed(span.attributes, prefix):
        role = str(m.get("message.role", ""))
        text = as_text(m.get("message.content"))
        if text is None:
            parts = [
                {"type": "text", "text": v}
                for k, v in sorted(m.items())
                if k.startswith("message.contents.")
                and k.endswith("message_content.text")
                # reasoning/thinking parts are the model's thoughts, not its answer
                and str(m.get(k[: -len("text")] + "type", "text")).lower() not in _REASONING_PARTS
            ]
            text = message_text(parts)
        if text:
            out.append((role, text))
    return out


def _output_ids(span: SpanData) -> list[tuple[str | None, str | None]]:
    """``(id, page_content)`` of the documents in a retriever's JSON ``output.value`` (LangChain puts
    ``Document.id`` there but not in ``retrieval.documents.*``)."""
    out = maybe_json(span.attributes.get("output.value"))
    items = out.get("documents") if isinstance(out, Mapping) else out
    if not isinstance(items, list):
        return []
    return [
        (as_text(i.get("id")), as_text(i.get("page_content")) or as_text(i.get("text")))
        if isinstance(i, Mapping)
        else (None, None)
        for i in items
    ]


def _output_documents(span: SpanData) -> list[Document]:
    """Documents from a retriever's JSON ``output.value`` (``{"documents": [{id, page_content|text|content,
    metadata}]}`` or a bare list), for a retriever span without ``retrieval.documents.*`` (an instrumentation
    version that names them differently): the documents are still the ones the retriever returned."""
    out = maybe_json(span.attributes.get("output.value"))
    items = out.get("documents") if isinstance(out, Mapping) else out
    if not isinstance(items, list):
        return []
    return [
        make_document(
            doc_id=i.get("id"),
            content=[i.get("page_content"), i.get("text"), i.get("content")],
            score=i.get("score"),
            metadata=i.get("metadata"),
        )
        for i in items
        if isinstance(i, Mapping)
    ]


def _documents(span: SpanData, prefix: str) -> list[Document]:
    """The span's documents; an id missing from the attributes is taken from the same document (same
    position and text) of the JSON ``output.value``, else from its metadata (:func:`make_document`)."""
    raw = indexed(span.attributes, prefix)
    given = _output_ids(span) if any(as_text(d.get("document.id")) is None for d in raw) else []
    docs = []
    for i, d in enumerate(raw):
        doc_id = d.get("document.id")
        if as_text(doc_id) is None and i < len(given) and given[i][1] == as_text(d.get("document.content")):
            doc_id = given[i][0]
        docs.append(
            make_document(
                doc_id=doc_id,
                content=[d.get("document.content")],
                score=d.get("document.score"),
                metadata=d.get("document.metadata"),
            )
        )
    return docs


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
    return call_of(
        span,
        inputs,
        last_text(_messages(span, "llm.output_messages"), OUTPUT_ROLES),
        _value_text(span, "output.value", _ANSWER_KEYS),
    )


def _innermost(llms: list[SpanData], spans: Sequence[SpanData]) -> list[SpanData]:
    """The LLM spans that have no LLM span below them: a wrapper (LlamaIndex's ``OpenAI.predict`` around
    ``OpenAI.chat``, ``OpenAI.stream`` around ``OpenAI.stream_chat``) is not a model call of its own, and its
    input is a prompt template's repr rather than the messages the model got."""
    if len(llms) < 2:
        return llms
    parent = {s.span_id: s.parent_span_id for s in spans}
    ids = {s.span_id for s in llms}
    wrappers: set[str] = set()
    for s in llms:
        p, seen = parent.get(s.span_id), 0
        while p is not None and seen < 1000:  # bounded walk: a malformed trace may hold a parent cycle
            if p in ids:
                wrappers.add(p)
            p, seen = parent.get(p), seen + 1
    return [s for s in llms if s.span_id not in wrappers]


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
        llms = _innermost([s for s in ordered if _kind(s) == "LLM"], spans)
        tools = [s for s in ordered if _kind(s) == "TOOL" and s.name not in _LOOP_END_TOOLS]
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
                docs.extend(_documents(r, "retrieval.documents") or _output_documents(r))
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
