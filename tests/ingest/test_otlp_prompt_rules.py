"""Mapping rules issue 23 added, each on its smallest input: passages pasted into the user message, inline
reasoning, output roles, LangChain tool messages, Langfuse 4+ metadata quoting, the question as evidence."""

from __future__ import annotations

import json

import pytest

from ragpulse.config import Settings
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.conventions.base import answer_text, split_prompt, tool_documents
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.model import Trace

PASSAGE = "Employees on probation may work remotely up to two days per week with manager approval."
Q = "How many days per week can I work remotely while on probation?"


def test_labelled_question_after_passages() -> None:
    text = f"Answer using only these passages.\n\n[hr-1] {PASSAGE}\n\nQuestion: {Q}"
    assert split_prompt(text, None) == (Q, f"Answer using only these passages.\n\n[hr-1] {PASSAGE}")


def test_llamaindex_qa_template_with_known_question() -> None:
    text = (
        f"Context information is below.\n---------------------\n{PASSAGE}\n---------------------\n"
        f"Given the context information and not prior knowledge, answer the query.\nQuery: {Q}\nAnswer: "
    )
    question, passages = split_prompt(text, Q)
    assert question == Q
    assert passages is not None
    assert PASSAGE in passages
    assert Q not in passages
    assert split_prompt(text, None)[0] == Q  # the label alone finds it too


def test_plain_user_message_claims_no_passages() -> None:
    assert split_prompt(Q, None) == (Q, None)
    assert split_prompt(Q, Q) == (Q, None)
    assert split_prompt("Question: what?", None) == (
        "Question: what?",
        None,
    )  # a label with nothing before it


@pytest.mark.parametrize("tag", ["think", "thinking", "reasoning", "THINK"])
def test_inline_reasoning_is_not_the_answer(tag: str) -> None:
    assert answer_text(f"<{tag}>Maybe four? No: two.</{tag}>\n\nTwo days per week.") == "Two days per week."
    assert answer_text(f"<{tag}>only thoughts</{tag}>") is None
    assert (
        answer_text("Two days. <think>kept: not leading</think>")
        == "Two days. <think>kept: not leading</think>"
    )


def test_langchain_tool_message_is_split_into_documents() -> None:
    content = json.dumps([{"id": "hr-1", "text": PASSAGE}, {"id": "hr-2", "text": "Four days after."}])
    message = {"type": "tool", "data": {"content": content, "type": "tool", "name": "search_kb"}}
    docs = tool_documents([json.dumps(message)])
    assert [(d.id, d.content) for d in docs] == [("hr-1", PASSAGE), ("hr-2", "Four days after.")]
    lc = {"lc": 1, "type": "constructor", "kwargs": {"content": content}}
    assert [d.id for d in tool_documents([lc])] == ["hr-1", "hr-2"]


def _span(span_id: str, parent: str | None, name: str, attrs: dict[str, object], start: int) -> SpanData:
    return SpanData(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_unix_nano=1_700_000_000_000_000_000 + start,
        end_unix_nano=1_700_000_001_000_000_000 - start,
        attributes=attrs,
        resource={"service.name": "unknown_service:python"},
    )


def test_langfuse_4_quoted_metadata_values_are_decoded() -> None:
    meta = {"langfuse.trace.metadata.app": '"checkout"', "langfuse.trace.metadata.scenario": '"refunds"'}
    root = _span(
        "b7ad6b7169203331",
        None,
        "answer",
        {**meta, "langfuse.observation.input": json.dumps(Q), "langfuse.observation.output": '"Two days."'},
        0,
    )
    t = TraceBuilder(Settings().otlp).build(root.trace_id, [root])
    assert (t.app, t.scenario) == ("checkout", "refunds")


def test_streamed_unknown_role_completion_is_the_answer() -> None:
    call = _span(
        "00f067aa0ba902b7",
        None,
        "ChatOpenAI.chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": Q}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "unknown", "parts": [{"type": "text", "content": "Two days."}]}]
            ),
        },
        0,
    )
    t = TraceBuilder(Settings().otlp).build(call.trace_id, [call])
    assert (t.question, t.answer) == (Q, "Two days.")


