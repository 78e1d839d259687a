"""Replay runs through the real engine with in-memory fakes (store, judges)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.model import RunStatus, TestCase, TestSet, Trace
from ragpulse.runs import case_trace_id
from ragpulse.runs.rag_client import RagClient
from ragpulse.runs.replay import run_replay
from ragpulse.testing.fakes import MemoryStore, ScriptedJudge
from testsupport import report_json, serve_http


async def _replay(ts: TestSet, **kw: Any) -> dict[str, Any]:
    """Replay and return the report's JSON form as ``--json`` writes it (case rows read from the store)."""
    return await report_json(kw["store"], await run_replay(ts, **kw))


def _aggregates(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in ("cases", "case_source", "diagnosis")}


def _ts() -> TestSet:
    return TestSet(
        name="mini",
        cases=(
            TestCase(id="c1", question="q1", answer="a1", keywords=("k",), metadata={"app": "hr"}),
            TestCase(id="c2", question="q2", answer="a2", context_labels=(1, 0), contexts=("x", "y")),
            TestCase(id="c3", question="q3"),  # no answer, no endpoint
        ),
    )


def _judges(**kw: Any) -> dict[str, ScriptedJudge]:
    return {
        "relevancy": ScriptedJudge("relevancy", lambda t: 0.9 if t.question == "q1" else 0.3, **kw),
        "keyword": ScriptedJudge("keyword", 1.0),
    }


async def test_replay_report_status_and_idempotent_trace_ids() -> None:
    store = MemoryStore()
    seen: list[tuple[int, int]] = []
    report = await _replay(
        _ts(),
        judges=_judges(),
        store=store,
        settings=Settings(),
        run_id="r1",
        progress=lambda d, t: seen.append((d, t)),
    )
    assert report["cases_total"] == 3
    assert report["pass_rate"] == pytest.approx(1 / 3)  # c1 passes; c2 fails relevancy; c3 not evaluable
    assert report["coverage"] == pytest.approx(2 / 3)
    assert report["averages"] == {"relevancy": pytest.approx(0.6), "keyword": pytest.approx(1.0)}
    assert report["counts"] == {"pass": 3, "fail": 1, "error": 0, "abstained": 0, "skipped": 2}
    assert report["status"] == "completed"
    assert seen[-1] == (3, 3)
    assert len(seen) == 3
    run = store.runs["r1"]
    assert run.status is RunStatus.COMPLETED
    assert run.report is not None
    # the stored report has no per-case rows: they are in the store
    assert run.report["case_source"] == "store"
    assert run.report["cases"] == []
    assert _aggregates(run.report) == _aggregates(report)
    assert run.judges == {
        "relevancy": _judges()["relevancy"].version,
        "keyword": _judges()["keyword"].version,
    }
    assert "mini" in store.test_sets
    t1 = store.traces[case_trace_id("r1", "c1")].trace
    assert (t1.app, t1.run_id, t1.test_case_id, t1.keywords) == ("hr", "r1", "c1", ("k",))
    assert store.traces[case_trace_id("r1", "c2")].trace.context_labels == (True, False)
    c3 = next(c for c in report["cases"] if c["case_id"] == "c3")
    assert c3["reason"] == "no_answer"
    n_judgements = len(store.judgements)
    again = await _replay(_ts(), judges=_judges(), store=store, settings=Settings(), run_id="r1")
    assert len(store.judgements) == n_judgements == 4
    assert again["pass_rate"] == report["pass_rate"]


async def test_judge_error_on_one_case_completes_with_errors() -> None:
    store = MemoryStore()
    judges = {"relevancy": ScriptedJudge("relevancy", 0.9, raises=["q2"]), "kw": ScriptedJudge("kw", 0.8)}
    report = await _replay(_ts(), judges=judges, store=store, settings=Settings(), run_id="r2")
    assert report["status"] == "completed_with_errors"
    assert store.runs["r2"].status is RunStatus.COMPLETED_WITH_ERRORS
    rows = {c["case_id"]: c for c in report["cases"]}
    assert rows["c1"]["passed"] is True
    assert rows["c2"]["judgements"]["relevancy"]["status"] == "error"
    assert rows["c2"]["judgements"]["kw"]["status"] == "ok"
    assert report["counts"]["error"] == 1


async def test_store_failure_for_good_shows_in_every_case() -> None:
    store = MemoryStore()
    store.fail_next(100, retriable=False)
    settings = Settings(engine_store_retries=1)
    report = await _replay(_ts(), judges=_judges(), store=store, settings=settings, run_id="r3")
    # every write failed for good: acked not ok, the run completes with errors and says why per case
    assert report["status"] == "completed_with_errors"
    assert all(c["reason"].startswith("store_failed") for c in report["cases"])


