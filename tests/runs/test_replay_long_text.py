"""A test case with a multi-megabyte answer, replayed through the CLI with the default offline judges into a
private PostgreSQL database: that case is ``skipped``/``text_too_long`` by every judge (judge.max_text_chars),
the other cases are judged exactly as without it, and the stored trace keeps the whole answer."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.runs import case_trace_id
from ragpulse.store import open_store

PARAGRAPH = (
    "The annual leave policy grants employees twenty days of paid leave per calendar year. "
    "Requests must be approved by the line manager at least two weeks in advance. "
)
CONTEXTS = [PARAGRAPH + "Unused days expire on March 31.", "Sick leave is separate from annual leave."]
HUGE_CHARS = 3_000_000


def _case(case_id: str, answer: str) -> dict[str, Any]:
    return {
        "id": case_id,
        "question": "How many days of annual leave do employees get?",
        "contexts": CONTEXTS,
        "answer": answer,
        "expected_answer": "Twenty days per calendar year.",
        "keywords": ["twenty", "leave"],
    }


NORMAL = [
    _case("n1", "Employees get twenty days of paid leave per calendar year."),
    _case("n2", "Twenty days. Requests need the line manager's approval two weeks ahead."),
    _case("n3", "Employees get thirty days of leave, and unused days never expire."),
    _case("n4", "I don't know."),
]


def _write(path: Path, cases: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


def _replay(path: Path, run_id: str, pg_url: str) -> dict[str, Any]:
    env = {"RAGPULSE_STORE_DATABASE_URL": pg_url, "RAGPULSE_JUDGE_MODEL": "", "RAGPULSE_LOG_LEVEL": "WARNING"}
    res = CliRunner().invoke(app, ["replay", str(path), "--run-id", run_id, "--json"], env=env)
    assert res.exit_code in (0, 1), res.output
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


def _verdicts(report: dict[str, Any]) -> dict[str, dict[str, tuple[Any, ...]]]:
    return {
        c["case_id"]: {
            n: (j["status"], j["score"], j["passed"], j["reason"]) for n, j in c["judgements"].items()
        }
        for c in report["cases"]
    }


async def _stored_answer_chars(pg_url: str, trace_id: str) -> int:
    async with open_store(Settings(store_database_url=pg_url).store) as store:
        result = await store.get_trace(trace_id)
    assert result is not None
    return len(result.trace.answer or "")


def test_a_multi_megabyte_answer_is_skipped_and_the_other_cases_are_judged(
    pg_url: str, tmp_path: Path
) -> None:
    huge_answer = (PARAGRAPH * (HUGE_CHARS // len(PARAGRAPH) + 1))[:HUGE_CHARS]
    cases = [*NORMAL[:2], _case("huge", huge_answer), *NORMAL[2:]]
    report = _replay(_write(tmp_path / "with_huge.jsonl", cases), "with-huge", pg_url)
    alone = _replay(_write(tmp_path / "normal.jsonl", NORMAL), "normal-only", pg_url)

    verdicts = _verdicts(report)
    reason = "text_too_long: the answer has 3,000,000 characters (limit 100,000: judge.max_text_chars)"
    assert verdicts["huge"] == {
        n: ("skipped", None, None, reason) for n in ("relevancy", "faithfulness", "keyword")
    }
    huge = next(c for c in report["cases"] if c["case_id"] == "huge")
    assert (huge["outcome"], huge["scored"]) == ("evaluated", 0)
    # every other case: the verdicts of a replay without the huge one
    del verdicts["huge"]
    assert verdicts == _verdicts(alone)
    assert verdicts["n1"]["faithfulness"][0] == "ok"
    assert verdicts["n4"]["relevancy"][3] == "abstained"
    assert report["status"] == "completed"  # a skip is no error
    assert report["counts"]["skipped"] == alone["counts"]["skipped"] + 3
    assert (
        report["counts"]["pass"] + report["counts"]["fail"]
        == alone["counts"]["pass"] + alone["counts"]["fail"]
    )
    # nothing lost: the trace is stored with its whole answer
    stored = asyncio.run(_stored_answer_chars(pg_url, case_trace_id("with-huge", "huge")))
    assert stored == HUGE_CHARS
