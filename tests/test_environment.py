"""The suite does not depend on the developer's shell: ragpulse, openai and OpenTelemetry settings are cleared.

CI (scripts/test.sh) runs the fast lane with ``RAGPULSE_ENGINE_SAMPLING_RATE=0 OTEL_EXPORTER_OTLP_PROTOCOL=bogus``
exported, where this test fails if the clearing fixture (tests/conftest.py) breaks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from testsupport import CLEARED_PREFIXES, TEST_VARIABLES


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
