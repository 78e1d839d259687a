"""Runs through the API against a started serve with a 300 ms scripted judge: queued → running with progress
0 < done < total → completed, read back with the CLI (`runs show --json`, `replay --test-set`); cancel stops the
judge calls; history filters, comparisons and the error cases."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from portal_testutil import Portal, base_env, cli, problem_detail, started_portal
from ragpulse.testing.openai_server import Phase, ScriptedOpenAIServer, judge_responder
from testsupport import private_db, scripted_judge_env

pytestmark = pytest.mark.integration

CASES = 20


@pytest.fixture(scope="module")
def judge() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(judge_responder) as server:
        server.set_schedule(Phase(latency_s=0.3))
        yield server


@pytest.fixture(scope="module")
def runs_portal(judge: ScriptedOpenAIServer) -> Iterator[Portal]:
    env = scripted_judge_env(judge.base_url, RAGPULSE_JUDGE_ENABLED="relevancy", RAGPULSE_ENGINE_WORKERS="1")
    with started_portal(**env) as p:
        with p.client() as c:
            assert (
                c.post("/api/v1/test-sets", json={"name": "reg", "knowledge_base": "kb"}).status_code == 201
            )
            rows = "\n".join(
                json.dumps(
                    {"id": f"c{i:02d}", "question": f"What is item {i}?", "answer": f"Item {i} is a widget."}
                )
                for i in range(CASES)
            )
            r = c.post(
                "/api/v1/test-sets/reg/cases/import",
                content=rows,
                headers={"content-type": "application/x-ndjson"},
            )
            assert len(r.json()["created"]) == CASES
        yield p


def _wait(c: httpx.Client, run_id: str, statuses: set[str], timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run: dict[str, Any] = c.get(f"/api/v1/runs/{run_id}").json()
        if run["status"] in statuses:
            return run
        assert time.monotonic() < deadline, run["status"]
        time.sleep(0.05)


def test_run_progress_report_and_cli_read_back(runs_portal: Portal, judge: ScriptedOpenAIServer) -> None:
    with runs_portal.client() as c:
        r = c.post(
            "/api/v1/runs", json={"test_set": "reg", "run_id": "run-a", "fail_under": ["pass_rate=0.5"]}
        )
        assert r.status_code == 202, r.text
        assert r.json() == {"run_id": "run-a", "status": "queued", "status_url": "/api/v1/runs/run-a"}
        seen_partial = False
        deadline = time.monotonic() + 60
        while True:
            run = c.get("/api/v1/runs/run-a").json()
            done, total = run["progress"]["done"], run["progress"]["total"]
            assert total == CASES
            if 0 < done < total:
                seen_partial = True
                assert run["status"] == "running"
            if run["status"] not in ("queued", "running"):
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert seen_partial
        assert run["status"] == "completed"
        assert run["progress"] == {"done": CASES, "total": CASES}
        assert run["pass_rate"] == 1.0
        assert run["report"]["cases_total"] == CASES
        assert run["report"]["judges"]["relevancy"]
        assert run["fail_under"] == [{"metric": "pass_rate", "minimum": 0.5, "actual": 1.0, "met": True}]
        case = run["report"]["cases"][0]
        assert case["judgements"]["relevancy"]["status"] == "ok"
        history = c.get("/api/v1/runs", params={"test_set": "reg", "status": "completed"}).json()["items"]
        assert [h["run_id"] for h in history] == ["run-a"]
        problem_detail(c.post("/api/v1/runs", json={"test_set": "reg", "run_id": "run-a"}), 409)
        problem_detail(c.post("/api/v1/runs/run-a/cancel"), 409)
    shown = cli(runs_portal.db_url, "runs", "show", "run-a", "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["run_id"] == "run-a"
    assert report["cases_total"] == CASES
    listed = cli(runs_portal.db_url, "runs", "list")
    assert "run-a" in listed.stdout
    replayed = cli(runs_portal.db_url, "replay", "--test-set", "reg", "--json", "--run-id", "cli-replay")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["cases_total"] == CASES


def test_cancel_stops_judge_calls(runs_portal: Portal, judge: ScriptedOpenAIServer) -> None:
    with runs_portal.client() as c:
        before = len(judge.requests)
        assert c.post("/api/v1/runs", json={"test_set": "reg", "run_id": "run-cancel"}).status_code == 202
        judge.wait_for_requests(before + 3, timeout_s=60)
        r = c.post("/api/v1/runs/run-cancel/cancel")
        assert r.status_code == 200
        assert r.json()["status"] in ("running", "cancelled")
        run = _wait(c, "run-cancel", {"cancelled", "completed", "failed"})
        assert run["status"] == "cancelled"
        after = len(judge.requests)
        assert after - before < CASES
        with pytest.raises(TimeoutError):  # no judge call for the run after it was cancelled
            judge.wait_for_requests(after + 1, timeout_s=1.5)
        problem_detail(c.post("/api/v1/runs/run-cancel/cancel"), 409)
        assert [
            h["run_id"] for h in c.get("/api/v1/runs", params={"status": "cancelled"}).json()["items"]
        ] == ["run-cancel"]


def test_queued_run_cancel_and_errors(runs_portal: Portal) -> None:
    with runs_portal.client() as c:
        problem_detail(c.post("/api/v1/runs", json={"test_set": "missing"}), 404)
        problem_detail(c.post("/api/v1/runs", json={"test_set": "reg", "judges": ["nope"]}), 422)
        problem_detail(c.post("/api/v1/runs", json={"test_set": "reg", "judge_model": "gpt-x"}), 422)
        problem_detail(c.post("/api/v1/runs", json={"test_set": "reg", "rag": {"endpoint": "prod"}}), 422)
        problem_detail(
            c.post("/api/v1/runs", json={"test_set": "reg", "rag": {"endpoint": "http://evil/"}}), 422
        )
        problem_detail(c.post("/api/v1/runs", json={"test_set": "reg", "thresholds": {"relevancy": 2}}), 422)
        problem_detail(c.post("/api/v1/runs", json={"test_set": "reg", "fail_under": ["bogus=0.5"]}), 422)
        problem_detail(c.post("/api/v1/runs", json={"test_set": "reg", "run_id": "bad id"}), 422)
        problem_detail(c.get("/api/v1/runs/nope"), 404)
        problem_detail(c.post("/api/v1/runs/nope/cancel"), 404)
        problem_detail(c.get("/api/v1/runs", params={"status": "bogus"}), 422)
        opts = c.get("/api/v1/run-options").json()
        # every judge `replay --judges` accepts, not only the enabled one (retrieval judges too)
        assert opts == {
            "judges": [
                "answer_correctness",
                "context_precision",
                "context_recall",
                "context_relevance",
                "faithfulness",
                "keyword",
                "relevancy",
            ],
            "judge_models": [],
            "rag_endpoints": [],
        }


def test_compare_two_runs(runs_portal: Portal) -> None:
    with runs_portal.client() as c:
        for rid in ("cmp-a", "cmp-b"):
            assert c.post("/api/v1/runs", json={"test_set": "reg", "run_id": rid}).status_code == 202
        for rid in ("cmp-a", "cmp-b"):
            assert _wait(c, rid, {"completed", "completed_with_errors", "failed"})["status"] == "completed"
        cmp = c.get("/api/v1/run-comparisons", params={"a": "cmp-a", "b": "cmp-b"}).json()
        assert cmp["run_a"] == "cmp-a"
        assert cmp["metrics"]["pass_rate"] == {"a": 1.0, "b": 1.0, "delta": 0.0}
        assert cmp["pass_to_fail"] == []
        problem_detail(c.get("/api/v1/run-comparisons", params={"a": "cmp-a", "b": "nope"}), 404)
        problem_detail(c.get("/api/v1/run-comparisons", params={"a": "cmp-a"}), 422)


def test_a_run_survives_a_killed_serve(judge: ScriptedOpenAIServer) -> None:
    """serve killed mid-run (SIGKILL): the restarted serve queues the run again and finishes it."""
    with private_db() as db:
        env = base_env(db)
        env.update(
            scripted_judge_env(
                judge.base_url, RAGPULSE_JUDGE_ENABLED="relevancy", RAGPULSE_ENGINE_WORKERS="1"
            )
        )
        first = Portal(db, env)
        first.start()
        try:
            with first.client() as c:
                c.post("/api/v1/test-sets", json={"name": "crash"})
                for i in range(CASES):
                    c.post(
                        "/api/v1/test-sets/crash/cases",
                        json={
                            "id": f"k{i}",
                            "question": f"What is part {i}?",
                            "answer": f"Part {i} is a gear.",
                        },
                    )
                before = len(judge.requests)
                assert (
                    c.post("/api/v1/runs", json={"test_set": "crash", "run_id": "crash-run"}).status_code
                    == 202
                )
                judge.wait_for_requests(before + 3, timeout_s=60)
        finally:
            assert first.proc is not None
            first.proc.kill()
            first.proc.wait(10)
        second = Portal(db, env)  # on a port of its own
        second.start()
        try:
            with second.client() as c:
                run = _wait(
                    c, "crash-run", {"completed", "completed_with_errors", "failed", "cancelled"}, timeout=90
                )
                assert run["status"] == "completed"
                assert run["report"]["cases_total"] == CASES
            assert any(e.get("event") == "runs_requeued" for e in second.logs)
        finally:
            second.stop()


def test_the_trace_api_returns_the_exact_prompt_the_judge_model_received(
    runs_portal: Portal, judge: ScriptedOpenAIServer
) -> None:
    """Issue 31: a trace judged by the real LLM judge through ``serve``; the stored judgement's prompt is the
    messages the (scripted) model received, ``[role]`` headed, and its raw reply is the model's reply."""
    question = "Which colour is the unique widget 31?"
    with runs_portal.client() as c:
        r = c.post(
            "/api/v1/evaluate",
            json={"question": question, "answer": "Widget 31 is green.", "contexts": ["Widget 31 is green."]},
        )
        assert r.status_code == 200, r.text
        detail = c.get(f"/api/v1/traces/{r.json()['trace_id']}").json()
    (j,) = detail["judgements"]
    (sent,) = [q for q in judge.requests if question in q.prompt_text]
    assert j["prompt"] == "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in sent.messages)
    assert j["raw_output"]
    assert question in j["prompt"]
