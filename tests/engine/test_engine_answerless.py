"""Traces without an answer: judges declaring ``needs_answer = False`` still run, the others are skipped."""

from __future__ import annotations

from typing import Any

from ragpulse.config import JudgeRoute, Settings
from ragpulse.engine import Engine
from ragpulse.model import JudgementStatus, Trace, TraceOutcome
from ragpulse.protocols import Judge, judge_needs_answer
from ragpulse.testing.fakes import MemoryStore, ScriptedJudge


class RetrievalJudge(ScriptedJudge):
    """A scripted judge that decides without the answer."""

    needs_answer = False


class AnswerJudge(ScriptedJudge):
    """A scripted judge that says so explicitly."""

    needs_answer = True


def _settings(**kw: Any) -> Settings:
    base: dict[str, Any] = {
        "engine_workers": 2,
        "engine_flush_interval_s": 0.01,
        "engine_shutdown_deadline_s": 5.0,
    }
    base.update(kw)
    return Settings(**base)


def test_needs_answer_is_optional_and_defaults_to_true() -> None:
    plain, retrieval, explicit = ScriptedJudge("p"), RetrievalJudge("r"), AnswerJudge("a")
    assert isinstance(plain, Judge)
    assert isinstance(retrieval, Judge)
    assert not hasattr(plain, "needs_answer")
    assert [judge_needs_answer(j) for j in (plain, retrieval, explicit)] == [True, False, True]


async def test_answerless_trace_runs_only_judges_without_needs_answer() -> None:
    store = MemoryStore()
    ctx = RetrievalJudge("ctx", 0.75, threshold=0.5)
    rel, kw = ScriptedJudge("rel", 0.9), AnswerJudge("kw", 0.9)
    judges = {"rel": rel, "ctx": ctx, "kw": kw}
    async with Engine(judges, store, _settings().engine) as eng:
        await eng.submit(Trace(trace_id="t-1", question="q", answer=None, context="chunk"))
        await eng.submit(Trace(trace_id="t-2", question="q", answer="  ", context="chunk"))
        await eng.submit(Trace(trace_id="t-3", question="q", answer="a", context="chunk"))
    assert (ctx.calls, rel.calls, kw.calls) == (3, 1, 1)  # rel/kw only on the trace with an answer
    for tid in ("t-1", "t-2"):
        r = store.traces[tid]
        assert (r.outcome, r.outcome_reason) == (TraceOutcome.EVALUATED, None)
        got = [(j.judge, j.status, j.score, j.passed, j.reason) for j in r.judgements]
        assert got == [  # in the judges' order; the skipped ones say why, never a silent 0
            ("rel", JudgementStatus.SKIPPED, None, None, "no_answer"),
            ("ctx", JudgementStatus.OK, 0.75, True, "scripted 0.75"),
            ("kw", JudgementStatus.SKIPPED, None, None, "no_answer"),
        ]
        skipped_rel = r.judgements[0]
        assert (skipped_rel.version, skipped_rel.backend, skipped_rel.threshold) == (
            rel.version,
            rel.backend,
            rel.threshold,
        )
    assert [j.status for j in store.traces["t-3"].judgements] == [JudgementStatus.OK] * 3
    assert (eng.stats.evaluated, eng.stats.answerless, eng.stats.not_evaluable) == (3, 2, 0)


async def test_answerless_trace_with_no_runnable_judge_stays_not_evaluable() -> None:
    store = MemoryStore()
    rel, kw = ScriptedJudge("rel"), AnswerJudge("kw")
    async with Engine({"rel": rel, "kw": kw}, store, _settings().engine) as eng:
        await eng.submit(Trace(trace_id="t-1", question="q", answer=None, context="chunk"))
    r = store.traces["t-1"]
    assert (r.outcome, r.outcome_reason, r.judgements) == (TraceOutcome.NOT_EVALUABLE, "no_answer", ())
    assert (rel.calls, kw.calls) == (0, 0)
    assert (eng.stats.not_evaluable, eng.stats.answerless, eng.stats.evaluated) == (1, 0, 0)


async def test_no_question_is_not_evaluable_even_for_retrieval_judges() -> None:
    store = MemoryStore()
    ctx = RetrievalJudge("ctx")
    async with Engine({"ctx": ctx}, store, _settings().engine) as eng:
        await eng.submit(Trace(trace_id="t-1", question=" ", answer=None, context="chunk"))
        await eng.submit(Trace(trace_id="t-2", question=None, answer="a", context="chunk"))
    assert ctx.calls == 0
    for tid in ("t-1", "t-2"):
        r = store.traces[tid]
        assert (r.outcome, r.outcome_reason, r.judgements) == (TraceOutcome.NOT_EVALUABLE, "no_question", ())


async def test_routes_decide_which_judges_apply_to_answerless_traces() -> None:
    store = MemoryStore()
    ctx, rel = RetrievalJudge("ctx", 0.2), ScriptedJudge("rel")
    routes = [JudgeRoute(app="chat", judges=["rel"])]
    async with Engine({"ctx": ctx, "rel": rel}, store, _settings().engine, routes=routes) as eng:
        await eng.submit(Trace(trace_id="t-chat", app="chat", question="q", context="c"))
        await eng.submit(Trace(trace_id="t-search", app="search", question="q", context="c"))
        await eng.submit(Trace(trace_id="t-inc", app="search", question="q", context="c", incomplete=True))
    # the chat route has no judge that can run without an answer
    assert store.traces["t-chat"].outcome is TraceOutcome.NOT_EVALUABLE
    search = store.traces["t-search"]
    assert search.outcome is TraceOutcome.EVALUATED
    assert [(j.judge, j.status, j.passed) for j in search.judgements] == [
        ("ctx", JudgementStatus.OK, False),
        ("rel", JudgementStatus.SKIPPED, None),
    ]
    assert store.traces["t-inc"].outcome is TraceOutcome.INCOMPLETE
    assert (eng.stats.answerless, eng.stats.incomplete, eng.stats.evaluated) == (2, 1, 1)
