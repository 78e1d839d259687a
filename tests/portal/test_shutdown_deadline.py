"""Issue 25 item 9: the shutdown deadline bounds the process exit. A judge busy in a worker thread cannot be
interrupted (Python waits for such threads at exit), so ``ragpulse serve`` ends itself at
``engine.shutdown_deadline_s`` + ``EXIT_GRACE_S`` after SIGTERM, logging ``shutdown_deadline_exceeded``."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from portal_testutil import Portal, base_env
from ragpulse.cli.serve_cmd import EXIT_GRACE_S
from testsupport import private_db

pytestmark = pytest.mark.integration  # a started serve on PostgreSQL

SPIN = '''
import time
from typing import Any, Mapping

from ragpulse.judges.frame import Decision, JudgeBase
from ragpulse.model import Trace


class SpinJudge(JudgeBase):
    """Burns CPU for two minutes, inline (as an offline judge on a huge text)."""

    name = "spin"

    def decide_now(self, trace: Trace) -> Decision:
        end = time.monotonic() + 120
        n = 0
        while time.monotonic() < end:
            n += 1
        return Decision(1.0, "spun", "rule")


def build(settings: Any, options: Mapping[str, Any]) -> SpinJudge:
    return SpinJudge(settings, options)
'''


def _plugin(tmp_path: Path) -> Path:
    (tmp_path / "spin_judge.py").write_text(SPIN, encoding="utf-8")
    dist = tmp_path / "spin_judge-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: spin-judge\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        textwrap.dedent("[ragpulse.judges]\nspin = spin_judge:build\n"), encoding="utf-8"
    )
    return tmp_path


def test_a_judge_spinning_in_a_thread_does_not_outlive_the_shutdown_deadline(tmp_path: Path) -> None:
    deadline_s = 2.0
    with private_db() as db:
        env = {**base_env(db), "RAGPULSE_JUDGE_ENABLED": "spin", "RAGPULSE_ENGINE_SHUTDOWN_DEADLINE_S": "2"}
        p = Portal(db, env)
        p.env["PYTHONPATH"] += os.pathsep + str(_plugin(tmp_path))
        p.start()
        try:
            long_answer = "word " * 2_000  # ≥ 8,000 characters: the inline judge runs in a worker thread
            with httpx.Client(base_url=p.url, timeout=30) as c:
                r = c.post(
                    "/api/v1/evaluate",
                    params={"timeout_s": 1},
                    json={"traceId": "spin-1", "question": "q?", "answer": long_answer},
                )
                assert r.status_code == 504  # still judging
            assert p.proc is not None
            sent = time.monotonic()
            p.proc.send_signal(signal.SIGTERM)
            code = p.proc.wait(timeout=60)
            took = time.monotonic() - sent
        finally:
            if p.proc is not None and p.proc.poll() is None:
                p.proc.kill()
    assert code == 3
    assert took < deadline_s + EXIT_GRACE_S + 5  # not the judge's 120 s
    if p._reader is not None:
        p._reader.join(5)  # the rest of its log lines
    assert [e["limit_s"] for e in p.events("shutdown_deadline_exceeded")] == [deadline_s + EXIT_GRACE_S]
