"""Trace assembly: grouping across requests, grace period, idle timeout, bounded memory, late spans."""

from __future__ import annotations

import asyncio
from typing import Any

from ingest.otlp_testutil import FakeClock, MemorySink
from ragpulse.config import Settings
from ragpulse.ingest.otlp.assembly import TraceAssembler
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.spans import SpanData

T1 = "0af7651916cd43dd8448eb211c80319c"


def _root(tid: str = T1, answer: str = "Two days.") -> SpanData:
    return SpanData(
        trace_id=tid,
        span_id="b7ad6b7169203331",
        parent_span_id=None,
        name="RetrievalQA",
        start_unix_nano=1_700_000_000_000_000_000,
        end_unix_nano=1_700_000_001_500_000_000,
        attributes={
            "openinference.span.kind": "CHAIN",
            "input.value": "How many remote days?",
            "output.value": answer,
        },
        resource={"service.name": "hr-assistant"},
    )


def _retriever(tid: str = T1, span_id: str = "00f067aa0ba902b7") -> SpanData:
    return SpanData(
        trace_id=tid,
        span_id=span_id,
        parent_span_id="b7ad6b7169203331",
        name="VectorStoreRetriever",
        start_unix_nano=1_700_000_000_100_000_000,
        end_unix_nano=1_700_000_000_300_000_000,
        attributes={
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.id": "policy#1",
            "retrieval.documents.0.document.content": "Up to two days per week.",
            "retrieval.documents.1.document.id": "policy#2",
            "retrieval.documents.1.document.content": "Four days after probation.",
        },
        resource={"service.name": "hr-assistant"},
    )


def _assembler(clock: FakeClock, **over: float) -> TraceAssembler:
    values: dict[str, Any] = {"otlp_root_grace_s": 2.0, "otlp_idle_timeout_s": 30.0, **over}
    settings = Settings(**values)
    return TraceAssembler(settings.otlp, TraceBuilder(settings.otlp), clock=clock)


def test_child_before_parent_across_two_requests_is_one_trace() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_retriever()])  # request 1: the child
    clock.advance(1.0)
    assert asm.poll() == []
    asm.add([_root()])  # request 2: the root
    clock.advance(1.99)
    assert asm.poll() == []
    clock.advance(0.01)
    (trace,) = asm.poll()
    assert trace.trace_id == T1
    assert trace.span_id == "b7ad6b7169203331"
    assert trace.incomplete is False
    assert trace.question == "How many remote days?"
    assert trace.answer == "Two days."
    assert trace.doc_ids == ["policy#1", "policy#2"]
    assert trace.contexts == ["Up to two days per week.", "Four days after probation."]
    assert trace.latency_s == 1.5
    assert asm.pending_traces == 0
    assert asm.stats.completed == 1


def test_children_exported_after_the_root_within_grace_are_included() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_root()])
    clock.advance(1.5)
    asm.add([_retriever()])
    clock.advance(0.5)
    (trace,) = asm.poll()
    assert trace.doc_ids == ["policy#1", "policy#2"]


def test_late_span_after_release_is_dropped_not_a_second_trace() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_root()])
    clock.advance(2.0)
    assert len(asm.poll()) == 1
    assert asm.add([_retriever()]) == 0
    assert asm.stats.late_spans == 1
    clock.advance(60)
    assert asm.poll() == []
    assert asm.pending_traces == 0


def test_duplicate_spans_are_deduplicated() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_retriever(), _retriever()])
    asm.add([_retriever(), _root()])
    clock.advance(2.0)
    (trace,) = asm.poll()
    assert trace.doc_ids == ["policy#1", "policy#2"]


def test_idle_timeout_releases_incomplete_trace_and_activity_extends_it() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_retriever()])
    clock.advance(20)
    asm.add([_retriever(span_id="00f067aa0ba902b8")])
    clock.advance(20)  # 40 s after the first span, 20 s after the last
    assert asm.poll() == []
    assert asm.next_deadline() == clock.t + 10
    clock.advance(10)
    # recognised, rootless and unanswered (a slow model call, issue 23 item 17): held up to 5 idle timeouts
    assert asm.poll() == []
    assert asm.next_deadline() == clock.t + 120
    clock.advance(120)
    (trace,) = asm.poll()
    assert trace.incomplete is True
    assert trace.answer is None
    assert trace.latency_s is None
    assert trace.app == "hr-assistant"
    assert asm.stats.incomplete == 1


