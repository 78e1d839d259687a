"""The suite does not depend on the developer's shell: ragpulse, openai and OpenTelemetry settings are cleared."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import CLEARED_PREFIXES, TEST_VARIABLES
from testsupport import REPO

SHELL = {
    "RAGPULSE_SAMPLING_RATE": "0",
    "RAGPULSE_JUDGE_MODEL": "from-the-shell",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "bogus",
    "OPENAI_API_KEY": "sk-from-the-shell",
    "RAGPULSE_SHARED_DIR": str(REPO),
}


def _leftover() -> list[str]:
    return sorted(k for k in os.environ if k.startswith(CLEARED_PREFIXES) and k not in TEST_VARIABLES)


def test_tests_and_their_subprocesses_see_no_shell_settings() -> None:
    assert _leftover() == []
    child = subprocess.run(
        [sys.executable, "-c", "import json, os; print(json.dumps(sorted(os.environ)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(child.stdout)
    assert [k for k in seen if k.startswith(CLEARED_PREFIXES) and k not in TEST_VARIABLES] == []


def test_a_shell_with_ragpulse_openai_and_otel_settings_is_cleared() -> None:
    env = {**os.environ, **SHELL}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_environment.py::test_tests_and_their_subprocesses_see_no_shell_settings",
            "tests/test_config.py",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert " passed" in run.stdout
    assert os.environ.get("RAGPULSE_SAMPLING_RATE") is None  # the outer test's own environment is clean too
