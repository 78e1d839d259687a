"""``ragpulse replay`` end to end: real judges, real PostgreSQL, the scripted judge model on loopback."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.runs.reports import REPORT_KEYS
from ragpulse.testing.openai_server import RecordedRequest, Reply, ScriptedOpenAIServer
from testsupport import pg_count, shared_dir

ROOT = Path(__file__).resolve().parents[2]
KESTREL = ROOT / "examples" / "kestrel_kb.jsonl"
HALUEVAL = ROOT / "examples" / "halueval_qa_sample.jsonl"


def _head(src: Path, n: int, dest: Path) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines()[:n]
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args)


def _report(args: list[str]) -> dict[str, Any]:
    res = _invoke([*args, "--json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


offline = pytest.mark.skipif(
    importlib.util.find_spec("ragpulse.judges.answer.faithfulness") is None
    or importlib.util.find_spec("ragpulse.judges.answer.keyword") is None,
    reason="offline judges not built yet",
)


@offline
def test_replay_example_offline_twice_same_run_id(db: str) -> None:
    import asyncio

    first = _report(["replay", str(KESTREL), "--run-id", "kb-1"])
    assert set(REPORT_KEYS) <= set(first)
    assert first["run_id"] == "kb-1"
    assert first["test_set"] == "kestrel_kb"
    assert first["cases_total"] == 17
    # the example carries chunk labels, so the retrieval judges are added to enabled_judges
    assert list(first["averages"]) == [
        "relevancy",
        "faithfulness",
        "keyword",
        "context_precision",
        "context_recall",
    ]
    assert first["judges_added"] == ["context_precision", "context_recall"]
    assert set(first["counts"]) == {"pass", "fail", "error", "abstained", "skipped"}
    assert sum(first["counts"].values()) == 17 * 5
    assert first["tokens"] == {"prompt": 0, "completion": 0}  # offline judges use no model
    passed = sum(1 for c in first["cases"] if c["passed"])
    abstained = sum(1 for c in first["cases"] if c.get("abstained"))
    assert first["cases_abstained"] == abstained
    assert first["pass_rate"] == pytest.approx(passed / (17 - abstained))
    n_judgements = asyncio.run(pg_count(db, "SELECT count(*) FROM judgements"))
    assert n_judgements == sum(first["counts"][k] for k in ("pass", "fail", "error", "abstained", "skipped"))
    second = _report(["replay", str(KESTREL), "--run-id", "kb-1"])
    assert asyncio.run(pg_count(db, "SELECT count(*) FROM judgements")) == n_judgements
    assert asyncio.run(pg_count(db, "SELECT count(*) FROM traces")) == 17
    assert {k: second[k] for k in ("pass_rate", "coverage", "averages", "counts")} == {
        k: first[k] for k in ("pass_rate", "coverage", "averages", "counts")
    }


@offline
def test_replay_a_stored_test_set_by_name(db: str, tmp_path: Path) -> None:
    first = _report(["replay", str(_head(KESTREL, 3, tmp_path / "kb3.jsonl")), "--run-id", "file-run"])
    assert first["test_set"] == "kb3"
    # the file is gone: the stored set replays by name, same cases, same numbers, a new run
    (tmp_path / "kb3.jsonl").unlink()
    again = _report(["replay", "--test-set", "kb3", "--run-id", "name-run"])
    assert again["run_id"] == "name-run"
    assert again["test_set"] == "kb3"
    assert [c["case_id"] for c in again["cases"]] == [c["case_id"] for c in first["cases"]]
    assert {k: again[k] for k in ("pass_rate", "coverage", "averages", "counts")} == {
        k: first[k] for k in ("pass_rate", "coverage", "averages", "counts")
    }
    listed = _invoke(["runs", "list", "--json"])
    assert {r["run_id"] for r in json.loads(listed.stdout)} == {"file-run", "name-run"}
    # --test-set also takes a file; an unknown name is an input error naming it
    assert _report(["replay", "--test-set", str(KESTREL), "--run-id", "f2"])["test_set"] == "kestrel_kb"
    missing = _invoke(["replay", "--test-set", "nosuchset"])
    assert missing.exit_code == 2
    assert "no test set 'nosuchset'" in missing.stderr
    both = _invoke(["replay", str(KESTREL), "--test-set", "kb3"])
    assert both.exit_code == 2


@offline
def test_keyword_scores_hand_computed(db: str, tmp_path: Path) -> None:
    cases = [
        {
            "id": "all",
            "question": "How to claim?",
            "answer": "Use Ledgerly within 30 days.",
            "keywords": ["Ledgerly", "30 days"],
        },
        {
            "id": "half",
            "question": "Who approves?",
            "answer": "Your line manager.",
            "keywords": ["line manager", "receipt"],
        },
        {
            "id": "none",
            "question": "Leave?",
            "answer": "Ask HR.",
            "keywords": ["annual leave", "15 days", "calendar"],
        },
        {"id": "nokw", "question": "Orders?", "answer": "They ship late."},
    ]
    p = tmp_path / "kw.jsonl"
    p.write_text("\n".join(json.dumps(c) for c in cases), encoding="utf-8")
    r = _report(["replay", str(p), "--judges", "keyword", "--run-id", "kw"])
    rows = {c["case_id"]: c for c in r["cases"]}
    assert rows["all"]["judgements"]["keyword"]["score"] == pytest.approx(1.0)
    assert rows["half"]["judgements"]["keyword"]["score"] == pytest.approx(0.5)
    assert rows["none"]["judgements"]["keyword"]["score"] == pytest.approx(0.0)
    assert rows["nokw"]["judgements"]["keyword"]["status"] == "skipped"
    assert r["averages"]["keyword"] == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3 scored cases
    assert r["coverage"] == pytest.approx(3 / 4)
    # threshold 0.3: all and half pass, none fails; nokw unscored → never a pass
    assert r["pass_rate"] == pytest.approx(2 / 4)
    assert r["counts"] == {"pass": 2, "fail": 1, "error": 0, "abstained": 0, "skipped": 1}


@offline
def test_fail_under_exit_codes(db: str, tmp_path: Path) -> None:
    p = tmp_path / "one.jsonl"
    p.write_text(json.dumps({"question": "q", "answer": "has ledgerly", "keywords": ["ledgerly"]}) + "\n")
    ok = _invoke(["replay", str(p), "--judges", "keyword", "--fail-under", "pass_rate=1.0,keyword=1"])
    assert ok.exit_code == 0, ok.output
    p2 = tmp_path / "two.jsonl"
    p2.write_text(
        json.dumps({"question": "q", "answer": "has ledgerly", "keywords": ["ledgerly"]})
        + "\n"
        + json.dumps({"question": "q2", "answer": "nothing"})
        + "\n"
    )
    # pass rate 0.5 passes its threshold, but coverage 0.5 < default 0.95 fails the run
    low_cov = _invoke(["replay", str(p2), "--judges", "keyword", "--fail-under", "pass_rate=0.5"])
    assert low_cov.exit_code == 1
    assert "coverage 0.500 < 0.95" in low_cov.stderr
    bad = _invoke(["replay", str(p), "--fail-under", "pass_rate"])
    assert bad.exit_code == 2
    assert "expected METRIC=MIN" in bad.stderr
    unknown = _invoke(["replay", str(p), "--judges", "nosuchjudge"])
    assert unknown.exit_code == 2
    assert "nosuchjudge" in unknown.stderr
    missing = _invoke(["replay", str(tmp_path / "missing.jsonl")])
    assert missing.exit_code == 2
    assert "not found" in missing.stderr


@offline
def test_three_replays_in_one_process(db: str, tmp_path: Path) -> None:
    p = _head(KESTREL, 4, tmp_path / "four.jsonl")
    reports = [_report(["replay", str(p), "--run-id", f"three-{i}"]) for i in range(3)]
    assert [r["cases_total"] for r in reports] == [4, 4, 4]
    assert reports[0]["averages"] == reports[1]["averages"] == reports[2]["averages"]
    text = _invoke(["replay", str(p)])
    assert text.exit_code == 0
    assert "pass rate" in text.stdout


# -- LLM judges against the scripted model: numbers hand-computed from the datasets' labels ---------------


def _labelled(path: Path) -> dict[str, int]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["answer"].strip(): int(r["faithful"]) for r in rows}


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        monkeypatch.setenv("RAGPULSE_JUDGE_MODEL", "judge-test")
        monkeypatch.setenv("RAGPULSE_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("RAGPULSE_JUDGE_API_KEY", "sk-test")
        yield server


_ANSWER_RE = re.compile(r"<<<(?:ANSWER|回答)\n(.*?)\n(?:ANSWER|回答)>>>", re.S)


def _responder(labels: dict[str, int]) -> Any:
    """Relevancy: always yes. Faithfulness (claims mode): 2 of 2 claims supported for a faithful answer,
    1 of 2 for a hallucinated one (score 0.5, under the 0.8 threshold)."""

    def respond(req: RecordedRequest) -> Reply | str:
        text = req.prompt_text
        m = _ANSWER_RE.search(text)
        answer = m.group(1).strip() if m else ""
        if '"claims"' in text:
            faithful = labels[answer]
            claims = [{"claim": "first", "supported": True}, {"claim": "second", "supported": bool(faithful)}]
            return json.dumps({"claims": claims})
        return "是\n回应了问题。" if "问题" in text else "YES\nIt answers the question."

    return respond


def _check_llm_report(r: dict[str, Any], labels: list[int], server: ScriptedOpenAIServer) -> None:
    n = len(labels)
    faithful = sum(labels)
    assert r["cases_total"] == n
    assert r["coverage"] == 1.0
    assert r["averages"]["relevancy"] == pytest.approx(1.0)
    assert r["averages"]["faithfulness"] == pytest.approx((faithful * 1.0 + (n - faithful) * 0.5) / n)
    assert r["pass_rate"] == pytest.approx(faithful / n)
    assert r["counts"] == {
        "pass": n + faithful,
        "fail": n - faithful,
        "error": 0,
        "abstained": 0,
        "skipped": 0,
    }
    assert len(server.requests) == 2 * n  # one relevancy + one faithfulness call per case
    assert r["tokens"]["prompt"] == sum(math.ceil(len(q.prompt_text) / 4) for q in server.requests)
    assert r["status"] == "completed"


def test_halueval_subset_with_llm_judges(db: str, model: ScriptedOpenAIServer, tmp_path: Path) -> None:
    sub = _head(HALUEVAL, 10, tmp_path / "halueval10.jsonl")
    labels = _labelled(sub)
    model.reset(_responder(labels))
    r = _report(["replay", str(sub), "--judges", "relevancy,faithfulness"])
    assert r["test_set"] == "halueval10"
    rows = [json.loads(line) for line in sub.read_text().splitlines()]
    _check_llm_report(r, [int(x["faithful"]) for x in rows], model)
    by_case = {c["case_id"]: c for c in r["cases"]}
    assert by_case["halueval_qa_000_right"]["passed"] is True
    assert by_case["halueval_qa_000_hallucinated"]["judgements"]["faithfulness"]["score"] == 0.5


def test_uhgeval_zh_subset_with_llm_judges(db: str, model: ScriptedOpenAIServer, tmp_path: Path) -> None:
    src = shared_dir() / "datasets" / "uhgeval_zh" / "uhgeval_zh.sample.jsonl"
    sub = _head(src, 8, tmp_path / "uhgeval8.jsonl")
    labels = _labelled(sub)
    model.reset(_responder(labels))
    r = _report(["replay", str(sub), "--judges", "relevancy,faithfulness"])
    rows = [json.loads(line) for line in sub.read_text(encoding="utf-8").splitlines()]
    _check_llm_report(r, [int(x["faithful"]) for x in rows], model)
    # Chinese prompts were used for Chinese questions
    assert all("问题" in q.prompt_text for q in model.requests)


def _consistent(r: dict[str, Any], n: int, judges: int) -> None:
    """The report's totals agree with its own per-case rows."""
    assert r["cases_total"] == n
    assert len(r["cases"]) == n
    assert sum(r["counts"].values()) == n * judges
    assert r["pass_rate"] == pytest.approx(sum(c["passed"] for c in r["cases"]) / n, abs=1e-6)
    assert r["coverage"] == pytest.approx(sum(c["scored"] > 0 for c in r["cases"]) / n, abs=1e-6)
    for name, mean in r["averages"].items():
        scores = [
            c["judgements"][name]["score"] for c in r["cases"] if c["judgements"][name]["status"] == "ok"
        ]
        assert mean == (pytest.approx(sum(scores) / len(scores), abs=1e-5) if scores else None)


