"""``ragpulse trace ID``: the answer with unsupported parts highlighted and each claim's verdict and evidence,
from the per-claim details the offline faithfulness judge stores (English and Chinese)."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli._render import highlighted_answer
from ragpulse.config import Settings
from ragpulse.judges.registry import build_judges
from ragpulse.model import Document, Source, Trace, TraceOutcome, TraceResult
from ragpulse.store.postgres import PostgresStore

CASES = {
    "e" * 32: (
        "The Eiffel Tower is in Paris. It was completed in 1889.",
        "The Eiffel Tower is in Paris. It was completed in 1925 by aliens.",
        "It was completed in 1925 by aliens.",
    ),
    "f" * 32: (
        "埃菲尔铁塔位于巴黎，建成于1889年。",
        "埃菲尔铁塔位于巴黎。它建成于1925年，由外星人建造。",
        "它建成于1925年，由外星人建造。",
    ),
}


async def _store_judged(url: str) -> None:
    judge = build_judges(Settings(), ["faithfulness"])["faithfulness"]
    store = await PostgresStore.connect(url)
    try:
        results = []
        for trace_id, (context, answer, _) in CASES.items():
            trace = Trace(
                trace_id=trace_id,
                question="Where is it?",
                documents=[Document(id="d1", content=context, rank=0, score=0.9)],
                answer=answer,
                source=Source.KAFKA,
            )
            results.append(
                TraceResult(
                    trace=trace, outcome=TraceOutcome.EVALUATED, judgements=[await judge.judge(trace)]
                )
            )
        await store.write_results(results)
    finally:
        await store.close()


@pytest.mark.parametrize("trace_id", list(CASES))
def test_trace_shows_claims_and_highlights_the_unsupported_sentence(
    trace_id: str, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    asyncio.run(_store_judged(pg_url))
    _, answer, unsupported = CASES[trace_id]

    res = CliRunner().invoke(app, ["trace", trace_id, "--json"])
    assert res.exit_code == 0, res.output
    (judgement,) = json.loads(res.stdout)["judgements"]
    claims = judgement["flags"]["claims"]
    assert [c["verdict"] for c in claims] == ["supported", "unsupported"]
    bad = claims[1]
    assert answer[bad["start"] : bad["end"]] == unsupported
    assert claims[0]["evidence"] == {"doc_id": "d1", "rank": 0}
    assert bad["evidence"] is None

    res = CliRunner().invoke(app, ["trace", trace_id])
    assert res.exit_code == 0, res.output
    assert "claims" in res.stdout
    assert f"{bad['start']}–{bad['end']}" in res.stdout
    assert "d1 (rank 1)" in res.stdout  # stored 0-based, shown from 1 like the portal
    assert "d1 (rank 0)" not in res.stdout

    text = highlighted_answer(answer, claims)
    marked = [(s.start, s.end, str(s.style)) for s in text.spans]
    assert marked == [(bad["start"], bad["end"], "bold red underline")]


def test_trace_shows_the_cause_of_each_unsupported_claim(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing judgement of a trace with reference contexts: ``--json`` carries each claim's cause and the
    judgement's counts; the text output has a cause column and a causes line."""
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    trace_id = "a" * 32
    trace = Trace(
        trace_id=trace_id,
        question="How do refunds and shipping work?",
        documents=[Document(id="refunds", content="Refunds are paid within 30 days of purchase.", rank=0)],
        answer="Refunds are paid within 30 days. Orders ship from Rotterdam in two days. The shop opened in 1990.",
        reference_contexts=(
            "Refunds are paid within 30 days of purchase.",
            "Orders ship from Rotterdam in two days.",
        ),
        source=Source.REPLAY,
    )

    async def store_judged() -> None:
        judge = build_judges(Settings(), ["faithfulness"])["faithfulness"]
        store = await PostgresStore.connect(pg_url)
        try:
            j = await judge.judge(trace)
            await store.write_results(
                [TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED, judgements=[j])]
            )
        finally:
            await store.close()

    asyncio.run(store_judged())
    res = CliRunner().invoke(app, ["trace", trace_id, "--json"])
    assert res.exit_code == 0, res.output
    (judgement,) = json.loads(res.stdout)["judgements"]
    flags = judgement["flags"]
    assert [c.get("cause") for c in flags["claims"]] == [None, "retrieval_miss", "generation_error"]
    assert flags["claims"][1]["reference"] == {"source": "reference_contexts", "index": 1, "doc_id": None}
    assert flags["attribution"] == {
        "retrieval_misses": 1,
        "generation_errors": 1,
        "undecided": 0,
        "reason": None,
    }

    res = CliRunner().invoke(app, ["trace", trace_id], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "retrieval_miss (reference_contexts #2)" in res.stdout  # stored index 1, shown from 1
    assert "generation_error" in res.stdout
    assert "causes faithfulness: 1 retrieval miss(es), 1 generation error(s), 0 undecided" in res.stdout


def test_trace_lists_the_claims_of_the_newest_version_once(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a re-judge with another version both judgements are stored; the claims table shows the newest
    one's claims once, with its version, says how many older versions are stored, and ``--all-versions``
    lists them all."""
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    trace_id = "e" * 32
    context, answer, unsupported = CASES[trace_id]
    trace = Trace(
        trace_id=trace_id,
        question="Where is it?",
        documents=[Document(id="d1", content=context, rank=0, score=0.9)],
        answer=answer,
        source=Source.KAFKA,
    )

    async def store_twice() -> None:
        judge = build_judges(Settings(), ["faithfulness"])["faithfulness"]
        j = await judge.judge(trace)
        store = await PostgresStore.connect(pg_url)
        try:  # the older version sorts after the newer one by name: the order must be by time
            for version in ("zz-old", "aa-new"):
                one = j.model_copy(update={"version": version})
                await store.write_results(
                    [TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED, judgements=[one])]
                )
        finally:
            await store.close()

    asyncio.run(store_twice())
    res = CliRunner().invoke(app, ["trace", trace_id], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    claims_table = res.stdout[res.stdout.index("claims") :]
    assert claims_table.count(unsupported) == 1
    assert "aa-new" in claims_table
    assert "zz-old" not in claims_table.split("older version")[0]
    assert "faithfulness: claims of the newest version shown; 1 older version(s) stored" in res.stdout
    res = CliRunner().invoke(app, ["trace", trace_id, "--all-versions"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    claims_table = res.stdout[res.stdout.index("claims") :]
    assert claims_table.count(unsupported) == 2
    assert "older version(s) stored" not in res.stdout


def test_a_long_answer_is_cut_unless_full() -> None:
    """``ragpulse trace`` prints the first 2,000 characters of a 300,000-character answer with a note of the rest
    (styles of the highlighted part kept); ``--full`` prints all of it."""
    from io import StringIO

    from rich.console import Console

    from ragpulse.cli._render import TRACE_TEXT_CHARS, print_trace

    answer = "x" * 300_000
    result = TraceResult(
        trace=Trace(trace_id="long", question="Q?", answer=answer, source=Source.KAFKA),
        outcome=TraceOutcome.EVALUATED,
        judgements=[],
    )
    for full, want_x, note in ((False, TRACE_TEXT_CHARS, True), (True, 300_000, False)):
        out = StringIO()
        print_trace(result, Console(file=out, width=100_000, color_system=None), full=full)
        text = out.getvalue()
        assert text.count("x") == want_x
        assert ("(298,000 more characters; --full prints all)" in text) is note