class _Rag(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        q = body["query"]
        if q == "boom":
            self.send_response(500)
            self.end_headers()
            return
        out = json.dumps({"data": {"text": f"answer to {q}", "chunks": [{"content": "c", "id": "d1"}]}})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(out.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def rag_url() -> Iterator[str]:
    with serve_http(_Rag) as base:
        yield f"{base}/ask"


async def test_cases_without_answer_ask_the_rag_endpoint(rag_url: str) -> None:
    s = Settings(
        rag_endpoint_url=rag_url,
        rag_request_question_field="query",
        rag_response_answer_field="data.text",
        rag_response_contexts_field="data.chunks",
    )
    ts = TestSet(name="e", cases=(TestCase(id="a", question="hello"), TestCase(id="b", question="boom")))
    store = MemoryStore()
    async with RagClient(s) as rag:
        report = await _replay(ts, judges=_judges(), store=store, settings=s, run_id="r4", rag_client=rag)
    ta: Trace = store.traces[case_trace_id("r4", "a")].trace
    assert ta.answer == "answer to hello"
    assert ta.contexts == ["c"]
    assert ta.doc_ids == ["d1"]
    assert ta.latency_s is not None
    assert ta.latency_s > 0
    rows = {c["case_id"]: c for c in report["cases"]}
    # the row is read back from the store: the trace's not-evaluable reason
    assert rows["b"]["reason"] == "rag_endpoint_failed: rag_endpoint_error: HTTP 500"
    assert report["status"] == "completed_with_errors"


def test_three_replays_in_one_process() -> None:
    store = MemoryStore()
    reports = [
        asyncio.run(_replay(_ts(), judges=_judges(), store=store, settings=Settings(), run_id=f"p{i}"))
        for i in range(3)
    ]
    assert [r["pass_rate"] for r in reports] == [pytest.approx(1 / 3)] * 3


async def test_endpoint_failure_is_not_evaluable_even_for_retrieval_judges(rag_url: str) -> None:
    # Case "b" has recorded contexts and labels, but its endpoint call fails: no judge may score the recorded
    # contexts in place of the endpoint's reply.
    s = Settings(
        rag_endpoint_url=rag_url,
        rag_request_question_field="query",
        rag_response_answer_field="data.text",
        rag_response_contexts_field="data.chunks",
    )
    retrieval = ScriptedJudge("context_precision", 1.0)
    retrieval.needs_answer = False  # type: ignore[attr-defined]
    ts = TestSet(
        name="e",
        cases=(
            TestCase(id="b", question="boom", contexts=("x", "y"), context_labels=(1, 0)),
            TestCase(id="c", question="fine", contexts=("x",), context_labels=(1,)),
        ),
    )
    store = MemoryStore()
    async with RagClient(s) as rag:
        report = await _replay(
            ts, judges={"context_precision": retrieval}, store=store, settings=s, run_id="r5", rag_client=rag
        )
    b = store.traces[case_trace_id("r5", "b")]
    assert b.outcome.value == "not_evaluable"
    assert b.judgements == ()
    assert b.outcome_reason == "rag_endpoint_failed: rag_endpoint_error: HTTP 500"
    c = store.traces[case_trace_id("r5", "c")]
    assert [j.judge for j in c.judgements] == ["context_precision"]
    assert report["coverage"] == 0.5
    assert report["status"] == "completed_with_errors"


class _Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that accepts every request and judges nothing (no serve behind it)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_replay_via_reports_cases_not_stored_in_time() -> None:
    """``--via``: the store is polled by count; cases whose traces never arrive are reported ``timeout``
    (not stored), the ones that did are folded from the store."""
    from ragpulse.model import TraceOutcome, TraceResult
    from ragpulse.runs.replay import Via, run_replay_via

    store = MemoryStore()
    judged = ScriptedJudge("keyword", 1.0)
    arrived = TraceResult(
        trace=Trace(trace_id=case_trace_id("v1", "c1"), run_id="v1", test_case_id="c1"),
        outcome=TraceOutcome.EVALUATED,
        judgements=(await judged.judge(Trace(trace_id="x", question="q", answer="a")),),
    )
    await store.write_results([arrived])  # as if serve had judged c1 already
    with serve_http(_Sink) as url:
        report = await run_replay_via(
            _ts(),
            Via.OTLP,
            judges={"keyword": judged},
            store=store,
            settings=Settings(),
            run_id="v1",
            wait_s=0.2,  # c1 is stored already and the others never arrive: a short wait shows both
            endpoint=url,
        )
    doc = await report_json(store, report)
    rows = {c["case_id"]: c for c in doc["cases"]}
    assert doc["via"] == "otlp"
    assert doc["status"] == "completed_with_errors"
    assert (doc["cases_total"], doc["pass_rate"], doc["coverage"]) == (
        3,
        pytest.approx(1 / 3),
        pytest.approx(1 / 3),
    )
    assert rows["c1"]["passed"] is True
    assert rows["c2"]["reason"] == rows["c3"]["reason"] == "store_failed; timeout"
    assert [c["case_id"] for c in doc["cases"]] == ["c1", "c2", "c3"]
