"""``ragpulse replay`` of an answerless, labelled test set (RGB) with no RAG endpoint: the retrieval judges are
added by default and score context precision/recall from the chunk labels; numbers hand-computed here."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from testsupport import shared_dir

ROOT = Path(__file__).resolve().parents[2]
N = 20


def _rgb_head(dest: Path) -> tuple[Path, list[dict[str, Any]]]:
    src = shared_dir() / "datasets" / "rgb_zh" / "rgb_zh.sample.jsonl"
    lines = [ln for ln in src.read_text(encoding="utf-8").splitlines() if ln.strip()][:N]
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest, [json.loads(ln) for ln in lines]


def _average_precision(labels: list[int]) -> float:
    """Mean of precision@k over the ranks k that hold a relevant chunk."""
    hits, total = 0, 0.0
    for k, rel in enumerate(labels, start=1):
        if rel:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def _label_recall(labels: list[int], k: int | None = None) -> float:
    """Relevant chunks among the retrieved ones (top k) / all chunks labelled relevant."""
    top = labels if k is None else labels[:k]
    return sum(top) / sum(labels)


@pytest.fixture
def db(db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The CLI's database (tests/cli/conftest.py), with the three answer judges enabled."""
    monkeypatch.setenv("RAGPULSE_JUDGE_ENABLED", "relevancy,faithfulness,keyword")
    return db


def _report(args: list[str]) -> dict[str, Any]:
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


async def _rows(url: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql))
    finally:
        await conn.close()


def _check(report: dict[str, Any], rows: list[dict[str, Any]], recall_k: int | None) -> None:
    precision = {r["id"]: _average_precision(r["context_labels"]) for r in rows}
    recall = {r["id"]: _label_recall(r["context_labels"], recall_k) for r in rows}
    assert report["cases_total"] == N
    assert report["averages"]["context_precision"] == pytest.approx(sum(precision.values()) / N, abs=1e-6)
    assert report["averages"]["context_recall"] == pytest.approx(sum(recall.values()) / N, abs=1e-6)
    for answer_judge in ("relevancy", "faithfulness", "keyword"):
        d = report["judges"][answer_judge]
        assert (d["mean"], d["coverage"], d["scored"], d["skipped"]) == (None, 0.0, 0, N)
    # every case is scored by the retrieval judges, but a case without an answer is never a pass while answer
    # judges are in the run (issue 30 item 2): the retrieval judges alone decide with --judges (below)
    assert report["coverage"] == 1.0
    assert report["pass_rate"] == 0.0
    by_case = {c["case_id"]: c for c in report["cases"]}
    assert {cid for cid, c in by_case.items() if c["passed"]} == set()
    assert all("relevancy: no_answer" in (c["reason"] or "") for c in by_case.values())
    for cid, c in by_case.items():
        assert c["outcome"] == "evaluated"
        assert c["scored"] == 2
        js = c["judgements"]
        assert js["context_precision"]["score"] == pytest.approx(precision[cid], abs=1e-6)
        assert js["context_recall"]["score"] == pytest.approx(recall[cid], abs=1e-6)
        assert (js["relevancy"]["status"], js["relevancy"]["reason"]) == ("skipped", "no_answer")
    n_pass = sum(precision[c] >= 0.5 for c in precision) + sum(recall[c] >= 0.5 for c in recall)
    assert report["counts"] == {
        "pass": n_pass,
        "fail": 2 * N - n_pass,
        "error": 0,
        "abstained": 0,
        "skipped": 3 * N,
    }


def test_rgb_subset_without_answers_reports_precision_and_recall_from_labels(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, rows = _rgb_head(tmp_path / "rgb_head.jsonl")
    assert all("answer" not in r and r["context_labels"] for r in rows)
    report = _report(["replay", str(path), "--run-id", "rgb-head"])
    assert report["judges_added"] == ["context_precision", "context_recall"]
    assert list(report["judges"]) == [
        "relevancy",
        "faithfulness",
        "keyword",
        "context_precision",
        "context_recall",
    ]
    assert report["status"] == "completed"
    _check(report, rows, None)
    # spot values: rgb_zh_001 labels 1,0,0,1,1 → (1 + 2/4 + 3/5) / 3 = 0.7; all labelled chunks retrieved → 1.0
    assert report["cases"][1]["judgements"]["context_precision"]["score"] == pytest.approx(0.7)
    stored = asyncio.run(
        _rows(
            db,
            "SELECT t.outcome, j.judge, j.status, j.score FROM traces t JOIN judgements j USING (trace_id) "
            "WHERE t.run_id = 'rgb-head'",
        )
    )
    assert {r["outcome"] for r in stored} == {"evaluated"}
    skipped = [r for r in stored if r["status"] == "skipped"]
    assert len(stored) == 5 * N
    assert len(skipped) == 3 * N
    assert all(r["score"] is None for r in skipped)

    # recall@3 through the judge options: relevant chunks in the top 3 / chunks labelled relevant
    monkeypatch.setenv("RAGPULSE_JUDGE_OPTIONS", json.dumps({"context_recall": {"k": 3}}))
    report_k3 = _report(["replay", str(path), "--run-id", "rgb-head-k3"])
    _check(report_k3, rows, 3)
    assert report_k3["averages"]["context_recall"] < 1.0


def test_explicit_judges_win_and_answer_judges_alone_leave_cases_not_evaluable(
    db: str, tmp_path: Path
) -> None:
    path, _ = _rgb_head(tmp_path / "rgb_head.jsonl")
    report = _report(["replay", str(path), "--judges", "relevancy,keyword", "--run-id", "rgb-explicit"])
    assert report["judges_added"] == []
    assert list(report["judges"]) == ["relevancy", "keyword"]
    assert {c["outcome"] for c in report["cases"]} == {"not_evaluable"}
    assert {c["reason"] for c in report["cases"]} == {"no_answer"}
    assert (report["coverage"], report["pass_rate"]) == (0.0, 0.0)  # an unscored case is never a pass
    assert report["counts"] == {"pass": 0, "fail": 0, "error": 0, "abstained": 0, "skipped": 2 * N}
    text = CliRunner().invoke(
        app, ["replay", str(path), "--judges", "context_precision", "--run-id", "rgb-cp"]
    )
    assert text.exit_code == 0, text.output
    assert "judges: context_precision\n" in text.stdout
    assert "added for this test set" not in text.stdout


def test_retrieval_judges_alone_pass_answerless_cases(db: str, tmp_path: Path) -> None:
    """Without answer judges in the run, a case without an answer passes when the retrieval judges pass it:
    only an answer judge's ``no_answer`` keeps it from passing (issue 30 item 2)."""
    path, rows = _rgb_head(tmp_path / "rgb_head.jsonl")
    report = _report(
        ["replay", str(path), "--judges", "context_precision,context_recall", "--run-id", "rgb-ret"]
    )
    precision = {r["id"]: _average_precision(r["context_labels"]) for r in rows}
    recall = {r["id"]: _label_recall(r["context_labels"], None) for r in rows}
    passed = {cid for cid in precision if precision[cid] >= 0.5 and recall[cid] >= 0.5}
    assert 0 < len(passed) < N
    assert {c["case_id"] for c in report["cases"] if c["passed"]} == passed
    assert report["pass_rate"] == pytest.approx(len(passed) / N, abs=1e-6)
