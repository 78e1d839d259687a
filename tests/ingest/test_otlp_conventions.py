"""Convention mappers beyond the fixtures: JSON-string GenAI forms, OpenLLMetry 0.55+, LangChain documents
without ids, rerankers, configured attribute names, mapper precedence."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.engine.engine import not_evaluable_reason
from ragpulse.errors import ConfigError
from ragpulse.ingest.otlp.conventions import MappedFields, TraceBuilder, default_mappers
from ragpulse.ingest.otlp.spans import SpanData, SpanEvent

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
#: Span times are seconds after this (2025-12-01): a plausible time, so the root's latency is kept.
T0_S = 1_764_590_000


def _span(
    span_id: str, parent: str | None, attrs: dict[str, Any], start: int = 1, end: int = 2, **kw: Any
) -> SpanData:
    return SpanData(
        trace_id=TID,
        span_id=span_id,
        parent_span_id=parent,
        name=kw.pop("name", span_id),
        start_unix_nano=(T0_S + start) * 1_000_000_000,
        end_unix_nano=(T0_S + end) * 1_000_000_000,
        attributes=attrs,
        resource={"service.name": kw.pop("service", "svc")},
        **kw,
    )


def _build(spans: Sequence[SpanData], **settings: Any) -> Any:
    return TraceBuilder(Settings(**settings).otlp).build(TID, spans)


def test_genai_json_string_messages_and_documents() -> None:
    root = _span(
        "a" * 16,
        None,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "What is our parental leave?"}]}]
            ),
        },
        1,
        5,
    )
    retrieval = _span(
        "b" * 16,
        "a" * 16,
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": "parental leave policy",
            "gen_ai.retrieval.documents": json.dumps(
                [{"id": "hr#leave", "score": 0.91, "text": "16 weeks paid."}, {"id": "hr#faq", "score": 0.5}]
            ),
        },
        2,
        3,
    )
    chat = _span(
        "c" * 16,
        "a" * 16,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "system", "parts": [{"type": "text", "content": "Answer from the context."}]},
                    {"role": "user", "parts": [{"type": "text", "content": "Context: ... Question: ..."}]},
                ]
            ),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "reasoning", "content": "hmm"},
                            {"type": "text", "content": "16 weeks."},
                        ],
                        "finish_reason": "stop",
                    }
                ]
            ),
        },
        3,
        4,
    )
    t = _build([chat, retrieval, root])
    assert t.question == "What is our parental leave?"
    assert t.answer == "16 weeks."
    assert t.model == "gpt-4o"
    assert t.doc_ids == ["hr#leave", "hr#faq"]
    assert [d.score for d in t.documents] == [0.91, 0.5]
    assert t.contexts == ["16 weeks paid."]
    assert t.context == "Answer from the context."
    assert t.latency_s == 4.0
    assert t.app == "svc"


def test_genai_question_from_retrieval_query_when_root_has_no_messages() -> None:
    root = _span("a" * 16, None, {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "wf"})
    retrieval = _span(
        "b" * 16, "a" * 16, {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "q?"}
    )
    t = _build([root, retrieval])
    assert (t.question, t.scenario, t.answer, t.doc_ids, t.context) == ("q?", "wf", None, [], None)


def test_openllmetry_055_messages_and_task_documents_without_ids() -> None:
    root = _span(
        "a" * 16,
        None,
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": json.dumps(
                {"args": [], "kwargs": {"question": "Is the gym open on Sunday?"}}
            ),
            "traceloop.entity.output": json.dumps({"answer": "Yes, 8-18."}),
        },
        1,
        4,
    )
    task = _span(
        "b" * 16,
        "a" * 16,
        {
            "traceloop.span.kind": "task",
            "gen_ai.operation.name": "vector_db_retrieve",
            "gen_ai.task.output": json.dumps(
                {
                    "documents": [
                        {"page_content": "Gym: weekends 8-18.", "metadata": {"doc_id": "fac#gym"}},
                        {"page_content": "Badge required.", "metadata": {"source": "x.md"}},
                    ]
                }
            ),
        },
    )
    chat = _span(
        "c" * 16,
        "a" * 16,
        {
            "llm.request.type": "chat",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "system", "parts": [{"type": "text", "content": "Use the context."}]},
                    {"role": "user", "parts": [{"type": "text", "content": "Is the gym open on Sunday?"}]},
                ]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Yes"}]}]
            ),
        },
        2,
        3,
    )
    t = _build([root, task, chat])
    assert t.question == "Is the gym open on Sunday?"
    assert t.answer == "Yes, 8-18."
    assert t.doc_ids == ["fac#gym", "x.md"]  # no id: the LangChain metadata "source" (issue 23 item 9)
    assert [d.rank for d in t.documents] == [0, 1]
    assert t.contexts == ["Gym: weekends 8-18.", "Badge required."]
    assert t.model == "gpt-4.1"
    assert t.context == "Use the context."
    assert "retrieval.score_kind" not in t.attributes


def test_openllmetry_answer_from_completion_when_workflow_output_missing() -> None:
    chat = _span(
        "c" * 16,
        None,
        {
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "hi?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "hello",
        },
        events=(
            SpanEvent("db.query.result", 0, {"db.query.result.id": "d1", "db.query.result.distance": 0.2}),
        ),
    )
    t = _build([chat])
    assert (t.question, t.answer, t.doc_ids) == ("hi?", "hello", ["d1"])
    assert t.attributes["retrieval.score_kind"] == "distance"


def test_openinference_langchain_documents_ids_from_metadata_and_reranker_wins() -> None:
    root = _span(
        "a" * 16,
        None,
        {
            "openinference.span.kind": "CHAIN",
            "input.value": json.dumps({"query": "remote days?"}),
            "input.mime_type": "application/json",
            "output.value": json.dumps({"result": "Two."}),
            "output.mime_type": "application/json",
        },
        1,
        9,
    )
    retriever = _span(
        "b" * 16,
        "a" * 16,
        {
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.content": "chunk A",
            "retrieval.documents.0.document.metadata": json.dumps({"id": "A"}),
            "retrieval.documents.1.document.content": "chunk B",
            "retrieval.documents.1.document.metadata": json.dumps({"source": "b.pdf"}),
        },
    )
    t = _build([root, retriever])
    assert (t.question, t.answer) == ("remote days?", "Two.")
    assert t.doc_ids == ["A", "b.pdf"]  # no id: metadata "source" (issue 23 item 9)
    assert t.contexts == ["chunk A", "chunk B"]
    assert t.documents[0].metadata == {"id": "A"}
    reranker = _span(
        "c" * 16,
        "a" * 16,
        {
            "openinference.span.kind": "RERANKER",
            "reranker.output_documents.0.document.id": "B",
            "reranker.output_documents.0.document.content": "chunk B",
            "reranker.output_documents.0.document.score": 0.99,
        },
        3,
        4,
    )
    t = _build([root, retriever, reranker])
    assert t.doc_ids == ["B"]
    assert t.documents[0].score == 0.99


def test_openinference_message_contents_form() -> None:
    llm = _span(
        "a" * 16,
        None,
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.contents.0.message_content.type": "text",
            "llm.input_messages.0.message.contents.0.message_content.text": "Where is Porto?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Portugal.",
            "llm.response.model_name": "m-2",
        },
    )
    t = _build([llm])
    assert (t.question, t.answer, t.model) == ("Where is Porto?", "Portugal.", "m-2")


def test_configured_attribute_names_for_home_grown_instrumentation() -> None:
    spans = [
        _span(
            "a" * 16,
            None,
            {
                "acme.q": "How long is probation?",
                "acme.a": "90 days.",
                "acme.llm": "local-7b",
                "acme.tenant": "hr-bot",
                "acme.docs": [{"key": "p#1", "body": "Probation lasts 90 days.", "sim": 0.7}],
                # a built-in convention on the same span loses to the configured names
                "openinference.span.kind": "CHAIN",
                "input.value": "ignored",
            },
        )
    ]
    t = _build(
        spans,
        otlp_attributes={
            "question": ["acme.question", "acme.q"],
            "answer": "acme.a",
            "model": "acme.llm",
            "app": "acme.tenant",
            "documents": "acme.docs",
            "document_id": "key",
            "document_content": "body",
            "document_score": "sim",
        },
    )
    assert (t.question, t.answer, t.model, t.app) == (
        "How long is probation?",
        "90 days.",
        "local-7b",
        "hr-bot",
    )
    assert t.doc_ids == ["p#1"]
    assert t.contexts == ["Probation lasts 90 days."]
    assert t.documents[0].score == 0.7
    assert t.attributes["conventions"] == ["custom", "openinference"]


@pytest.mark.parametrize("bad", [{"questoin": "x"}, {"question": 3}, {"answer": []}])
def test_invalid_attribute_overrides_are_config_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        default_mappers(Settings(otlp_attributes=bad).otlp)


def test_pluggable_mapper_list() -> None:
    class Marker:
        name = "marker"

        def match(self, spans: Sequence[SpanData]) -> bool:
            return any("x.q" in s.attributes for s in spans)

        def map(self, spans: Sequence[SpanData]) -> MappedFields:
            return {"question": spans[0].attributes["x.q"], "attributes": {"seen": True}}

    builder = TraceBuilder(Settings().otlp, [Marker(), *default_mappers(Settings().otlp)])
    t = builder.build(TID, [_span("a" * 16, None, {"x.q": "custom?"})])
    assert t.question == "custom?"
    assert t.attributes["seen"] is True
    assert t.answer is None


def test_no_convention_still_gives_a_trace() -> None:
    t = _build([_span("a" * 16, None, {"http.method": "GET"}, service="web")])
    assert t.trace_id == TID
    assert t.question is None
    assert t.answer is None
    assert t.app == "web"
    assert "conventions" not in t.attributes


def test_genai_older_event_forms() -> None:
    v126 = _span(
        "a" * 16,
        None,
        {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4", "gen_ai.response.model": "gpt-4-0613"},
        events=(
            SpanEvent(
                "gen_ai.content.prompt",
                0,
                {
                    "gen_ai.prompt": json.dumps(
                        [
                            {"role": "system", "content": "Be brief."},
                            {"role": "user", "content": "Capital of PT?"},
                        ]
                    )
                },
            ),
            SpanEvent(
                "gen_ai.content.completion",
                0,
                {"gen_ai.completion": json.dumps([{"role": "assistant", "content": "Lisbon."}])},
            ),
        ),
    )
    t = _build([v126])
    assert (t.question, t.answer, t.model, t.context) == (
        "Capital of PT?",
        "Lisbon.",
        "gpt-4-0613",
        "Be brief.",
    )
    v130 = _span(
        "a" * 16,
        None,
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        events=(
            SpanEvent("gen_ai.system.message", 0, {"content": "Use the docs."}),
            SpanEvent("gen_ai.user.message", 0, {"content": "Where is Porto?"}),
            SpanEvent(
                "gen_ai.choice",
                0,
                {"index": 0, "message": json.dumps({"role": "assistant", "content": "North."})},
            ),
        ),
    )
    t = _build([v130])
    assert (t.question, t.answer, t.context) == ("Where is Porto?", "North.", "Use the docs.")


def test_root_error_status_makes_the_trace_not_evaluable() -> None:
    t = _build(
        [_span("a" * 16, None, {"openinference.span.kind": "CHAIN", "input.value": "q"}, status_code=2)]
    )
    assert (t.error, not_evaluable_reason(t)) == ("status ERROR", "trace_error")
    t = _build([_span("a" * 16, None, {"openinference.span.kind": "CHAIN", "input.value": "q"})])
    assert (t.error, not_evaluable_reason(t)) == (None, "no_answer")


def test_langfuse_attributes() -> None:
    root = _span(
        "a" * 16,
        None,
        {
            "langfuse.trace.name": "policy-qa",
            "langfuse.trace.input": json.dumps({"question": "How long is probation?"}),
            "langfuse.trace.output": json.dumps("90 days."),
            "langfuse.trace.metadata.app": "hr-assistant",
            "session.id": "s-1",
        },
        1,
        3,
    )
    retriever = _span(
        "b" * 16,
        "a" * 16,
        {
            "langfuse.observation.type": "retriever",
            "langfuse.observation.output": json.dumps(
                [{"id": "hr#prob", "content": "Probation lasts 90 days.", "score": 0.8}, "Loose chunk."]
            ),
        },
    )
    gen = _span(
        "c" * 16,
        "a" * 16,
        {
            "langfuse.observation.type": "generation",
            "langfuse.observation.model.name": "gpt-4o-mini",
            "langfuse.observation.input": json.dumps(
                [{"role": "system", "content": "Answer from context."}, {"role": "user", "content": "..."}]
            ),
            "langfuse.observation.output": json.dumps({"role": "assistant", "content": "90 days."}),
        },
        2,
        3,
    )
    t = _build([gen, retriever, root])
    assert (t.question, t.answer, t.model, t.app, t.scenario) == (
        "How long is probation?",
        "90 days.",
        "gpt-4o-mini",
        "hr-assistant",
        "policy-qa",
    )
    assert t.doc_ids == ["hr#prob", None]
    assert t.contexts == ["Probation lasts 90 days.", "Loose chunk."]
    assert t.context == "Answer from context."
    assert t.session_id == "s-1"
    assert "session_id" not in t.attributes
    assert t.attributes["conventions"] == ["langfuse"]


def test_attribute_and_metadata_values_are_made_json_safe() -> None:
    from ragpulse.ingest.otlp.conventions import jsonable

    assert jsonable({"b": b"\x00\x01", "f": float("nan"), "t": (1, 2.5), 3: {"x": [b"ok"]}}) == {
        "b": "AAE=",
        "f": None,
        "t": [1, 2.5],
        "3": {"x": ["b2s="]},
    }
    retrieval = _span(
        "a" * 16,
        None,
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": [
                {"id": "d1", "score": 0.5, "metadata": {"raw": b"\xff", "page": 3}}
            ],
        },
    )
    t = _build([retrieval])
    assert t.documents[0].metadata == {"raw": "/w==", "page": 3}
    json.dumps(t.model_dump(mode="json"))


def test_openinference_agent_messages_in_input_and_output_values() -> None:
    root = _span(
        "a" * 16,
        None,
        {
            "openinference.span.kind": "AGENT",
            "input.value": json.dumps({"messages": [{"type": "human", "content": "Is parking free?"}]}),
            "input.mime_type": "application/json",
            "output.value": json.dumps(
                {
                    "messages": [
                        {"type": "human", "content": "Is parking free?"},
                        {"type": "ai", "content": "Yes, for staff."},
                    ]
                }
            ),
            "output.mime_type": "application/json",
        },
    )
    t = _build([root])
    assert (t.question, t.answer) == ("Is parking free?", "Yes, for staff.")


def test_deeply_nested_json_string_attribute_is_kept_as_text() -> None:
    from ragpulse.ingest.otlp.conventions.base import maybe_json

    deep = "[" * 100_000 + "]" * 100_000
    assert maybe_json(deep) == deep
    assert maybe_json('{"question": "q"}') == {"question": "q"}
