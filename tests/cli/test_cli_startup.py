"""The CLI's start-up does not load the judge model's HTTP client, nor any other heavy library.

``openai`` takes about 0.4 s of CPU to import (half of the CLI's start-up before this test existed), and only
commands that build a judge model client need it; ``runs show``/``runs list``/``gate`` must start fast (issue 13:
``runs show`` first page in under 1 s). The import is deferred to :meth:`LLMClient._build_state` and
:class:`EmbeddingSimilarity`.

The command modules import the service layer (runs, portal, judges, store, export, calibration, ingest) inside
the commands, so ``ragpulse replay --help`` loads typer, rich, pydantic and the settings only (issue 27 item 7:
start-up under 1 s; ``bench/replay_window.py`` times it). Asserted on the modules loaded, not on the clock.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.integration  # slow check (a Python subprocess, ~1.5 s CPU): the integration lane, docs/dev/testing.md
def test_cli_import_leaves_openai_unloaded() -> None:
    loaded = _modules_after("import ragpulse.cli")
    assert "ragpulse.judges.model.client" not in loaded  # not even the client module …
    assert "openai" not in loaded  # … let alone the library, until a client is built


#: Libraries ``replay --help`` must not load (each costs tens to hundreds of ms of CPU), and the service-layer
#: packages that would pull them in.
HEAVY = (
    "openai",
    "httpx",
    "fastapi",
    "starlette",
    "uvicorn",
    "asyncpg",
    "aiokafka",
    "grpc",
    "opentelemetry",
    "prometheus_client",
    "jinja2",
    "jsonschema",
    "jieba",
    "simplemma",
    "psutil",
    "ragpulse.runs",
    "ragpulse.portal",
    "ragpulse.judges",
    "ragpulse.store",
    "ragpulse.engine",
    "ragpulse.export",
    "ragpulse.ingest",
    "ragpulse.calibration",
    "ragpulse.sidecar",
)

_HELP = (
    "import contextlib, io\n"
    "sys.argv = ['ragpulse', 'replay', '--help']\n"
    "out = io.StringIO()\n"
    "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
    "    from ragpulse.cli import main\n"
    "    main()\n"
    "assert '--test-set' in out.getvalue() and '--fail-under' in out.getvalue(), out.getvalue()"
)


@pytest.mark.integration  # slow check (a Python subprocess, ~0.5 s CPU): the integration lane, docs/dev/testing.md
def test_replay_help_loads_no_heavy_module() -> None:
    loaded = _modules_after(_HELP)
    assert "ragpulse.cli.replay_cmd" in loaded  # the help really was built …
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == []  # … without any of these


@pytest.mark.integration  # slow check (a Python subprocess): the integration lane, docs/dev/testing.md
def test_replay_loads_the_service_layer_when_it_runs() -> None:
    # the other side of the lazy imports: a replay that gets as far as reading its test set imports them (here
    # it stops at a missing file, exit 2, after the runs package was imported to open it)
    code = (
        "import contextlib\n"
        "sys.argv = ['ragpulse', 'replay', '/nonexistent/cases.jsonl']\n"
        "with contextlib.suppress(SystemExit):\n"
        "    from ragpulse.cli import main\n"
        "    main()\n"
    )
    loaded = _modules_after(code)
    assert "ragpulse.runs.replay" in loaded
    assert "ragpulse.runs.testset_files" in loaded


@pytest.mark.integration  # slow check (a Python subprocess, ~1.2 s CPU): the integration lane, docs/dev/testing.md
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


def test_the_cli_default_score_drop_is_the_service_default() -> None:
    """``runs compare --score-drop`` repeats the service's default so ``--help`` imports no service module."""
    from ragpulse.cli.runs_cmd import DEFAULT_SCORE_DROP as CLI_DEFAULT
    from ragpulse.runs.compare import DEFAULT_SCORE_DROP

    assert CLI_DEFAULT == DEFAULT_SCORE_DROP == 0.1
