"""The portal's service functions against a real PostgreSQL: test sets and cases, import with line numbers,
the trace list (keyset pages, filters), one trace with claims, copy to test set, score statistics, dead
letters."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from ragpulse.config import Settings
from ragpulse.errors import BadRequest, Conflict, NotFoundError
from ragpulse.export.otel_setup import SCORE_BUCKETS
from ragpulse.model import (
    Backend,
    Document,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.portal import deadletters, stats, traces
from ragpulse.runs import testsets
from ragpulse.store.postgres import PostgresStore

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    s = await PostgresStore.connect(pg_url, Settings(store_database_url=pg_url, store_pool_max=2).store)
    try:
        yield s
    finally:
        await s.close()


def _j(judge: str, score: float | None, *, claims: list[dict[str, object]] | None = None) -> Judgement:
    if score is None:
        return Judgement(
            judge=judge,
            version="v1",
            backend=Backend.LLM,
            status=JudgementStatus.ERROR,
            reason="judge_unavailable",
        )
    flags = JudgementFlags.model_validate({"decided_by": "claims", "claims": claims} if claims else {})
    return Judgement(
        judge=judge,
        version="v1",
        backend=Backend.LLM,
        model="m",
        score=score,
        passed=score >= 0.5,
        threshold=0.5,
        status=JudgementStatus.OK,
        reason=f"{judge} reason",
        flags=flags,
        prompt_tokens=10,
        completion_tokens=2,
    )


def _r(
    i: int, *js: Judgement, app: str = "shop", source: Source = Source.KAFKA, age_s: int = 0
) -> TraceResult:
    t = Trace(
        trace_id=f"{i:032x}",
        app=app,
        scenario="faq",
        question=f"question number {i}",
        documents=(Document(id=f"d{i}", content=f"context {i}", rank=0),),
        answer=f"Answer {i}. It is green.",
        source=source,
    )
    return TraceResult(
        trace=t, outcome=TraceOutcome.EVALUATED, judgements=js, received_at=NOW - timedelta(seconds=age_s)
    )


async def test_test_set_life_cycle(store: PostgresStore) -> None:
    info = await testsets.create_test_set(store, "kb-faq", knowledge_base="kb1", description="FAQ")
    assert info.case_count == 0
    with pytest.raises(Conflict):
        await testsets.create_test_set(store, "kb-faq")
    with pytest.raises(BadRequest):
        await testsets.create_test_set(store, "bad/name!")
    await testsets.create_test_set(store, "other", knowledge_base="kb2")
    page = await testsets.list_test_sets(store, limit=1)
    assert [t.name for t in page.items] == ["other"]
    assert page.next_cursor is not None
    page2 = await testsets.list_test_sets(store, limit=1, cursor=page.next_cursor)
    assert [t.name for t in page2.items] == ["kb-faq"]
    assert page2.next_cursor is None
    assert [t.name for t in (await testsets.list_test_sets(store, knowledge_base="kb1")).items] == ["kb-faq"]
    kbs = await testsets.knowledge_bases(store)
    assert [(k.name, k.test_sets) for k in kbs] == [("kb1", 1), ("kb2", 1)]
    upd = await testsets.update_test_set(store, "kb-faq", {"description": "new"})
    assert upd.description == "new"
    assert upd.knowledge_base == "kb1"
    case = await testsets.add_case(store, "kb-faq", {"question": "q1", "keywords": "a, b", "tier": "gold"})
    assert case == {"id": "case-1", "question": "q1", "keywords": ["a", "b"], "tier": "gold"}
    with pytest.raises(Conflict):
        await testsets.add_case(store, "kb-faq", {"id": "case-1", "question": "again"})
    got, created = await testsets.put_case(store, "kb-faq", "case-1", {"question": "q1b"})
    assert created is False
    assert got == {"id": "case-1", "question": "q1b"}
    _, created = await testsets.put_case(store, "kb-faq", "c2", {"question": "q2"})
    assert created is True
    assert (await testsets.get_test_set_info(store, "kb-faq")).case_count == 2
    await testsets.delete_case(store, "kb-faq", "case-1")
    with pytest.raises(NotFoundError):
        await testsets.get_case(store, "kb-faq", "case-1")
    await testsets.delete_test_set(store, "kb-faq")
    with pytest.raises(NotFoundError):
        await testsets.get_test_set_info(store, "kb-faq")


async def test_import_lists_rejected_rows_with_physical_lines(store: PostgresStore) -> None:
    await testsets.create_test_set(store, "imp")
    jsonl = '{"id": "a", "question": "q"}\n\n{"id": "b", "question": ["x"]}\nnot json\n{"id": "a", "question": "r"}\n'
    res = await testsets.import_cases(store, "imp", jsonl, "jsonl")
    assert [(r.line, r.id) for r in res.created] == [(1, "a")]
    assert [r.line for r in res.rejected] == [3, 4, 5]
    assert "question must be a string" in res.rejected[0].reason
    assert res.rejected[1].reason.startswith("not valid JSON")
    assert "duplicate case id 'a'" in res.rejected[2].reason
    csv_text = 'id,question,keywords\nb,"multi\nline",k1\nc,q3,k2,extra\n'
    res = await testsets.import_cases(store, "imp", csv_text, "csv")
    assert [(r.line, r.id) for r in res.created] == [(3, "b")]
    assert [(r.line, r.reason) for r in res.rejected] == [
        (4, "4 cells but the header has 3 (unquoted comma?)")
    ]
    res = await testsets.import_cases(store, "imp", '[{"id": "a", "question": "new"}, 3]', "json")
    assert [(r.line, r.id) for r in res.updated] == [(1, "a")]
    assert [r.line for r in res.rejected] == [2]
    assert res.case_count == 2
    res = await testsets.import_cases(
        store, "imp", '{"id": "z", "question": "only"}', "jsonl", mode="replace"
    )
    assert res.case_count == 1
    ts = await testsets.load_test_set(store, "imp")
    assert [c.id for c in ts.cases] == ["z"]
    with pytest.raises(BadRequest):
        await testsets.import_cases(store, "imp", "[1,", "json")


async def test_trace_list_pages_and_filters(store: PostgresStore) -> None:
    results = [
        _r(i, _j("faithfulness", 0.2 if i % 3 == 0 else 0.9), _j("relevancy", 0.8), age_s=100 - i)
        for i in range(12)
    ]
    results.append(_r(99, _j("faithfulness", None), app="crm", age_s=0))
    results.append(_r(98, _j("faithfulness", 0.1), source=Source.API, age_s=0))
    await store.write_results(results)
    seen: list[str] = []
    cursor = None
    while True:
        page = await traces.list_traces(store, traces.TraceFilters(), limit=5, cursor=cursor)
        seen += [t.trace_id for t in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"{99:032x}"] + [f"{i:032x}" for i in range(11, -1, -1)]  # api left out, newest first
    fails = await traces.list_traces(store, traces.TraceFilters(judge="faithfulness", outcome="fail"))
    assert [t.trace_id for t in fails.items] == [f"{i:032x}" for i in (9, 6, 3, 0)]
    low = await traces.list_traces(
        store, traces.TraceFilters(judge="faithfulness", max_score=0.5, app="shop")
    )
    assert len(low.items) == 4
    errs = await traces.list_traces(store, traces.TraceFilters(judge="faithfulness", outcome="error"))
    assert [t.app for t in errs.items] == ["crm"]
    api = await traces.list_traces(store, traces.TraceFilters(source="api"))
    assert [t.trace_id for t in api.items] == [f"{98:032x}"]
    q = await traces.list_traces(store, traces.TraceFilters(q="NUMBER 11"))
    assert [t.trace_id for t in q.items] == [f"{11:032x}"]
    with pytest.raises(BadRequest):
        await traces.list_traces(store, traces.TraceFilters(q="x"), redact_text=True)
    # outcome without a judge: any judge has it (issue 30 item 2; it was a BadRequest)
    any_error = await traces.list_traces(store, traces.TraceFilters(outcome="error"))
    assert any_error.items
    assert all(any(j.outcome == "error" for j in t.judgements) for t in any_error.items)
    first = (await traces.list_traces(store, traces.TraceFilters(), limit=1)).items[0]
    assert sorted((j.judge, j.outcome) for j in first.judgements) == [("faithfulness", "error")]


async def test_trace_detail_claims_and_copy(store: PostgresStore) -> None:
    claims = [
        {
            "text": "Answer 1.",
            "start": 0,
            "end": 9,
            "verdict": "supported",
            "evidence": {"doc_id": "d1", "rank": 0},
        },
        {"start": 10, "end": 22, "verdict": "unsupported", "evidence": None},
    ]
    await store.write_results([_r(1, _j("faithfulness", 0.5, claims=claims))])
    d = await traces.get_trace(store, f"{1:032X}")
    assert d.question == "question number 1"
    assert [(c.text, c.start) for c in traces.unsupported_claims(d)] == [("It is green.", 10)]
    assert d.judgements[0].claims[0].evidence == {"doc_id": "d1", "rank": 0}
    assert d.judgements[0].decided_by == "claims"
    assert d.documents[0].content == "context 1"
    with pytest.raises(NotFoundError):
        await traces.get_trace(store, "f" * 32)
    await testsets.create_test_set(store, "copied")
    row = await traces.copy_to_test_set(store, f"{1:032x}", "copied", expected_answer="Green.")
    assert row["question"] == "question number 1"
    assert row["contexts"] == ["context 1"]
    assert row["doc_ids"] == ["d1"]
    assert row["expected_answer"] == "Green."
    assert row["app"] == "shop"
    with pytest.raises(Conflict):
        await traces.copy_to_test_set(store, f"{1:032x}", "copied")
    with pytest.raises(NotFoundError):
        await traces.copy_to_test_set(store, f"{1:032x}", "nope")


async def test_score_stats_use_prometheus_buckets(store: PostgresStore) -> None:
    scores = [0.05, 0.5, 0.51, 1.0, 0.0, 0.95]
    await store.write_results([_r(i, _j("faithfulness", s)) for i, s in enumerate(scores)])
    await store.write_results(
        [_r(50, _j("faithfulness", 0.3), source=Source.API), _r(51, _j("faithfulness", None))]
    )
    since, until = NOW - timedelta(hours=1), NOW + timedelta(hours=1)
    [fs] = await stats.score_stats(store, since=since, until=until)
    by_le = {b.le: b.count for b in fs.buckets}
    assert [b.le for b in fs.buckets] == list(SCORE_BUCKETS)
    assert by_le[0.05] == 2  # 0.0 and 0.05 (le is inclusive)
    assert by_le[0.5] == 1
    assert by_le[0.6] == 1
    assert by_le[0.95] == 1
    assert by_le[1.0] == 1
    assert sum(by_le.values()) == 6  # the source=api judgement is left out
    assert (fs.count, fs.passed, fs.failed, fs.errors) == (7, 4, 2, 1)
    assert fs.pass_rate == pytest.approx(4 / 6)
    [with_api] = await stats.score_stats(store, since=since, until=until, include_api=True)
    assert with_api.count == 8
    series = await stats.timeseries(store, since=since, until=until, interval=timedelta(hours=2))
    assert len(series) == 1
    assert sum(p.count for p in series[0].points) == 7
    assert stats.auto_interval(since, since + timedelta(days=7)) == timedelta(hours=6)


async def test_traces_of_runs_sent_through_otlp_stay_out_of_live_views(store: PostgresStore) -> None:
    """``replay --via otlp`` traces (source otlp, a run id) are test traffic: left out of the live trace list
    and the live statistics, counted under ``source=replay``, listed with ``run_id``/``source=all``."""
    live = [_r(i, _j("faithfulness", 0.9)) for i in (60, 61)]
    via = [_r(i, _j("faithfulness", 0.1), source=Source.OTLP) for i in (62, 63, 64)]
    via = [r.model_copy(update={"trace": r.trace.model_copy(update={"run_id": "via-1"})}) for r in via]
    await store.write_results(live + via)
    listed = await traces.list_traces(store, traces.TraceFilters())
    assert {t.trace_id for t in listed.items} == {f"{i:032x}" for i in (60, 61)}
    of_run = await traces.list_traces(store, traces.TraceFilters(run_id="via-1"))
    assert {t.trace_id for t in of_run.items} == {f"{i:032x}" for i in (62, 63, 64)}
    every = await traces.list_traces(store, traces.TraceFilters(source="all"))
    assert len(every.items) == 5
    since, until = NOW - timedelta(hours=1), NOW + timedelta(hours=1)
    [fs] = await stats.score_stats(store, since=since, until=until)
    assert (fs.count, fs.passed, fs.failed) == (2, 2, 0)  # was 5, 2, 3: the run's fails moved the live rate
    [replays] = await stats.score_stats(store, since=since, until=until, source="replay")
    assert (replays.count, replays.failed) == (3, 3)


async def test_dead_letters_page(store: PostgresStore) -> None:
    for i in range(3):
        await store.write_dead_letter(
            "kafka", f"not_json: {i}", b"\xff\xfe" if i == 0 else f"bad {i}", {"offset": i}
        )
    page = await deadletters.list_dead_letters(store, limit=2)
    assert [d.reason for d in page.items] == ["not_json: 2", "not_json: 1"]
    assert page.items[0].origin == {"offset": 2}
    assert page.items[0].payload == "bad 2"
    nxt = await deadletters.list_dead_letters(store, limit=2, cursor=page.next_cursor)
    assert [(d.payload_encoding, d.payload) for d in nxt.items] == [("base64", "//4=")]
    assert nxt.next_cursor is None


async def test_score_rollup_gives_the_same_numbers(store: PostgresStore, pg_url: str) -> None:
    import asyncpg

    now = datetime.now(UTC)  # the module's NOW may be minutes old by now
    scores = [0.05, 0.5, 0.51, 1.0, 0.0, 0.95, 0.3, 0.7]
    results = [_r(i, _j("faithfulness", s), app="shop" if i % 2 else "crm") for i, s in enumerate(scores)]
    results += [_r(40, _j("faithfulness", None)), _r(41, _j("faithfulness", 0.2), source=Source.API)]
    await store.write_results(results)
    conn = await asyncpg.connect(pg_url)
    try:  # spread the judgements over the last 6 days, at different minutes of their hours
        await conn.execute(
            """UPDATE judgements SET created_at = now() - ((('x' || substr(trace_id, 31, 2))::bit(8)::int % 20)
               * interval '7 hours 13 minutes')"""
        )
    finally:
        await conn.close()
    since, until = now - timedelta(days=7), now + timedelta(minutes=1)
    before = await stats.score_stats(store, since=since, until=until, by_app=True)
    upto = await stats.refresh_rollup(store)
    assert upto is not None
    after = await stats.score_stats(store, since=since, until=until, by_app=True)
    assert [a.model_dump() for a in after] == [b.model_dump() for b in before]
    assert sum(b.count for b in before) == 9  # source=api left out
    with_api = await stats.score_stats(store, since=since, until=until, include_api=True)
    assert with_api[0].count == 10
    narrow = await stats.score_stats(store, since=now - timedelta(hours=30), until=now - timedelta(hours=2))
    conn = await asyncpg.connect(pg_url)
    try:
        n = await conn.fetchval(
            "SELECT count(*) FROM judgements WHERE created_at >= $1 AND created_at < $2 AND source <> 'api'",
            now - timedelta(hours=30),
            now - timedelta(hours=2),
        )
    finally:
        await conn.close()
    assert sum(s.count for s in narrow) == n


async def test_text_search_is_refused_when_texts_are_redacted(store: PostgresStore) -> None:
    with pytest.raises(BadRequest, match="redact_text"):
        await traces.list_traces(store, traces.TraceFilters(text="refund"), redact_text=True)
    page = await traces.list_traces(store, traces.TraceFilters(text="  "), redact_text=True)
    assert page.items == []


def test_search_words_split_dedupe_and_bound() -> None:
    assert traces.search_words(" Courier  depot courier\tDEPOT 五天 ") == ("Courier", "depot", "五天")
    assert traces.search_words(None) == ()
    with pytest.raises(BadRequest, match="at most 8 words"):
        traces.search_words("a b c d e f g h i")


async def test_bulk_copy_writes_each_case_within_the_case_limit(store: PostgresStore) -> None:
    """Bulk add (issue 31 item 5): each trace through the one-case write; an expected answer given replaces the
    trace's; once the set is full the rest are refused with ``too_many_cases``; unknown traces are listed."""
    await store.write_results([_r(i, _j("faithfulness", 0.9)) for i in (1, 2, 3)])
    await testsets.create_test_set(store, "bulk")
    await testsets.add_case(store, "bulk", {"id": "already", "question": "q0"})
    items = [
        traces.BulkItem(trace_id=f"{1:032x}", expected_answer="It is green."),
        traces.BulkItem(trace_id="no-such-trace"),
        traces.BulkItem(trace_id=f"{2:032x}"),
        traces.BulkItem(trace_id=f"{3:032x}"),
    ]
    got = await traces.copy_traces_to_test_set(store, "bulk", items, max_cases=3)
    assert got.created == [f"trace-{1:032x}", f"trace-{2:032x}"]
    assert [(r.trace_id, r.code) for r in got.rejected] == [
        ("no-such-trace", None),
        (f"{3:032x}", "too_many_cases"),
    ]
    assert "not found" in got.rejected[0].reason
    first = await testsets.get_case(store, "bulk", f"trace-{1:032x}")
    assert first["expected_answer"] == "It is green."
    assert first["answer"] == "Answer 1. It is green."
    assert first["source_trace_id"] == f"{1:032x}"
    second = await testsets.get_case(store, "bulk", f"trace-{2:032x}")
    assert "expected_answer" not in second  # the trace had none and none was typed
    with pytest.raises(BadRequest, match="listed twice"):
        await traces.copy_traces_to_test_set(store, "bulk", [items[0], items[0]])
    with pytest.raises(NotFoundError):
        await traces.copy_traces_to_test_set(store, "no-set", items[:1])