def test_pending_traces_are_bounded_and_nothing_taken_is_evicted() -> None:
    """Issue 11 item 10: at the limit, spans of new traces are not taken (reported), held traces stay."""
    clock = FakeClock()
    asm = _assembler(clock, otlp_max_pending_traces=3)
    ids = [f"{i:032x}" for i in range(1, 6)]
    for tid in ids:
        asm.add([_retriever(tid)])
        clock.advance(0.1)
    assert asm.pending_traces == 3
    assert asm.saturated
    assert asm.stats.spans_no_room == 2
    # a held trace still takes more spans; a trace that was not taken stays out
    assert asm.add([_retriever(ids[0], span_id="1111111111111111")]) == 1
    plan = asm.plan([_retriever(ids[4], span_id="2222222222222222")])
    assert (len(plan.keep), plan.no_room) == (0, 1)
    clock.advance(60 + 120)  # rootless and unanswered: the slow-answer window (issue 23 item 17)
    assert [t.trace_id for t in asm.poll()] == ids[1:3] + ids[:1]
    assert not asm.saturated


def test_a_trace_being_made_durable_is_not_released_until_commit() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_root()])
    plan = asm.plan([_retriever()])
    clock.advance(5)  # past the root grace
    assert asm.poll() == []
    asm.commit(plan)
    clock.advance(1)
    (trace,) = asm.poll()
    assert trace.doc_ids == ["policy#1", "policy#2"]
    aborted = asm.plan([_retriever("ffffffffffffffffffffffffffffffff")])
    asm.abort(aborted)
    assert asm.pending_traces == 0


def test_flush_releases_everything() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_root()])
    asm.add([_retriever("ffffffffffffffffffffffffffffffff")])
    out = {t.trace_id: t.incomplete for t in asm.flush()}
    assert out == {T1: False, "ffffffffffffffffffffffffffffffff": True}
    assert asm.pending_traces == 0


async def test_run_submits_to_the_sink_and_flushes_on_stop() -> None:
    settings = Settings(otlp_root_grace_s=0.0, otlp_idle_timeout_s=30.0)
    asm = TraceAssembler(settings.otlp, TraceBuilder(settings.otlp))
    sink = MemorySink()
    task = asyncio.create_task(asm.run(sink))
    asm.add([_retriever(), _root()])
    (trace,) = await sink.wait_for(1, timeout=5)
    assert trace.trace_id == T1
    assert not trace.incomplete
    asm.add([_retriever("ffffffffffffffffffffffffffffffff")])
    asm.stop()
    await asyncio.wait_for(task, 5)
    assert [t.incomplete for t in sink.traces] == [False, True]
    assert asm.stats.submitted == 2


def test_trace_without_question_or_answer_is_still_built() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    root = _root(answer="")
    asm.add([root])
    clock.advance(2)
    (trace,) = asm.poll()
    assert trace.question == "How many remote days?"
    assert trace.answer is None


def test_spans_per_trace_are_bounded() -> None:
    clock = FakeClock()
    settings = Settings(otlp_root_grace_s=0.0)
    asm = TraceAssembler(settings.otlp, TraceBuilder(settings.otlp), clock=clock, max_spans_per_trace=3)
    kept = asm.add([_retriever(span_id=f"{i:016x}") for i in range(1, 6)])
    assert kept == 3
    assert asm.stats.spans_over_limit == 2
    assert asm.add([_retriever(span_id=f"{1:016x}")]) == 1  # a duplicate of a kept span is still fine
    asm.add([_root()])
    assert asm.stats.spans_over_limit == 3


