"""One-shot commands keep their output clean: no info lines unless a log level is asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_replay_logs_only_warnings_by_default(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_STORE_DATABASE_URL", pg_url)
    monkeypatch.delenv("RAGPULSE_LOG_LEVEL", raising=False)
    res = CliRunner().invoke(app, ["replay", str(ROOT / "examples" / "kestrel_kb.jsonl"), "--json"])
    assert res.exit_code == 0, res.output
    err = res.stderr
    assert "replay_started" not in err
    assert "migration_applied" not in err
    res = CliRunner().invoke(
        app, ["--log-level", "INFO", "replay", str(ROOT / "examples" / "kestrel_kb.jsonl"), "--json"]
    )
    assert res.exit_code == 0
    assert "replay_started" in res.stderr


@pytest.mark.integration  # slow check (a ragpulse subprocess per command, ~1.2 s CPU each): the integration lane, docs/dev/testing.md
@pytest.mark.parametrize("command", [["serve"], ["replay", "examples/kestrel_kb.jsonl"], ["db", "info"]])
def test_an_env_typo_stops_the_command_with_exit_2_naming_the_setting(command: list[str]) -> None:
    """``RAGPULSE_JUGE_MODEL=x ragpulse serve`` would otherwise start with the offline judges, silently; the
    check runs before anything is opened (no database, no listener), in a real subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env["RAGPULSE_JUGE_MODEL"] = "x"
    proc = subprocess.run(
        [sys.executable, "-m", "ragpulse", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: unknown environment variable RAGPULSE_JUGE_MODEL; did you mean RAGPULSE_JUDGE_MODEL?"
    ]