def test_question_is_never_evidence_for_the_answer() -> None:
    """Item 14: a passage that is only in the (wrongly stored) question does not support the answer."""
    bonus = "Contractors receive a yearly bonus of ten percent."
    stuffed = f"Context: {bonus}\n{Q}"
    answer = f"{PASSAGE} {bonus}"
    trace = Trace(trace_id="t", question=stuffed, answer=answer, documents=[PASSAGE])
    j = HeuristicFaithfulnessJudge(Settings(), {}).evaluate(trace)
    # sentence 1 supported by the document, sentence 2 by nothing: capped at the weakest sentence + 0.2 (v3)
    assert j.score == pytest.approx(0.2)
    assert j.passed is False
    grounded = Trace(trace_id="t", question=Q, answer=PASSAGE, documents=[PASSAGE])
    assert HeuristicFaithfulnessJudge(Settings(), {}).evaluate(grounded).passed is True


def test_langfuse_app_without_metadata_is_the_trace_name_not_unknown_service() -> None:
    root = _span(
        "b7ad6b7169203331",
        None,
        "hr-assistant",
        {"langfuse.observation.input": json.dumps(Q), "langfuse.observation.output": '"Two days."'},
        0,
    )
    t = TraceBuilder(Settings().otlp).build(root.trace_id, [root])
    assert t.app == "hr-assistant"  # the root observation's name; resource says unknown_service:python
    named = SpanData(
        **{**root.__dict__, "attributes": {**root.attributes, "langfuse.trace.name": "checkout"}}
    )
    assert TraceBuilder(Settings().otlp).build(root.trace_id, [named]).app == "checkout"
    served = SpanData(**{**root.__dict__, "resource": {"service.name": "payments"}})
    assert TraceBuilder(Settings().otlp).build(root.trace_id, [served]).app == "payments"


def test_object_repr_output_is_not_the_answer_and_llamaindex_tool_output_is_unwrapped() -> None:
    """Item 15: LlamaIndex workflows record ``StopEvent(result=AgentOutput(…))`` (cut at 200 characters)."""
    assert (
        answer_text("StopEvent(result=AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT...")
        is None
    )
    assert answer_text("Two days (with approval).") == "Two days (with approval)."
    content = json.dumps([{"id": "hr-1", "text": PASSAGE}])
    tool_output = {"blocks": [{"text": content}], "tool_name": "search_kb", "raw_output": content}
    assert [(d.id, d.content) for d in tool_documents([json.dumps(tool_output)])] == [("hr-1", PASSAGE)]


def test_known_question_wins_over_a_rewritten_labelled_one() -> None:
    """Item 4: the answering call of a condense-question chat carries the rewritten question; the user's stays."""
    text = f"Context information is below.\n{PASSAGE}\nQuery: Is parental leave paid in full?\nAnswer: "
    assert split_prompt(text, "Is it paid in full?") == (
        "Is it paid in full?",
        f"Context information is below.\n{PASSAGE}",
    )


def test_llamaindex_predict_wrapper_is_not_the_answering_call() -> None:
    """Item 7: in the recorded LlamaIndex query engine, ``OpenAI.predict`` wraps ``OpenAI.chat``; the inner
    call (the messages the model got) answers, and its system prompt is the context given to the model."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from conformance.corpus import CAPTURED
    from ragpulse.ingest.otlp.spans import request_to_spans

    req = ExportTraceServiceRequest.FromString((CAPTURED / "oi-llamaindex-plain.binpb").read_bytes())
    spans = request_to_spans(req, "ragpulse").spans
    t = TraceBuilder(Settings().otlp).build(spans[0].trace_id, spans)
    names = {s.span_id: s.name for s in spans}
    assert names[t.answer_span_id or ""] == "OpenAI.chat"
    assert [names[c] for c in t.answer_candidates] == ["OpenAI.chat"]
    assert (t.context or "").startswith("You are an expert Q&A system")


def test_openinference_reasoning_content_parts_are_not_the_answer() -> None:
    pre = "llm.output_messages.0.message"
    call = _span(
        "00f067aa0ba902b7",
        None,
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": Q,
            f"{pre}.role": "assistant",
            f"{pre}.contents.0.message_content.type": "reasoning",
            f"{pre}.contents.0.message_content.text": "Maybe four days? The policy says two.",
            f"{pre}.contents.1.message_content.type": "text",
            f"{pre}.contents.1.message_content.text": "Two days per week.",
        },
        0,
    )
    t = TraceBuilder(Settings().otlp).build(call.trace_id, [call])
    assert t.answer == "Two days per week."


def test_inline_reasoning_is_kept_on_the_trace() -> None:
    call = _span(
        "00f067aa0ba902b7",
        None,
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": Q}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "content": "<think>Four? No, two.</think>\nTwo days per week."}]
            ),
        },
        0,
    )
    t = TraceBuilder(Settings().otlp).build(call.trace_id, [call])
    assert (t.answer, t.attributes["reasoning"]) == ("Two days per week.", "Four? No, two.")
