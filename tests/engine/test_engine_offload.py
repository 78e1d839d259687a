"""Inline (heuristic) judges of a long trace run in a worker thread, not on the event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.engine.engine import OFFLOAD_CHARS, trace_text_chars
from ragpulse.judges.frame import ok
from ragpulse.judges.registry import build_judges
from ragpulse.model import Backend, Document, Judgement, JudgementStatus, Trace
from ragpulse.testing.fakes import MemoryStore


class ThreadRecordingJudge:
    """An inline judge (``inline = True`` and a synchronous ``evaluate``) that records the thread it ran in."""

    version = "v1"
    backend = Backend.HEURISTIC
    threshold = 0.5
    inline = True

    def __init__(self, name: str, *, fail: bool = False) -> None:
        self.name = name
        self.fail = fail
        self.threads: dict[str, str] = {}  # trace id -> thread name

    def evaluate(self, trace: Trace) -> Judgement:
        self.threads[trace.trace_id] = threading.current_thread().name
        if self.fail:
            raise RuntimeError("boom")
        return ok(
            judge=self.name,
            version=self.version,
            backend=self.backend,
            threshold=self.threshold,
            score=len(trace.answer or "") / 100_000,
            reason="length",
        )

    async def judge(self, trace: Trace) -> Judgement:
        return self.evaluate(trace)


def _settings() -> Any:
    return Settings(engine_workers=2, engine_flush_interval_s=0.01).engine


def test_trace_text_chars_counts_every_text_a_judge_reads() -> None:
    tr = Trace(
        trace_id="t",
        question="abc",  # 3
        answer="de",  # 2
        context="f",  # 1
        documents=[Document(id="d1", content="gh", rank=0), Document(id="d2", rank=1)],  # 2
        expected_answer="ijkl",  # 4
        reference_contexts=("mn",),  # 2
        labelled_contexts=("o",),  # 1
    )
    assert trace_text_chars(tr) == 15


async def test_long_trace_is_judged_in_a_worker_thread_short_one_on_the_loop() -> None:
    store = MemoryStore()
    judge, failing = ThreadRecordingJudge("len"), ThreadRecordingJudge("bad", fail=True)
    short = Trace(trace_id="short", question="q", answer="a" * (OFFLOAD_CHARS - 2))
    long = Trace(trace_id="long", question="q", answer="a" * (OFFLOAD_CHARS - 1))
    loop_thread = threading.current_thread().name
    async with Engine({"len": judge, "bad": failing}, store, _settings()) as eng:
        await eng.submit(short)
        await eng.submit(long)
        assert await eng.drain(10)
    assert judge.threads["short"] == loop_thread
    assert judge.threads["long"] != loop_thread
    assert failing.threads["long"] == judge.threads["long"]  # the trace's inline judges run in one hop
    assert eng.stats.offloaded_traces == 1
    assert eng.stats.judge_exceptions == 2
    got = {tid: {j.judge: j for j in r.judgements} for tid, r in store.traces.items()}
    assert got["long"]["len"].score == (OFFLOAD_CHARS - 1) / 100_000
    assert got["short"]["len"].score == (OFFLOAD_CHARS - 2) / 100_000
    for tid in ("short", "long"):
        bad = got[tid]["bad"]
        assert (bad.status, bad.reason) == (JudgementStatus.ERROR, "judge_exception: RuntimeError: boom")


@pytest.mark.integration  # slow check (~2 s CPU): the integration lane, docs/dev/testing.md
async def test_offloaded_judgements_equal_the_inline_ones_and_the_loop_keeps_running() -> None:
    """The default offline judges on a long Chinese trace: same judgements as judged on the loop, and a
    ticker task on the loop keeps ticking while the trace is judged."""
    settings = Settings()
    judges = build_judges(settings)
    para = "退款政策允许顾客在购买后三十天内退货，前提是保留收据并且商品未使用。客服团队会在两个工作日内处理申请。"
    contexts = [Document(id=f"d{i}", content=f"第{i}条：" + para * 400, rank=i) for i in range(6)]
    trace = Trace(trace_id="big-zh", question="退货的期限是多久？", answer=para * 200, documents=contexts)
    assert trace_text_chars(trace) > 10 * OFFLOAD_CHARS
    expected = {name: j.evaluate(trace) for name, j in judges.items()}  # type: ignore[attr-defined]

    store = MemoryStore()
    judging = 0  # judges inside evaluate() right now (any thread)
    ticks_while_judging = 0
    judge_threads: set[str] = set()
    stop = asyncio.Event()

    def watched(evaluate: Any) -> Any:
        def run(t: Trace) -> Judgement:
            nonlocal judging
            judge_threads.add(threading.current_thread().name)
            judging += 1
            try:
                return evaluate(t)  # type: ignore[no-any-return]
            finally:
                judging -= 1

        return run

    for j in judges.values():
        j.evaluate = watched(j.evaluate)  # type: ignore[attr-defined]

    async def ticker() -> None:
        nonlocal ticks_while_judging
        while not stop.is_set():
            if judging:
                ticks_while_judging += 1
            await asyncio.sleep(0.001)

    async with Engine(judges, store, _settings()) as eng:
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.01)
        await eng.submit(trace)
        assert await eng.drain(60)
        stop.set()
        await task
    assert eng.stats.offloaded_traces == 1
    got = {j.judge: j for j in store.traces["big-zh"].judgements}
    assert set(got) == set(expected)
    for name, want in expected.items():
        assert (got[name].status, got[name].score, got[name].reason) == (want.status, want.score, want.reason)
    # Events, not the clock: the judges ran off the loop's thread, and the loop's ticker ran while a judge was
    # inside evaluate() (judged on the loop, no tick could happen then).
    assert threading.main_thread().name not in judge_threads
    assert ticks_while_judging >= 3
