"""Lenient text (issue 11 item 7): lone surrogates and invalid bytes become U+FFFD before storage, everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

from ragpulse.config import Settings
from ragpulse.errors import StoreError
from ragpulse.ingest.events import parse_event
from ragpulse.model import RunStatus, TraceOutcome, TraceResult
from ragpulse.protocols import RunStore, WriteReport
from ragpulse.runs import case_trace_id
from ragpulse.runs.replay import run_replay
from ragpulse.runs.testset_files import load_test_set
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import ScriptedJudge

# A half emoji (SDK truncation) as a JSON escape, and a UTF-8 character cut after 2 of its 3 bytes.
SURROGATE_EVENT = b'{"traceId": "u-1", "question": "Cake \\ud83d?", "answer": "yes \\ud83d\\ude00", "contexts": ["x\\udc00y"]}'
CUT_BYTES_EVENT = b'{"traceId": "u-2", "question": "caf\xc3", "answer": "\xe2\x82 euro"}'


def test_lone_surrogate_and_cut_bytes_become_replacement_character() -> None:
    t = parse_event(SURROGATE_EVENT)
    assert t.question == "Cake \ufffd?"
    assert t.answer == "yes 😀"  # a valid pair stays one emoji
    assert t.contexts == ["x\ufffdy"]
    t2 = parse_event(CUT_BYTES_EVENT)
    assert t2.question == "caf\ufffd"
    assert t2.answer == "\ufffd euro"


async def test_lone_surrogate_trace_is_stored(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_database_url=pg_url).store)
    try:
        t = parse_event(SURROGATE_EVENT)
        # The store is the last line of defence too: a trace built in code with a lone surrogate is stored.
        raw = t.model_copy(
            update={"trace_id": "u-3", "answer": "half \ud83d", "attributes": {"k\udc00": "v\ud800"}}
        )
        await store.write_results(
            [
                TraceResult(trace=t, outcome=TraceOutcome.EVALUATED),
                TraceResult(trace=raw, outcome=TraceOutcome.EVALUATED),
            ]
        )
        got = await store.get_trace("u-1")
        assert got is not None
        assert got.trace.question == "Cake \ufffd?"
        got3 = await store.get_trace("u-3")
        assert got3 is not None
        assert got3.trace.answer == "half \ufffd"
        assert got3.trace.attributes == {"k\ufffd": "v\ufffd"}
    finally:
        await store.close()


def _write_testset(tmp_path: Path) -> Path:
    p = tmp_path / "uni.jsonl"
    p.write_bytes(
        b'{"id": "a", "question": "q \\ud83d", "answer": "a1"}\n'
        b'{"id": "b", "question": "caf\\u00e9\\u0000", "answer": "a2"}\n'
        b'{"id": "c", "question": "q3", "answer": "a3"}\n'
    )
    return p


def test_test_set_file_is_read_leniently_and_cases_know_their_line(tmp_path: Path) -> None:
    p = _write_testset(tmp_path)
    ts = load_test_set(p)
    assert [c.question for c in ts.cases] == ["q \ufffd", "café", "q3"]
    assert [c.origin for c in ts.cases] == [f"{p}:1", f"{p}:2", f"{p}:3"]


class _RejectOne:
    """The real store, except that the write of one trace fails for good (a data error)."""

    def __init__(self, store: PostgresStore, bad_trace_id: str) -> None:
        self._store = store
        self._bad = bad_trace_id

    async def write_results(self, results: Sequence[TraceResult]) -> WriteReport:
        if any(r.trace.trace_id == self._bad for r in results):
            raise StoreError("write_results failed: DataError: value out of range", retriable=False)
        return await self._store.write_results(results)

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


async def test_replay_row_that_cannot_be_stored_is_reported_with_file_and_line(
    pg_url: str, tmp_path: Path
) -> None:
    p = _write_testset(tmp_path)
    ts = load_test_set(p)
    settings = Settings(store_database_url=pg_url)
    store = await PostgresStore.connect(pg_url, settings.store)
    try:
        bad = _RejectOne(store, case_trace_id("uni-run", "b"))
        report = await run_replay(
            ts,
            judges={"keyword": ScriptedJudge("keyword", 1.0)},
            store=cast(RunStore, bad),  # the real store behind __getattr__, which mypy cannot see
            settings=settings,
            run_id="uni-run",
        )
        assert report.status is RunStatus.COMPLETED_WITH_ERRORS
        stored = await store.get_run_results("uni-run")
        assert sorted(r.trace.test_case_id or "" for r in stored) == ["a", "c"]
        by_case = {c.case_id: c for c in report.cases}
        assert by_case["b"].reason == f"store_failed: {p}:2"
        run = await store.get_run("uni-run")
        assert run is not None
        assert run.status is RunStatus.COMPLETED_WITH_ERRORS
    finally:
        await store.close()
