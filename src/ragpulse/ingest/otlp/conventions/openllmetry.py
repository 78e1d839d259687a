"""OpenLLMetry / Traceloop convention (traceloop-sdk and its ``opentelemetry-instrumentation-*`` packages).

Reads ``traceloop.span.kind`` (workflow/task/agent/tool), ``traceloop.entity.input`` (``{"args": […],
"kwargs": {…}}``) and ``traceloop.entity.output`` (the JSON-encoded return value),
``traceloop.association.properties.{app,scenario,session_id,user_id}``, ``traceloop.workflow.name``; model
calls with ``gen_ai.prompt.<i>.{role,content}`` / ``gen_ai.completion.<i>.{role,content}`` (up to 0.54) or
JSON-string ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (0.55+), ``gen_ai.response.model`` /
``gen_ai.request.model``; retrieval as vector-DB span events ``db.query.result`` (``.id``, ``.distance``,
``.document``, ``.metadata``; one event per hit, in rank order) or a LangChain retriever task whose
``gen_ai.task.output`` / ``traceloop.entity.output`` holds ``{"documents": [{page_content, metadata}]}``.

Answer and context come from the answering model call
(:func:`~ragpulse.ingest.otlp.conventions.base.resolve_answer`); without retrieval, the outputs of
``traceloop.span.kind=tool`` spans (else ``tool`` prompt messages) are the documents.

Scores from ``db.query.result.distance`` are distances (lower is closer); the trace attribute
``retrieval.score_kind`` is then ``distance``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragpulse.ingest.otlp.conventions.base import (
    OUTPUT_ROLES,
    MappedFields,
    answer_text,
    as_text,
    call_of,
    doc_id_from_metadata,
    indexed,
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

__all__ = ["OpenLlmetryMapper"]

_PROPS = "traceloop.association.properties."
_QUESTION_KEYS = ("question", "query", "input", "user_input", "prompt", "text")
_ANSWER_KEYS = ("answer", "result", "output", "response", "text", "content")


def _is_model_call(span: SpanData) -> bool:
    a = span.attributes
    return (
        "llm.request.type" in a
        or "gen_ai.prompt.0.content" in a
        or "gen_ai.completion.0.content" in a
        or ("gen_ai.request.model" in a and "traceloop.span.kind" not in a)
    )


def _entity_question(span: SpanData) -> str | None:
    for key in ("traceloop.entity.input", "gen_ai.task.input"):
        v = maybe_json(span.attributes.get(key))
        if isinstance(v, str):
            return as_text(v)
        if isinstance(v, Mapping):
            for a in v.get("args") or []:
                if as_text(a):
                    return str(a)
            inputs = v.get("inputs")  # LangChain runnables: {"inputs": {...} | "text", "kwargs": {...}}
            if isinstance(inputs, str) and as_text(inputs):
                return inputs
            for src in (inputs, v.get("kwargs"), v):
                if isinstance(src, Mapping):
                    for f in _QUESTION_KEYS:
                        t = as_text(src.get(f))
                        if t:
                            return t
    return None


def _entity_answer(span: SpanData) -> str | None:
    v = maybe_json(span.attributes.get("traceloop.entity.output"))
    if isinstance(v, str):
        return as_text(v)
    if isinstance(v, Mapping):
        for f in _ANSWER_KEYS:
            t = as_text(v.get(f))
            if t:
                return t
    return None


def _call_messages(span: SpanData, kind: str) -> list[tuple[str, str]]:
    """``kind`` is ``prompt`` or ``completion``."""
    legacy = [
        (str(m.get("role", "")), text)
        for m in indexed(span.attributes, f"gen_ai.{kind}")
        if (text := as_text(m.get("content")))
    ]
    if legacy:
        return legacy
    key = "gen_ai.input.messages" if kind == "prompt" else "gen_ai.output.messages"
    return parse_messages(span.attributes.get(key))


def _event_documents(spans: Sequence[SpanData]) -> list[Document]:
    docs = []
    for s in spans:
        for e in s.events:
            if e.name != "db.query.result":
                continue
            a = e.attributes
            docs.append(
                make_document(
                    doc_id=a.get("db.query.result.id"),
                    content=[a.get("db.query.result.document")],
                    score=a.get("db.query.result.distance", a.get("db.query.result.score")),
                    metadata=a.get("db.query.result.metadata"),
                )
            )
    return docs


def _task_documents(spans: Sequence[SpanData]) -> list[Document]:
    docs = []
    for s in spans:
        for key in ("gen_ai.task.output", "traceloop.entity.output"):
            v = maybe_json(s.attributes.get(key))
            if isinstance(v, Mapping) and isinstance(v.get("documents"), list):
                for d in v["documents"]:
                    if isinstance(d, Mapping):
                        md = d.get("metadata")
                        docs.append(
                            Document(
                                id=as_text(d.get("id")) or doc_id_from_metadata(md),
                                content=as_text(d.get("page_content")) or as_text(d.get("content")) or "",
                                metadata=dict(md) if isinstance(md, Mapping) else {},
                            )
                        )
                break
    return docs


def _model(span: SpanData) -> str | None:
    a = span.attributes
    return as_text(a.get("gen_ai.response.model")) or as_text(a.get("gen_ai.request.model"))


def _tool_output(span: SpanData) -> Any:
    """A tool span's return value: ``traceloop.entity.output`` (JSON-encoded), else ``gen_ai.task.output``."""
    a = span.attributes
    return a.get("traceloop.entity.output", a.get("gen_ai.task.output"))


