"""Issue 11 items 1–4: the answering model call, streaming reprs, retrieval through tool calls and errored
traces, in every convention (OpenInference, OpenLLMetry/Traceloop, OTel GenAI, Langfuse).

Each convention is a small "dialect" that writes the same trace shapes with its own attributes; the tests
then assert the same mapped values for all of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.engine.engine import not_evaluable_reason
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.conventions.base import is_streaming_repr, tool_documents
from ragpulse.ingest.otlp.spans import SpanData, SpanEvent
from ragpulse.model import Trace

TID = "4bf92f3577b34da6a3ce929d0e0e4736"
T0 = 1_764_590_000_000_000_000  # 2025-12-01, Unix ns
QUESTION = "How many days of remote work are allowed during probation?"
DOC1 = "Probation: remote work up to 2 days per week."
DOC2 = "After probation: up to 4 days per week."
ANSWER = "Up to 2 days per week while on probation."
FOLLOW_UP = "1. What after probation? 2. Which days? 3. Who approves?"
SYSTEM = "You are the HR assistant. Answer only from the context."
STREAM = "<generator object answer_stream at 0x7f3a2c1e9b40>"
ASTREAM = "<async_generator object RunnableSequence.astream at 0x10d4f2a40>"

ROOT, RET, LLM1, LLM2, TOOL = "a" * 16, "b" * 16, "c" * 16, "d" * 16, "e" * 16
Msgs = list[tuple[str, str]]


def _span(sid: str, parent: str | None, attrs: dict[str, Any], start: int, end: int, **kw: Any) -> SpanData:
    return SpanData(
        trace_id=TID,
        span_id=sid,
        parent_span_id=parent,
        name=sid,
        start_unix_nano=T0 + start * 1_000_000,
        end_unix_nano=T0 + end * 1_000_000,
        attributes=attrs,
        resource={"service.name": "hr-assistant"},
        **kw,
    )


@dataclass(frozen=True)
class Dialect:
    """How one convention writes a root (question/answer), a retriever, an LLM call and a tool call."""

    name: str
    root: Callable[[str | None, str | None], dict[str, Any]]
    retriever: Callable[[list[str]], dict[str, Any]]
    llm: Callable[[Msgs, str | None], dict[str, Any]]
    tool: Callable[[str], dict[str, Any]]


def _oi_msgs(prefix: str, msgs: Msgs) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, (role, text) in enumerate(msgs):
        out[f"{prefix}.{i}.message.role"] = role
        out[f"{prefix}.{i}.message.content"] = text
    return out


def _oi_root(q: str | None, a: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "CHAIN"}
    if q is not None:
        attrs["input.value"] = q
    if a is not None:
        attrs["output.value"] = a
    return attrs


def _oi_retriever(docs: list[str]) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
    for i, d in enumerate(docs):
        attrs[f"retrieval.documents.{i}.document.content"] = d
    return attrs


def _oi_llm(msgs: Msgs, output: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini"}
    attrs.update(_oi_msgs("llm.input_messages", msgs))
    if output is not None:
        attrs.update(_oi_msgs("llm.output_messages", [("assistant", output)]))
    return attrs


def _tl_root(q: str | None, a: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"traceloop.span.kind": "workflow", "traceloop.workflow.name": "hr_qa"}
    attrs["traceloop.entity.input"] = json.dumps({"args": [q] if q else [], "kwargs": {}})
    if a is not None:
        attrs["traceloop.entity.output"] = json.dumps(a)
    return attrs


def _tl_retriever(docs: list[str]) -> dict[str, Any]:
    return {
        "traceloop.span.kind": "task",
        "traceloop.entity.output": json.dumps(
            {"documents": [{"page_content": d, "metadata": {}} for d in docs]}
        ),
    }


def _tl_llm(msgs: Msgs, output: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"llm.request.type": "chat", "gen_ai.request.model": "gpt-4o-mini"}
    for i, (role, text) in enumerate(msgs):
        attrs[f"gen_ai.prompt.{i}.role"] = role
        attrs[f"gen_ai.prompt.{i}.content"] = text
    if output is not None:
        attrs["gen_ai.completion.0.role"] = "assistant"
        attrs["gen_ai.completion.0.content"] = output
    return attrs


def _tl_tool(output: str) -> dict[str, Any]:
    return {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "search_kb",
        "traceloop.entity.output": output,
    }


def _ga_messages(msgs: Msgs) -> str:
    out = []
    for role, text in msgs:
        if role == "tool":
            out.append(
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": text}]}
            )
        else:
            out.append({"role": role, "parts": [{"type": "text", "content": text}]})
    return json.dumps(out)


def _ga_root(q: str | None, a: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
    if q is not None:
        attrs["gen_ai.input.messages"] = _ga_messages([("user", q)])
    if a is not None:
        attrs["gen_ai.output.messages"] = _ga_messages([("assistant", a)])
    return attrs


def _ga_retriever(docs: list[str]) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.documents": json.dumps([{"id": f"d{i}", "content": d} for i, d in enumerate(docs)]),
    }


def _ga_llm(msgs: Msgs, output: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.input.messages": _ga_messages(msgs),
    }
    if output is not None:
        attrs["gen_ai.output.messages"] = _ga_messages([("assistant", output)])
    return attrs


def _ga_tool(output: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_kb",
        "gen_ai.tool.call.result": output,
    }


def _lf_root(q: str | None, a: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"langfuse.trace.name": "hr-qa"}
    if q is not None:
        attrs["langfuse.trace.input"] = json.dumps({"question": q})
    if a is not None:
        attrs["langfuse.trace.output"] = json.dumps(a)
    return attrs


def _lf_retriever(docs: list[str]) -> dict[str, Any]:
    return {"langfuse.observation.type": "retriever", "langfuse.observation.output": json.dumps(docs)}


def _lf_llm(msgs: Msgs, output: str | None) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "langfuse.observation.type": "generation",
        "langfuse.observation.model.name": "gpt-4o-mini",
        "langfuse.observation.input": json.dumps([{"role": r, "content": t} for r, t in msgs]),
    }
    if output is not None:
        attrs["langfuse.observation.output"] = json.dumps({"role": "assistant", "content": output})
    return attrs


def _lf_tool(output: str) -> dict[str, Any]:
    return {"langfuse.observation.type": "tool", "langfuse.observation.output": output}


DIALECTS = [
    Dialect(
        "openinference",
        _oi_root,
        _oi_retriever,
        _oi_llm,
        lambda o: {"openinference.span.kind": "TOOL", "output.value": o},
    ),
    Dialect("openllmetry", _tl_root, _tl_retriever, _tl_llm, _tl_tool),
    Dialect("otel-genai", _ga_root, _ga_retriever, _ga_llm, _ga_tool),
    Dialect("langfuse", _lf_root, _lf_retriever, _lf_llm, _lf_tool),
]


def _build(spans: Sequence[SpanData]) -> Trace:
    return TraceBuilder(Settings().otlp).build(TID, spans)


def _context_prompt(docs: list[str]) -> str:
    return "Context:\n" + "\n".join(docs) + f"\n\nQuestion: {QUESTION}"


@pytest.fixture(params=DIALECTS, ids=[d.name for d in DIALECTS])
def dialect(request: pytest.FixtureRequest) -> Dialect:
    d: Dialect = request.param
    return d


def test_answering_call_is_the_one_that_read_the_documents_not_the_later_follow_up(dialect: Dialect) -> None:
    """Item 1: root without output; retriever, the answering LLM, then a follow-up-questions LLM."""
    spans = [
        _span(ROOT, None, dialect.root(QUESTION, None), 0, 1000),
        _span(RET, ROOT, dialect.retriever([DOC1, DOC2]), 10, 100),
        _span(
            LLM1,
            ROOT,
            dialect.llm([("system", SYSTEM), ("user", _context_prompt([DOC1, DOC2]))], ANSWER),
            110,
            700,
        ),
        _span(
            LLM2,
            ROOT,
            dialect.llm([("system", "Suggest three follow-up questions."), ("user", ANSWER)], FOLLOW_UP),
            710,
            990,
        ),
    ]
    t = _build(spans)
    assert t.answer == ANSWER
    assert t.answer_span_id == LLM1
    assert t.answer_candidates == (LLM1, LLM2)
    assert t.not_evaluable is None
    assert t.contexts == [DOC1, DOC2]
    assert t.context == SYSTEM
    assert t.question == QUESTION


def test_two_indistinguishable_calls_are_ambiguous(dialect: Dialect) -> None:
    spans = [
        _span(ROOT, None, dialect.root(None, None), 0, 1000),
        _span(
            LLM1, ROOT, dialect.llm([("user", "Rewrite: remote work rules")], "Remote work rules."), 10, 400
        ),
        _span(
            LLM2, ROOT, dialect.llm([("user", "Summarise the handbook")], "The handbook says ..."), 410, 900
        ),
    ]
    t = _build(spans)
    assert t.not_evaluable == "ambiguous_answer"
    assert t.answer is None
    assert t.answer_span_id is None
    assert t.answer_candidates == (LLM1, LLM2)


def test_among_several_calls_reading_the_documents_the_last_before_the_root_ended_wins(
    dialect: Dialect,
) -> None:
    """A draft and a refined answer both read the documents; a third call ends after the root (async)."""
    msgs = [("user", _context_prompt([DOC1]))]
    spans = [
        _span(ROOT, None, dialect.root(QUESTION, None), 0, 1000),
        _span(RET, ROOT, dialect.retriever([DOC1]), 10, 100),
        _span(LLM1, ROOT, dialect.llm(msgs, "Draft: two days."), 110, 500),
        _span(LLM2, ROOT, dialect.llm(msgs, ANSWER), 510, 900),
        _span(TOOL, ROOT, dialect.llm(msgs, "Late side call."), 910, 1500),
    ]
    t = _build(spans)
    assert (t.answer, t.answer_span_id) == (ANSWER, LLM2)
    assert t.answer_candidates == (LLM1, LLM2)


@pytest.mark.parametrize("repr_text", [STREAM, ASTREAM])
def test_streaming_repr_falls_back_to_the_llm_completion(dialect: Dialect, repr_text: str) -> None:
    """Item 2: the root output is a generator repr; the LLM span has the completion."""
    spans = [
        _span(ROOT, None, dialect.root(QUESTION, repr_text), 0, 1000),
        _span(RET, ROOT, dialect.retriever([DOC1]), 10, 100),
        _span(LLM1, ROOT, dialect.llm([("user", _context_prompt([DOC1]))], ANSWER), 110, 900),
    ]
    t = _build(spans)
    assert t.answer == ANSWER
    assert t.answer_span_id == LLM1


def test_streaming_repr_without_completion_has_no_answer(dialect: Dialect) -> None:
    spans = [
        _span(ROOT, None, dialect.root(QUESTION, STREAM), 0, 1000),
        _span(RET, ROOT, dialect.retriever([DOC1]), 10, 100),
        _span(LLM1, ROOT, dialect.llm([("user", _context_prompt([DOC1]))], ASTREAM), 110, 900),
    ]
    t = _build(spans)
    assert t.answer is None
    assert t.question == QUESTION


TOOL_JSON = json.dumps(
    [
        {"doc_id": "kb-17", "snippet": DOC1, "score": 0.92},
        {"id": "kb-18", "page_content": DOC2, "source": "handbook"},
    ]
)


def test_tool_span_outputs_are_the_documents(dialect: Dialect) -> None:
    """Item 3: agent → LLM tool call → TOOL span search_kb → LLM with the tool message; no retriever."""
    spans = [
        _span(ROOT, None, dialect.root(QUESTION, None), 0, 1000),
        _span(LLM1, ROOT, dialect.llm([("system", SYSTEM), ("user", QUESTION)], None), 10, 200),
        _span(TOOL, ROOT, dialect.tool(TOOL_JSON), 210, 300),
        _span(
            LLM2,
            ROOT,
            dialect.llm([("system", SYSTEM), ("user", QUESTION), ("tool", TOOL_JSON)], ANSWER),
            310,
            900,
        ),
    ]
    t = _build(spans)
    assert t.contexts == [DOC1, DOC2]
    assert t.doc_ids == ["kb-17", "kb-18"]
    assert [d.score for d in t.documents] == [0.92, None]
    assert t.documents[1].metadata == {"source": "handbook"}
    assert (t.answer, t.answer_span_id) == (ANSWER, LLM2)
    assert t.context == SYSTEM  # still the context given to the model, but not what is judged


def test_tool_messages_of_the_answering_call_are_the_documents(dialect: Dialect) -> None:
    """No TOOL span exported: the ``tool`` messages of the answering call hold the plain-text result."""
    spans = [
        _span(ROOT, None, dialect.root(QUESTION, None), 0, 1000),
        _span(
            LLM1,
            ROOT,
            dialect.llm([("system", SYSTEM), ("user", QUESTION), ("tool", DOC1)], ANSWER),
            310,
            900,
        ),
    ]
    t = _build(spans)
    assert t.contexts == [DOC1]
    assert t.answer == ANSWER


def test_system_prompt_is_judged_only_without_documents(dialect: Dialect) -> None:
    spans = [
        _span(ROOT, None, dialect.root(QUESTION, ANSWER), 0, 1000),
        _span(
            LLM1, ROOT, dialect.llm([("system", f"{SYSTEM}\n{DOC1}"), ("user", QUESTION)], ANSWER), 10, 900
        ),
    ]
    t = _build(spans)
    assert t.documents == ()
    assert t.contexts == [f"{SYSTEM}\n{DOC1}"]


def test_root_error_status_makes_the_trace_not_evaluable(dialect: Dialect) -> None:
    """Item 4: root status ERROR with an exception event."""
    exc = SpanEvent(
        "exception",
        T0 + 999_000_000,
        {"exception.type": "httpx.ReadTimeout", "exception.message": "upstream timeout\nafter 30 s"},
    )
    spans = [
        _span(
            ROOT,
            None,
            dialect.root(QUESTION, "Sorry, something went wrong… upstream timeout"),
            0,
            1000,
            status_code=2,
            events=(exc,),
        ),
        _span(RET, ROOT, dialect.retriever([DOC1]), 10, 100),
    ]
    t = _build(spans)
    assert t.error == "httpx.ReadTimeout: upstream timeout after 30 s"
    assert not_evaluable_reason(t) == "trace_error"
    ok = _build([_span(ROOT, None, dialect.root(QUESTION, ANSWER), 0, 1000)])
    assert (ok.error, not_evaluable_reason(ok)) == (None, None)


def test_error_status_message_is_preferred() -> None:
    t = _build(
        [_span(ROOT, None, _oi_root(QUESTION, None), 0, 10, status_code=2, status_message="Gateway 504")]
    )
    assert (t.error, not_evaluable_reason(t)) == ("Gateway 504", "trace_error")


def test_implausible_span_times_are_replaced() -> None:
    spans = [
        SpanData(
            TID,
            ROOT,
            None,
            "r",
            start_unix_nano=1_000,
            end_unix_nano=2_000_000_000,
            attributes=_oi_root(QUESTION, ANSWER),
        )
    ]
    t = _build(spans)
    assert t.time_replaced is True
    assert t.end_time is not None
    assert t.end_time.year >= 2026
    # a sender whose clock reads 1970 but whose durations are right keeps its latency (end - start = 1.999999 s)
    assert t.latency_s == pytest.approx(1.999999)
    assert t.start_time is not None
    assert t.end_time - t.start_time == timedelta(seconds=1.999999)
    assert t.attributes["clock_skew_s"] < -1.7e9  # the sender's end (1970-01-01T00:00:02Z) minus now
    ok = _build([_span(ROOT, None, _oi_root(QUESTION, ANSWER), 0, 1000)])
    assert ok.time_replaced is False
    assert ok.end_time is not None
    assert ok.end_time.year == 2025


def test_helpers() -> None:
    assert is_streaming_repr(STREAM)
    assert is_streaming_repr(ASTREAM)
    assert not is_streaming_repr("I stream answers <generator object x at 0x1> sometimes.")
    docs = tool_documents([TOOL_JSON, "plain text result", json.dumps([1, 2]), None, "  "])
    assert [d.content for d in docs] == [DOC1, DOC2, "plain text result", "[1, 2]"]
    assert [d.id for d in docs] == ["kb-17", "kb-18", None, None]
