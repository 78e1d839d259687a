"""``ragpulse replay`` reads the file the way the user meant: delimiter, encoding (real PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def test_semicolon_csv_is_read_as_columns(db: str, tmp_path: Path) -> None:
    p = tmp_path / "bom.csv"
    # keyword scores: c1 finds 2 of 2, c2 finds 1 of 2 ("HR" missing) → average 0.75
    p.write_text(
        "id;question;answer;keywords\n"
        "c1;Can I carry leave over?;Yes, up to 5 days can be carried over.;5 days, carried over\n"
        "c2;Who approves leave?;Your manager approves it.;manager, HR\n",
        encoding="utf-8",
    )
    res = _invoke("replay", str(p), "--judges", "keyword", "--run-id", "semi-1", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["cases_total"] == 2
    assert [c["case_id"] for c in report["cases"]] == ["c1", "c2"]
    assert report["averages"]["keyword"] == pytest.approx(0.75)


def test_unreadable_inputs_are_one_line_usage_errors(db: str, tmp_path: Path) -> None:
    one_column = tmp_path / "one.csv"
    one_column.write_text("frage;antwort\nWo?;Hier.\n", encoding="utf-8")
    res = _invoke("replay", str(one_column))
    assert res.exit_code == 2
    assert f"error: {one_column}:1: no known column in the CSV header 'frage;antwort'" in res.output
    gbk = tmp_path / "zh.jsonl"
    gbk.write_bytes(
        json.dumps({"question": "年假有几天？", "keywords": ["15天"]}, ensure_ascii=False).encode("gbk")
    )
    res = _invoke("replay", str(gbk), "--judges", "keyword")
    assert res.exit_code == 2
    assert f"error: {gbk}:1: the file must be UTF-8" in res.output
    assert "--encoding" in res.output
    res = _invoke("replay", str(gbk), "--judges", "keyword", "--encoding", "gbk", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["cases_total"] == 1
    tabbed = tmp_path / "tabbed.csv"
    tabbed.write_text("question\tanswer\nq\ta\n", encoding="utf-8")
    res = _invoke("replay", str(tabbed), "--csv-delimiter", ";")
    assert res.exit_code == 2
    assert "no known column in the CSV header" in res.output


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("empty.jsonl", ""),
        ("empty.json", "[]"),
        ("empty.csv", ""),
        ("blank.csv", "\r\n\r\n"),
        ("header-only.csv", "id,question,answer\r\n"),
    ],
)
def test_a_file_without_cases_says_no_test_cases_in_every_format(
    db: str, tmp_path: Path, name: str, content: str
) -> None:
    p = tmp_path / name
    p.write_bytes(content.encode())
    res = _invoke("replay", str(p), "--judges", "keyword")
    assert res.exit_code == 2, res.output
    assert res.output.strip() == f"error: {p}: no test cases"
