"""README command 1's path: ``ragpulse replay`` with no database configured starts the embedded PostgreSQL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragpulse", *args], env=env, capture_output=True, text=True, timeout=180
    )


@pytest.mark.slow
@pytest.mark.integration  # embedded PostgreSQL
def test_replay_example_on_embedded_postgres() -> None:
    # not tmp_path: pytest's /tmp/pytest-of-<user> is private (0700), and the embedded server may run as
    # another user (tests/store/conftest.py does the same)
    base = Path(tempfile.mkdtemp(prefix="ragpulse-embedded-replay-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}
    env.update(
        RAGPULSE_STORE_EMBEDDED_DIR=str(base / "pgdata"),
        RAGPULSE_LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", ""),
    )
    try:
        first = _run(
            ["replay", str(ROOT / "examples" / "kestrel_kb.jsonl"), "--run-id", "emb-1", "--json"], env
        )
        assert first.returncode == 0, first.stderr
        report = json.loads(first.stdout)
        assert report["run_id"] == "emb-1"
        assert report["cases_total"] == 17
        assert report["status"] == "completed"
        # a second process finds the run in the same embedded database
        runs = _run(["runs", "list", "--json"], env)
        assert runs.returncode == 0, runs.stderr
        assert [r["run_id"] for r in json.loads(runs.stdout)] == ["emb-1"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
