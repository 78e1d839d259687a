"""A run's history never changes after ``rejudge`` (issue 30 item 10), against real PostgreSQL.

Two runs replay a test set with the offline (heuristic) relevancy judge; ``ragpulse rejudge`` then judges the same
traces with the LLM relevancy judge (another version) through the scripted OpenAI-compatible server, which passes
every case. ``runs show``, ``runs compare``, ``gate`` and the run page still say what the runs said: a run's case
rows are the judgements that run produced (``run_judgements``), not the newest judgement of its traces.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.portal.app import build_app
from ragpulse.portal.context import ApiOptions, PortalContext
from ragpulse.runs import case_trace_id
from ragpulse.store import PostgresStore
from ragpulse.testing.openai_server import ScriptedOpenAIServer
from testsupport import scripted_judge_env

#: Questions with an answer that addresses them (the offline relevancy judge passes it) or not.
_GOOD = ("How do I reset my password?", "To reset your password, open Settings and choose Reset password.")
_OFF = ("How do I reset my password?", "Our office is open Monday to Friday.")


def _write(path: Path, off: set[int]) -> Path:
    """Seven cases c0..c6; the cases in ``off`` answer off topic."""
    with path.open("w", encoding="utf-8") as f:
        for i in range(7):
            q, a = _OFF if i in off else _GOOD
            f.write(json.dumps({"id": f"c{i}", "question": q, "answer": a}) + "\n")
    return path


#: The per-page CSRF token (64 hex characters; trace ids have 32).
_CSRF = re.compile(r"[0-9a-f]{64}")


def _cli(args: list[str], code: int = 0) -> Any:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == code, res.output
    return res.stdout


async def _run_page(url: str, run_id: str) -> str:
    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        ctx = PortalContext(store=store, settings=Settings(store_database_url=url), options=ApiOptions())
        transport = httpx.ASGITransport(app=build_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            r = await c.get(f"/runs/{run_id}")
        assert r.status_code == 200, r.text
        return r.text
    finally:
        await store.close()


def _views(url: str) -> dict[str, Any]:
    """What a user sees of runs A and B: both reports, the comparison, the gate's output, both run pages
    (without the CSRF token, which differs per page)."""
    gate = CliRunner().invoke(app, ["gate", "B", "--min", "pass_rate=0.5"])
    return {
        "A": json.loads(_cli(["runs", "show", "A", "--json"])),
        "B": json.loads(_cli(["runs", "show", "B", "--json"])),
        "B text": _cli(["runs", "show", "B"]),
        "compare": json.loads(_cli(["runs", "compare", "A", "B", "--json"])),
        "compare text": _cli(["runs", "compare", "A", "B"]),
        "gate": (gate.exit_code, gate.stdout, gate.stderr),
        "page A": _CSRF.sub("", asyncio.run(_run_page(url, "A"))),
        "page B": _CSRF.sub("", asyncio.run(_run_page(url, "B"))),
    }


def test_rejudge_never_changes_a_finished_runs_views(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    ts = tmp_path / "history"
    ts.mkdir()
    judges = ["--judges", "relevancy"]
    _cli(["replay", str(_write(ts / "kb.jsonl", off={1, 2, 3, 4})), *judges, "--run-id", "A"])
    _cli(
        [
            "replay",
            str(_write(ts / "kb.jsonl", off={1, 2, 3, 4, 5})),
            *judges,
            "--run-id",
            "B",
            "--replace-test-set",
        ]
    )
    before = _views(pg_url)

    # what the runs said: A 3 of 7 pass, B 2 of 7; c5 flipped pass → fail
    assert before["A"]["pass_rate"] == pytest.approx(3 / 7)
    assert before["B"]["pass_rate"] == pytest.approx(2 / 7)
    heuristic = {c["case_id"]: c["passed"] for c in before["B"]["cases"]}
    assert heuristic == {f"c{i}": i in (0, 6) for i in range(7)}
    assert before["compare"]["metrics"]["pass_rate"]["delta"] == pytest.approx(-1 / 7)
    assert [f["case_id"] for f in before["compare"]["pass_to_fail"]] == ["c5"]
    assert before["compare"]["fail_to_pass"] == []
    assert before["gate"][0] == 1  # B's pass rate 0.286 < 0.5
    assert "0.286" in before["gate"][1] + before["gate"][2]

    with ScriptedOpenAIServer() as server:
        server.on("YES\nIt answers the question.")
        for k, v in scripted_judge_env(server.base_url).items():
            monkeypatch.setenv(k, v)
        done = json.loads(_cli(["rejudge", "--since", "1h", "--judges", "relevancy", "--json"]))
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL")
    assert done["counts"]["pass"] == 14  # every trace of both runs passed by the LLM judge
    llm_version = done["judges"]["relevancy"]

    # the traces' newest judgement is the LLM's now ...
    tid = case_trace_id("B", "c1")
    trace = json.loads(_cli(["trace", tid, "--json"]))
    assert [(j["version"] == llm_version, j["passed"]) for j in trace["judgements"]] == [
        (False, False),
        (True, True),
    ]

    # ... and every view of both runs says what it said before, word for word
    after = _views(pg_url)
    for key in before:
        assert after[key] == before[key], key
    assert {c["case_id"]: c["passed"] for c in after["B"]["cases"]} == heuristic
    assert llm_version not in after["page B"]
    assert all(
        c["judgements"]["relevancy"]["passed"] is (i in (0, 6)) for i, c in enumerate(after["B"]["cases"])
    )
