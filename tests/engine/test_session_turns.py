"""The engine gives a session's trace without turns the earlier turns its store finds (issue 28); a failing
look-up is counted and the trace judged without them, never lost."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.model import Source, Trace, Turn
from ragpulse.testing import MemoryStore, ScriptedJudge

EARLIER = [Turn(question="How long is parental leave?", answer="Sixteen weeks.")]


class SessionStore(MemoryStore):
    """A memory store with the session look-up; ``fail`` makes it raise."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.asked: list[tuple[str, datetime | None, str, int]] = []

    async def session_turns(
        self, session_id: str, *, before: datetime | None, exclude: str, limit: int
    ) -> list[Turn]:
        self.asked.append((session_id, before, exclude, limit))
        if self.fail:
            raise ConnectionError("database gone")
        return EARLIER


def _trace(**kw: Any) -> Trace:
    return Trace(trace_id="f-1", question="Is it paid?", answer="Yes.", source=Source.KAFKA, **kw)


async def _run(store: SessionStore, trace: Trace, history_turns: int = 3) -> Engine:
    seen: list[Trace] = []

    def score(t: Trace) -> float:
        seen.append(t)
        return 1.0

    judge = ScriptedJudge("relevancy", score)
    async with Engine({"relevancy": judge}, store, Settings().engine, history_turns=history_turns) as eng:
        await eng.submit(trace)
        assert await eng.drain(5)
    assert [t.turns for t in seen] == [store.traces["f-1"].trace.turns]  # judged with what is stored
    return eng


async def test_session_trace_gets_the_stored_turns() -> None:
    store = SessionStore()
    await _run(store, _trace(session_id="s-1"))
    assert store.traces["f-1"].trace.turns == tuple(EARLIER)
    assert store.asked == [("s-1", None, "f-1", 3)]


async def test_no_look_up_without_session_with_own_turns_or_when_off() -> None:
    store = SessionStore()
    await _run(store, _trace())
    own = (Turn(question="Own?"),)
    await _run(store, _trace(session_id="s-1", turns=own))
    assert store.traces["f-1"].trace.turns == own
    assert store.asked == []
    off = SessionStore()
    await _run(off, _trace(session_id="s-1"), history_turns=0)
    assert off.asked == []
    assert off.traces["f-1"].trace.turns == ()


async def test_a_failed_look_up_is_counted_and_the_trace_judged_without() -> None:
    store = SessionStore(fail=True)
    eng = await _run(store, _trace(session_id="s-1"))
    assert eng.stats.session_lookup_failures == 1
    assert store.traces["f-1"].trace.turns == ()
    assert [j.judge for j in store.traces["f-1"].judgements] == ["relevancy"]
