"""One-shot commands keep their output clean: no info lines unless a log level is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_replay_logs_only_warnings_by_default_and_names_env_typos(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGPULSE_DATABASE_URL", pg_url)
    monkeypatch.setenv("RAGPULSE_JUGE_MODEL", "typo")
    monkeypatch.delenv("RAGPULSE_LOG_LEVEL", raising=False)
    res = CliRunner().invoke(app, ["replay", str(ROOT / "examples" / "kestrel_kb.jsonl"), "--json"])
    assert res.exit_code == 0, res.output
    err = res.stderr
    assert "replay_started" not in err
    assert "migration_applied" not in err
    assert "unknown_setting_env" in err
    assert "RAGPULSE_JUGE_MODEL" in err
    res = CliRunner().invoke(
        app, ["--log-level", "INFO", "replay", str(ROOT / "examples" / "kestrel_kb.jsonl"), "--json"]
    )
    assert res.exit_code == 0
    assert "replay_started" in res.stderr