@offline
def test_halueval_example_offline(db: str) -> None:
    r = _report(["replay", str(HALUEVAL)])
    assert r["test_set"] == "halueval_qa_sample"
    assert r["status"] == "completed"
    _consistent(r, 40, 3)


@offline
@pytest.mark.slow
def test_uhgeval_full_sample_offline(db: str) -> None:
    src = shared_dir() / "datasets" / "uhgeval_zh" / "uhgeval_zh.sample.jsonl"
    r = _report(["replay", str(src)])
    _consistent(r, 600, 3)
    # no case has keywords or an expected answer: the keyword judge skips every case (no_reference)
    assert r["averages"]["keyword"] is None
    assert r["judges"]["keyword"]["skipped"] == 600
    assert r["coverage"] == 1.0


@offline
def test_text_report_says_it_lists_only_failing_cases(db: str, tmp_path: Path) -> None:
    p = _head(KESTREL, 4, tmp_path / "four.jsonl")  # reimb-en-03 (invented approver) is the one failing case
    text = _invoke(["replay", str(p), "--run-id", "failing-title"])
    assert text.exit_code == 0
    assert "failing cases (1 of 4)" in text.stdout
    assert "reimb-en-03" in text.stdout
    assert "reimb-en-01" not in text.stdout
    shown = _invoke(["runs", "show", "failing-title"])
    assert "failing cases" not in shown.stdout
    assert "reimb-en-01" in shown.stdout