async def test_a_failing_mapper_or_sink_does_not_stop_the_assembler() -> None:
    from collections.abc import Sequence

    from ragpulse.ingest.otlp.conventions import MappedFields, default_mappers
    from ragpulse.model import Trace
    from ragpulse.protocols import AckCallback

    class Exploding:
        name = "exploding"

        def match(self, spans: Sequence[SpanData]) -> bool:
            return any(s.trace_id.startswith("dead") for s in spans)

        def map(self, spans: Sequence[SpanData]) -> MappedFields:
            raise KeyError("bug")

    class PickySink(MemorySink):
        async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None:
            if trace.trace_id.startswith("bad"):
                raise RuntimeError("engine closed")
            await super().submit(trace, ack)

    settings = Settings(otlp_root_grace_s=0.0)
    asm = TraceAssembler(
        settings.otlp, TraceBuilder(settings.otlp, [Exploding(), *default_mappers(settings.otlp)])
    )
    sink = PickySink()
    task = asyncio.create_task(asm.run(sink))
    asm.add([_root("dead" + "0" * 28), _root("bad" + "0" * 29), _root()])
    (trace,) = await sink.wait_for(1, timeout=5)
    assert trace.trace_id == T1
    asm.stop()
    await asyncio.wait_for(task, 5)
    assert (asm.stats.unmappable, asm.stats.submit_errors, asm.stats.submitted) == (1, 1, 1)


def test_front_service_root_first_waits_for_the_rag_service() -> None:
    """Issue 23 item 16: the gateway's root arrives 5 s (an SDK batch delay) before the RAG service's spans,
    whose entry span has a remote parent; the trace is released once, with the RAG service's entry span as
    its root, not refused as late."""
    clock = FakeClock()
    asm = _assembler(clock)
    gateway = SpanData(
        trace_id=T1,
        span_id="aaaaaaaaaaaaaaaa",
        parent_span_id=None,
        name="POST /ask",
        kind=3,
        start_unix_nano=1_699_999_999_900_000_000,
        end_unix_nano=1_700_000_001_600_000_000,
        attributes={"http.request.method": "POST"},
        resource={"service.name": "gateway"},
    )
    assert asm.add([gateway]) == 1
    clock.advance(5.0)
    assert asm.poll() == []  # only spans no convention recognises: held
    rag_root = SpanData(
        **{**_root().__dict__, "parent_span_id": "aaaaaaaaaaaaaaaa", "parent_is_remote": True}
    )
    assert asm.add([rag_root, _retriever()]) == 2
    clock.advance(1.0)
    assert asm.poll() == []  # the RAG entry span restarted the grace
    clock.advance(1.5)
    [trace] = asm.poll()
    assert trace.span_id == "b7ad6b7169203331"
    assert trace.question == "How many remote days?"
    assert trace.app == "hr-assistant"
    assert [d.id for d in trace.documents] == ["policy#1", "policy#2"]
    assert not trace.incomplete
    assert asm.stats.late_spans == 0


def test_unrecognised_trace_is_released_at_the_idle_timeout() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    plain = SpanData(trace_id=T1, span_id="aaaaaaaaaaaaaaaa", parent_span_id=None, name="GET /health")
    asm.add([plain])
    clock.advance(29.0)
    assert asm.poll() == []
    clock.advance(1.5)
    [trace] = asm.poll()
    assert trace.answer is None
    assert trace.span_id == "aaaaaaaaaaaaaaaa"


def test_slow_answer_is_not_lost_to_the_idle_timeout() -> None:
    """Issue 23 item 17: the retriever span arrives, the model call takes 45 s (over the 30 s idle timeout);
    the trace is held and released once, complete, when the root and the answer arrive."""
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_retriever()])
    clock.advance(45.0)
    assert asm.poll() == []  # rootless, recognised, unanswered: held past the idle timeout
    asm.add([_root()])
    clock.advance(2.5)
    [trace] = asm.poll()
    assert not trace.incomplete
    assert trace.answer == "Two days."
    assert [d.id for d in trace.documents] == ["policy#1", "policy#2"]
    assert asm.stats.late_spans == 0


def test_rootless_unanswered_trace_is_released_incomplete_after_the_slow_window() -> None:
    clock = FakeClock()
    asm = _assembler(clock)
    asm.add([_retriever()])
    clock.advance(30.0 * 5 - 1)
    assert asm.poll() == []
    clock.advance(2.0)
    [trace] = asm.poll()
    assert trace.incomplete
    assert trace.answer is None
