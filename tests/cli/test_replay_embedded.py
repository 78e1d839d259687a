"""README command 1's path: ``ragpulse replay`` with no database configured starts the embedded PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragpulse", *args], env=env, capture_output=True, text=True, timeout=180
    )


@pytest.mark.slow
@pytest.mark.integration  # embedded PostgreSQL
def test_replay_example_on_embedded_postgres(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env.update(
        RAGPULSE_DATABASE_EMBEDDED_DIR=str(tmp_path / "pgdata"),
        RAGPULSE_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", ""),
    )
    first = _run(["replay", str(ROOT / "examples" / "kestrel_kb.jsonl"), "--run-id", "emb-1", "--json"], env)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["run_id"] == "emb-1"
    assert report["cases_total"] == 17
    assert report["status"] == "completed"
    # a second process finds the run in the same embedded database
    runs = _run(["runs", "list", "--json"], env)
    assert runs.returncode == 0, runs.stderr
    assert [r["run_id"] for r in json.loads(runs.stdout)] == ["emb-1"]
