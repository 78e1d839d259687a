"""The CLI's start-up does not load the judge model's HTTP client.

``openai`` takes about 0.4 s of CPU to import (half of the CLI's start-up before this test existed), and only
commands that build a judge model client need it; ``runs show``/``runs list``/``gate`` must start fast (issue 13:
``runs show`` first page in under 1 s). The import is deferred to :meth:`LLMClient._build_state` and
:class:`EmbeddingSimilarity`.
"""

from __future__ import annotations

import json
import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_cli_import_leaves_openai_unloaded() -> None:
    loaded = _modules_after("import ragpulse.cli")
    assert "ragpulse.judges.model.client" in loaded  # the client module is imported …
    assert "openai" not in loaded  # … but not the library until a client is built


def test_building_a_judge_client_loads_openai() -> None:
    loaded = _modules_after(
        "from ragpulse.config import load_settings\n"
        "from ragpulse.judges.model.client import LLMClient\n"
        "import asyncio\n"
        "c = LLMClient(load_settings(environ={'RAGPULSE_JUDGE_MODEL': 'm', 'RAGPULSE_JUDGE_BASE_URL': "
        "'http://127.0.0.1:9/v1'}))\n"
        "c._build_state(asyncio.new_event_loop())"
    )
    assert "openai" in loaded
