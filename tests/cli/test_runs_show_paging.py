"""``runs show`` prints a page of the case table (a 100,000-case table would take minutes to render)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app


def test_runs_show_pages_the_case_table(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    for var in ("RAGPULSE_JUDGE_MODEL", "RAGPULSE_CONFIG", "RAGPULSE_RAG_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    p = tmp_path / "five.jsonl"
    rows = [{"id": f"case-{i}", "question": f"q{i}?", "answer": "yes", "keywords": ["yes"]} for i in range(5)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(app, ["replay", str(p), "--judges", "keyword", "--run-id", "five"]).exit_code == 0
    page = runner.invoke(
        app, ["runs", "show", "five", "--limit", "2", "--offset", "1"], env={"COLUMNS": "200"}
    )
    assert page.exit_code == 0, page.output
    shown = {f"case-{i}" for i in range(5) if f"case-{i} " in page.stdout}
    assert shown == {"case-1", "case-2"}
    assert "showing rows 2–3 of 5 (runs show --offset N --limit N for others" in page.stdout
    everything = runner.invoke(app, ["runs", "show", "five", "--limit", "0"], env={"COLUMNS": "200"})
    assert {f"case-{i}" for i in range(5) if f"case-{i} " in everything.stdout} == {
        f"case-{i}" for i in range(5)
    }
    assert "showing rows" not in everything.stdout
    assert len(json.loads(runner.invoke(app, ["runs", "show", "five", "--json"]).stdout)["cases"]) == 5