class OpenLlmetryMapper:
    """Maps OpenLLMetry/Traceloop spans (see the module docstring)."""

    name = "openllmetry"

    def match(self, spans: Sequence[SpanData]) -> bool:
        """True when a span carries ``traceloop.*`` attributes or legacy ``gen_ai.prompt.<i>`` messages."""
        for s in spans:
            for k in s.attributes:
                if k.startswith("traceloop.") or k.startswith("gen_ai.prompt.") or k == "llm.request.type":
                    return True
        return False

    def map(self, spans: Sequence[SpanData]) -> MappedFields:
        """Question, answer, documents, context, model, app/scenario, session/user ids."""
        ordered = spans_in_start_order(spans)
        root = top_span(spans)
        workflows = [s for s in ordered if s.attributes.get("traceloop.span.kind") == "workflow"]
        top = root if root is not None and "traceloop.entity.input" in root.attributes else None
        top = top or (workflows[0] if workflows else None)
        calls = [s for s in ordered if _is_model_call(s)]
        tasks = [s for s in ordered if s.attributes.get("traceloop.span.kind") == "task"]
        tools = [s for s in ordered if s.attributes.get("traceloop.span.kind") == "tool"]
        out: MappedFields = {}
        attrs: dict[str, Any] = {"convention": self.name}

        question = _entity_question(top) if top else None
        if question is None:
            for t in tasks:
                question = _entity_question(t)
                if question:
                    break
        out["question"] = question

        docs = _event_documents(ordered)
        if docs:
            attrs["retrieval.score_kind"] = "distance"
        else:
            docs = _task_documents(tasks)
        out["retrieval_seen"] = bool(docs) or any(
            "db.system" in s.attributes
            or str(s.attributes.get("gen_ai.operation.name", "")).startswith("vector_db")
            for s in ordered
        )
        resolve_answer(
            out,
            [
                call_of(
                    s, _call_messages(s, "prompt"), last_text(_call_messages(s, "completion"), OUTPUT_ROLES)
                )
                for s in calls
            ],
            root=root,
            answer=answer_text(_entity_answer(top)) if top else None,
            documents=docs,
            tool_outputs=[_tool_output(s) for s in tools],
            model_of=_model,
        )

        for s in ([top] if top else []) + ordered:
            a = s.attributes
            for field, key in (("app", "app"), ("scenario", "scenario")):
                if field not in out and as_text(a.get(_PROPS + key)):
                    out[field] = a[_PROPS + key]
            for key in ("session_id", "user_id"):
                if key not in attrs and as_text(a.get(_PROPS + key)):
                    attrs[key] = a[_PROPS + key]
        if "scenario" not in out:
            for s in ([top] if top else []) + ordered:
                wf = as_text(s.attributes.get("traceloop.workflow.name"))
                if wf:
                    out["scenario"] = wf
                    break
        out["attributes"] = attrs
        return {k: v for k, v in out.items() if v is not None}
