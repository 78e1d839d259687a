"""A batch replay stores its test set while it judges (issue 27 item 7), not before.

Proved by the order of events, not by timing: the store's ``upsert_test_set`` starts, then waits until the first
judged result has been written, and only then finishes. Stored first (as before), the replay would wait for a
write that comes only after the upsert: the guard's timeout would end the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from ragpulse.config import Settings
from ragpulse.errors import StoreError
from ragpulse.model import RunStatus, TestCase, TestSet, TraceResult
from ragpulse.protocols import CaseSource, WriteReport
from ragpulse.runs.replay import run_replay
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import MemoryStore, ScriptedJudge
from testsupport import report_json

#: Seconds the upsert waits for the first write before the test fails (a guard against a hang, not a timing).
GUARD_S = 30.0


class EventStore(MemoryStore):
    """The in-memory store, recording ``upsert_started`` / ``write`` / ``upsert_finished``; its upsert waits for
    the first write (or raises ``fail_upsert``)."""

    def __init__(self, fail_upsert: StoreError | None = None) -> None:
        super().__init__()
        self.events: list[str] = []
        self.first_write = asyncio.Event()
        self.fail_upsert = fail_upsert

    async def upsert_test_set(self, ts: CaseSource) -> None:
        self.events.append("upsert_started")
        if self.fail_upsert is not None:
            raise self.fail_upsert
        await asyncio.wait_for(self.first_write.wait(), GUARD_S)
        await super().upsert_test_set(ts)
        self.events.append("upsert_finished")

    async def write_results(self, results: Sequence[TraceResult]) -> WriteReport:
        self.events.append("write")
        self.first_write.set()
        return await super().write_results(results)


def _ts(n: int = 20) -> TestSet:
    return TestSet(
        name="overlap",
        cases=tuple(TestCase(id=f"c{i}", question=f"q{i}", answer=f"a{i}") for i in range(n)),
    )


async def test_the_test_set_is_stored_while_the_cases_are_judged() -> None:
    store = EventStore()
    report = await run_replay(
        _ts(), judges={"relevancy": ScriptedJudge("relevancy", 0.9)}, store=store, settings=Settings()
    )
    assert report.status is RunStatus.COMPLETED
    assert report.cases_total == 20
    first_write = store.events.index("write")
    assert store.events.index("upsert_started") < first_write < store.events.index("upsert_finished")
    stored = store.test_sets["overlap"]
    assert [c.id for c in stored.cases] == [f"c{i}" for i in range(20)]
    assert store.runs[report.run_id].status is RunStatus.COMPLETED


async def test_an_identical_stored_test_set_is_not_stored_again() -> None:
    store = EventStore()
    ts = _ts(3)
    await run_replay(
        ts, judges={"relevancy": ScriptedJudge("relevancy", 0.9)}, store=store, settings=Settings()
    )
    store.events.clear()
    report = await run_replay(
        ts, judges={"relevancy": ScriptedJudge("relevancy", 0.9)}, store=store, settings=Settings()
    )
    assert report.status is RunStatus.COMPLETED
    assert "upsert_started" not in store.events
    assert store.events.count("write") >= 1


async def test_a_test_set_that_cannot_be_stored_fails_the_run() -> None:
    store = EventStore(fail_upsert=StoreError("injected: test_cases insert failed", retriable=False))
    with pytest.raises(StoreError, match="injected: test_cases insert failed"):
        await run_replay(
            _ts(), judges={"relevancy": ScriptedJudge("relevancy", 0.9)}, store=store, settings=Settings()
        )
    (run,) = store.runs.values()
    assert run.status is RunStatus.FAILED
    assert "overlap" not in store.test_sets
    assert asyncio.current_task() is not None
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]  # the cancel was taken back


@pytest.mark.integration  # PostgreSQL
async def test_postgres_links_the_cases_judged_before_their_test_set_was_stored(pg_url: str) -> None:
    # A result write links a trace to its run only when its case is stored (RUN_CASES_UPSERT): the results
    # written before the upsert committed are linked when the block ends, so the run shows every case.
    settings = Settings(store_database_url=pg_url)
    store = await PostgresStore.connect(pg_url, settings.store)
    events: list[str] = []
    first_write = asyncio.Event()
    upsert_test_set, write_results = store.upsert_test_set, store.write_results

    async def upsert(ts: CaseSource) -> None:
        events.append("upsert_started")
        await asyncio.wait_for(first_write.wait(), GUARD_S)
        await upsert_test_set(ts)
        events.append("upsert_finished")

    async def write(results: Sequence[TraceResult]) -> WriteReport:
        events.append("write")
        try:
            return await write_results(results)
        finally:
            first_write.set()  # committed: its links were not written, the cases were not stored yet

    store.upsert_test_set = upsert  # type: ignore[method-assign]
    store.write_results = write  # type: ignore[method-assign]
    try:
        report = await run_replay(
            _ts(), judges={"relevancy": ScriptedJudge("relevancy", 0.9)}, store=store, settings=settings
        )
        assert events.index("upsert_started") < events.index("write") < events.index("upsert_finished")
        assert report.status is RunStatus.COMPLETED
        assert await store.count_run_results(report.run_id) == 20
        shown = await report_json(store, report)
        assert [c["case_id"] for c in shown["cases"]] == [f"c{i}" for i in range(20)]
        # each case row shows the judgement the run produced (pinned when the case was linked, issue 30 item 10)
        assert [c["judgements"] for c in shown["cases"]] == [
            {"relevancy": {"score": 0.9, "passed": True, "status": "ok", "reason": "scripted 0.90"}}
        ] * 20
        assert await store.link_run_cases(report.run_id) == 0  # the run is finished: nothing more to link
    finally:
        await store.close()
