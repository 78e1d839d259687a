"""Case outcomes of a run (issue 30 item 2), replayed with the offline judges against real PostgreSQL.

An abstaining answer ("I don't know") is its own outcome, ``abstained``: counted on its own and left out of the
pass rate (passed / (cases − abstained)). A case with no answer (no RAG endpoint to ask) is never a pass, even
when the retrieval judges pass its contexts.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.portal.app import build_app
from ragpulse.portal.context import ApiOptions, PortalContext
from ragpulse.store import PostgresStore

_Q = "How do I reset my password?"
_CTX = ["To reset your password, open Settings, choose Security and click Reset password."]
_GOOD = "To reset your password, open Settings and choose Reset password."
_CASES: list[dict[str, Any]] = [
    {"id": "good", "question": _Q, "answer": _GOOD, "contexts": _CTX},
    {"id": "off", "question": _Q, "answer": "Our office is open Monday to Friday.", "contexts": _CTX},
    {"id": "idk", "question": _Q, "answer": "I don't know.", "contexts": _CTX},
    {"id": "idk-zh", "question": _Q, "answer": "抱歉，根据现有资料无法回答。", "contexts": _CTX},
    {"id": "silent", "question": _Q, "contexts": _CTX},
    {"id": "good2", "question": _Q, "answer": _GOOD, "contexts": _CTX},
]


def _cli(args: list[str], code: int = 0) -> Any:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == code, res.output
    return res.stdout


def test_abstained_and_answerless_cases(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    monkeypatch.delenv("RAGPULSE_JUDGE_MODEL", raising=False)
    monkeypatch.delenv("RAGPULSE_RAG_ENDPOINT_URL", raising=False)
    f = tmp_path / "outcomes.jsonl"
    f.write_text("".join(json.dumps(c) + "\n" for c in _CASES), encoding="utf-8")
    _cli(["replay", str(f), "--judges", "relevancy,context_relevance", "--run-id", "o1"])

    report = json.loads(_cli(["runs", "show", "o1", "--json"]))
    rows = {c["case_id"]: c for c in report["cases"]}
    # the retrieval judge passes every case's context; the answer decides
    assert {k: r["judgements"]["context_relevance"]["passed"] for k, r in rows.items()} == dict.fromkeys(
        rows, True
    )
    assert {k: (r["passed"], r.get("abstained", False)) for k, r in rows.items()} == {
        "good": (True, False),
        "off": (False, False),
        "idk": (False, True),
        "idk-zh": (False, True),
        "silent": (False, False),  # no answer: never a pass on the retrieval judge alone
        "good2": (True, False),
    }
    assert rows["idk"]["judgements"]["relevancy"] == {
        "score": None,
        "passed": None,
        "status": "skipped",
        "reason": "abstained",
    }
    assert rows["silent"]["judgements"]["relevancy"]["reason"] == "no_answer"
    assert "relevancy: no_answer" in rows["silent"]["reason"]
    # 2 passed of 6 − 2 abstained
    assert (report["cases_total"], report["cases_passed"], report["cases_abstained"]) == (6, 2, 2)
    assert report["pass_rate"] == 0.5
    assert report["coverage"] == 1.0
    assert report["counts"] == {"pass": 8, "fail": 1, "error": 0, "abstained": 2, "skipped": 1}
    relevancy = report["judges"]["relevancy"]
    assert (relevancy["pass"], relevancy["fail"], relevancy["abstained"], relevancy["skipped"]) == (
        2,
        1,
        2,
        1,
    )

    # the failing page (SQL in the store) agrees with the rows
    failing = json.loads(_cli(["runs", "show", "o1", "--failing", "--json"]))
    assert [c["case_id"] for c in failing["cases"] if not c["passed"]] == ["off", "idk", "idk-zh", "silent"]
    assert {c["case_id"]: c["verdict"] for c in failing["cases"] if not c["passed"]} == {
        "off": "fail",
        "idk": "not_judged",
        "idk-zh": "not_judged",
        "silent": "not_judged",
    }
    assert failing["cases_not_judged"] == 3
    text = _cli(["runs", "show", "o1", "--failing"])
    # abstained and answerless cases are not failures: listed apart, with why (the abstention first)
    failing_part, unjudged_part = text.split("not judged (3 of 6; not failures)")
    assert "failing cases (1 of 6)" in failing_part
    assert "│ off " in failing_part
    assert "idk" not in failing_part
    assert "silent" not in failing_part
    assert "│ idk    │ evaluated │ relevancy: abstained" in unjudged_part
    assert "│ silent │ evaluated │ relevancy: no_answer" in unjudged_part
    assert "abstained cases: 2 (the answer declined to answer; not in the pass rate)" in text
    assert "judgements: pass 8  fail 1  error 0  abstained 2  skipped 1" in text

    # the gate reads the same pass rate
    _cli(["gate", "o1", "--min", "pass_rate=0.5", "--min", "coverage=1"])
    _cli(["gate", "o1", "--min", "pass_rate=0.51"], 1)

    # the run page and the API's run (counts, abstained cases)
    run_page, api_run = asyncio.run(_portal_get(pg_url, ["/runs/o1?lang=zh", "/api/v1/runs/o1"]))
    assert (
        '<span class="muted">拒答用例（不计入通过率）</span><span id="abstained-cases">2</span>' in run_page
    )
    assert '<span id="pass-rate">50.0 %</span>' in run_page
    assert [c["case_id"] for c in api_run["failing_cases"]] == ["off"]
    assert [c["case_id"] for c in api_run["not_judged_cases"]] == ["idk", "idk-zh", "silent"]
    failing_html, unjudged_html = run_page.split('id="not-judged"')
    assert ">off</a>" in failing_html.split('id="failing"')[1]
    assert ">idk</a>" not in failing_html
    assert [c in unjudged_html for c in (">idk</a>", ">idk-zh</a>", ">silent</a>", ">off</a>")] == [
        True,
        True,
        True,
        False,
    ]
    assert "未评判的用例" in run_page
    report_api = api_run["report"]
    assert (report_api["cases_abstained"], report_api["counts"]["abstained"], report_api["pass_rate"]) == (
        2,
        2,
        0.5,
    )


async def _portal_get(url: str, paths: list[str]) -> list[Any]:
    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        ctx = PortalContext(store=store, settings=Settings(store_database_url=url), options=ApiOptions())
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=build_app(ctx)), base_url="http://127.0.0.1"
        ) as c:
            out: list[Any] = []
            for p in paths:
                r = await c.get(p)
                assert r.status_code == 200, r.text
                out.append(r.json() if p.startswith("/api/") else r.text)
            return out
    finally:
        await store.close()
