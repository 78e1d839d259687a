"""End to end through the CLI: replay the example and RGB test sets with the reference judges and checklists
into a private PostgreSQL database, then gate the run (JUnit read back with junitparser)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from junitparser import Failure, JUnitXml, Skipped
from typer.testing import CliRunner

from judges.checklist.test_checklist import EXPECTED_OFFLINE
from kestrel import CHECKLISTS, KESTREL
from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.model import Judgement
from ragpulse.store import open_store
from shared_data import rgb_path, rgb_rows
from testsupport import serve_http

CONFIG = f"""
judge:
  checklists:
    reimbursement_answer: {CHECKLISTS / "reimbursement_answer.yaml"}
    order_delay_answer: {CHECKLISTS / "order_delay_answer.yaml"}
  options:
    context_recall: {{k: 1}}
"""
JUDGES = "context_precision,context_recall,answer_correctness,reimbursement_answer,order_delay_answer"


async def _stored_judgement(url: str, run_id: str, case_id: str, judge: str) -> Judgement:
    async with open_store(Settings(store_database_url=url).store) as store:
        results = await store.get_run_results(run_id)
    r = next(r for r in results if r.trace.test_case_id == case_id)
    return next(j for j in r.judgements if j.judge == judge)


def _replay(runner: CliRunner, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    res = runner.invoke(app, ["replay", *args, "--json"], env=env)
    assert res.exit_code in (0, 1), res.output
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def test_kestrel_replay_checklists_context_metrics_and_gate(pg_url: str, tmp_path: Path) -> None:
    cfg = tmp_path / "ragpulse.yaml"
    cfg.write_text(CONFIG, encoding="utf-8")
    env = {"RAGPULSE_STORE_DATABASE_URL": pg_url, "RAGPULSE_CONFIG": str(cfg), "RAGPULSE_JUDGE_MODEL": ""}
    runner = CliRunner()
    report = _replay(runner, [str(KESTREL), "--judges", JUDGES, "--run-id", "kestrel-1"], env)
    rows = {c["case_id"]: c["judgements"] for c in report["cases"]}
    assert len(rows) == 17
    # the two example checklists: same verdicts as judged directly (tests/judges/checklist/test_checklist.py)
    for case_id, (score, passed) in EXPECTED_OFFLINE.items():
        name = "reimbursement_answer" if case_id.startswith("reimb") else "order_delay_answer"
        j = rows[case_id][name]
        assert (j["status"], j["passed"]) == ("ok", passed), case_id
        assert j["score"] == pytest.approx(score, abs=1e-6), case_id
    assert rows["reimb-zh-03"]["reimbursement_answer"]["status"] == "skipped"
    assert rows["leave-en-01"]["reimbursement_answer"]["reason"].startswith("not_applicable")
    # context metrics from the case labels: reimb-zh-03 labels [0] → 0.0; delay-zh-01 [1, 1, 0] → 1.0
    assert rows["reimb-zh-03"]["context_precision"]["score"] == 0.0
    assert rows["delay-zh-01"]["context_precision"]["score"] == 1.0
    # k=1 recall: delay-zh-01 has 2 relevant, 1 in the top 1 → 0.5
    assert rows["delay-zh-01"]["context_recall"]["score"] == pytest.approx(0.5)
    ck = report["judges"]["order_delay_answer"]
    assert (ck["scored"], ck["pass"], ck["fail"]) == (6, 2, 4)
    assert ck["mean"] == pytest.approx((1 + 0.4 + 0 + 1 + 0.4 + 0) / 6, abs=1e-6)

    # stored with the declared version beside the computed one, and the per-item results
    stored = asyncio.run(_stored_judgement(pg_url, "kestrel-1", "delay-en-02", "order_delay_answer"))
    assert stored.declared_version == "2026.11-1"
    assert stored.version
    assert stored.score == pytest.approx(0.4)
    items = {i["id"]: i["passed"] for i in (stored.flags.model_extra or {})["items"]}
    assert items == {
        "reassurance": False,
        "current_status": False,
        "expected_time": True,
        "cause": False,
        "next_steps": True,
    }

    # diagnosis in the report: which side is weak
    diag = {d["case_id"]: d for d in report["diagnosis"]["cases"]}
    assert diag["reimb-en-03"]["weak_side"] == "generation"  # good retrieval, invented answer
    assert diag["reimb-zh-03"]["weak_side"] == "retrieval"  # the right chunk was not retrieved
    assert diag["delay-en-01"]["weak_side"] == "retrieval"  # recall@1 = 1/3
    assert diag["leave-en-01"]["weak_side"] == "none"
    assert report["diagnosis"]["overall"]["weak_side"] in ("retrieval", "generation", "both")
    shown = runner.invoke(app, ["runs", "show", "kestrel-1"], env=env)
    assert shown.exit_code == 0
    assert "diagnosis:" in shown.output

    xml_path = tmp_path / "junit.xml"
    gate = runner.invoke(
        app,
        [
            "gate",
            "kestrel-1",
            "--min",
            "order_delay_answer.pass_rate=0.5",
            "--min",
            "context_precision=0.5",
            "--junit",
            str(xml_path),
        ],
        env=env,
    )
    assert gate.exit_code == 1, gate.output
    xml = JUnitXml.fromfile(str(xml_path))
    suites = {s.name: s for s in xml}
    failed_thresholds = {
        c.name for c in suites["ragpulse.thresholds"] if c.result and isinstance(c.result[0], Failure)
    }
    assert failed_thresholds == {"order_delay_answer.pass_rate>=0.5"}  # 2/6 passed
    assert len(list(suites["ragpulse.kestrel_kb"])) == 17
    kcases = {c.name: c for c in suites["ragpulse.kestrel_kb"]}
    passing = {n for n, c in kcases.items() if not c.result}
    assert passing == {"delay-zh-01", "leave-en-01", "leave-zh-01"}
    # the abstained case (its answer declined; out of the pass rate) is skipped, never a failure
    not_failures = {n for n in set(kcases) - passing if not isinstance(kcases[n].result[0], Failure)}
    assert not_failures == {"reimb-zh-03"}
    assert isinstance(kcases["reimb-zh-03"].result[0], Skipped)
    assert kcases["reimb-zh-03"].result[0].message.startswith("answer_correctness: abstained; ")
    # delay-en-01 passes its checklist and precision but recall@1 is 1/3 (k: 1 in the config)
    msg = kcases["delay-en-01"].result[0].message
    assert "context_recall" in msg
    assert "order_delay_answer" not in msg


# -- RGB: answers come from a RAG endpoint on loopback that returns the case's passages in reverse order -----


class _RgbRag(BaseHTTPRequestHandler):
    by_question: ClassVar[dict[str, dict[str, Any]]] = {}

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        row = self.by_question[body["question"]]
        out = json.dumps(
            {"answer": row["reference_answer"], "contexts": list(reversed(row["contexts"]))},
            ensure_ascii=False,
        ).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def rgb_rag() -> Iterator[str]:
    _RgbRag.by_question = {r["question"]: r for r in rgb_rows()}
    with serve_http(_RgbRag) as base:
        yield f"{base}/ask"


def _ap(flags: list[int]) -> float:
    hits, total = 0, 0.0
    for k, f in enumerate(flags, start=1):
        if f:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def test_rgb_replay_reports_context_precision_recall_from_labels(pg_url: str, rgb_rag: str) -> None:
    env = {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_RAG_ENDPOINT_URL": rgb_rag,
        "RAGPULSE_CONFIG": "",
        "RAGPULSE_JUDGE_MODEL": "",
        "RAGPULSE_JUDGE_OPTIONS": '{"context_recall": {"k": 3}}',
    }
    report = _replay(
        CliRunner(),
        [str(rgb_path()), "--judges", "context_precision,context_recall", "--run-id", "rgb-1"],
        env,
    )
    rows = {c["case_id"]: c["judgements"] for c in report["cases"]}
    assert len(rows) == 300
    # hand-checked subset: the endpoint reverses the passages, labels follow them by text
    hand = {
        "rgb_zh_000": ([0, 0, 1, 1, 1], (1 / 3 + 2 / 4 + 3 / 5) / 3, 1 / 3),
        "rgb_zh_001": ([1, 1, 0, 0, 1], (1 + 1 + 3 / 5) / 3, 2 / 3),
        "rgb_zh_004": ([1, 1, 1, 0, 0], 1.0, 1.0),
        "rgb_zh_005": ([0, 1, 0, 1, 1], (1 / 2 + 2 / 4 + 3 / 5) / 3, 1 / 3),
    }
    for case_id, (reversed_labels, precision, recall_at_3) in hand.items():
        assert rows[case_id]["context_precision"]["score"] == pytest.approx(precision, abs=1e-6), case_id
        assert rows[case_id]["context_recall"]["score"] == pytest.approx(recall_at_3, abs=1e-6), case_id
        assert _ap(reversed_labels) == pytest.approx(precision)
    expected_mean = sum(_ap(list(reversed(r["context_labels"]))) for r in rgb_rows()) / 300
    assert report["averages"]["context_precision"] == pytest.approx(expected_mean, abs=1e-6)
    assert report["coverage"] == 1.0
