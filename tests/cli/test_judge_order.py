"""``replay`` and ``runs show`` print a run's judges in one order: the configured one (real PostgreSQL, whose
``jsonb`` does not keep the key order of the stored report's ``judges``)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ragpulse.cli import app


def _judge_lines(text: str) -> list[str]:
    """The ``judges:`` line and the judge column of the per-judge table, in print order."""
    first = next(line for line in text.splitlines() if line.startswith("judges: "))
    rows = [line.split("│")[1].strip() for line in text.splitlines() if line.count("│") >= 8]
    return [first, *[r for r in rows if r in ("relevancy", "keyword")]]


def test_replay_and_runs_show_print_the_judges_in_the_configured_order(db: str, tmp_path: Path) -> None:
    p = tmp_path / "kb.jsonl"
    p.write_text(
        json.dumps({"id": "c1", "question": "How many leave days?", "answer": "15 days.", "keywords": ["15"]})
        + "\n",
        encoding="utf-8",
    )
    # "relevancy" first: jsonb stores shorter keys first, so the stored report reads "keyword" first
    replayed = CliRunner().invoke(app, ["replay", str(p), "--judges", "relevancy,keyword", "--run-id", "o1"])
    assert replayed.exit_code in (0, 1), replayed.output
    shown = CliRunner().invoke(app, ["runs", "show", "o1"])
    assert shown.exit_code == 0, shown.output
    expected = ["judges: relevancy, keyword", "relevancy", "keyword"]
    assert _judge_lines(replayed.stdout) == expected
    assert _judge_lines(shown.stdout) == expected
    doc = json.loads(CliRunner().invoke(app, ["runs", "show", "o1", "--json"]).stdout)
    assert list(doc["judges"]) == doc["judge_order"] == ["relevancy", "keyword"]
    assert list(doc["averages"]) == ["relevancy", "keyword"]
