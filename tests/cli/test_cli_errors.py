"""The CLI's one error boundary: every command × {bad config file, bad environment value, unreachable database,
unknown id} → its exit code and one ``error: …`` line, never a traceback (subprocesses, real PostgreSQL).

Exit codes (docs/cli.md): 2 usage/config/input error, 3 runtime failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli._common import exit_code_for
from ragpulse.errors import ConfigError, ExportError, IngestError, JudgeError, NotFoundError, StoreError
from ragpulse.testing.openai_server import ScriptedOpenAIServer
from testsupport import free_port, scripted_judge_env

ROOT = Path(__file__).resolve().parents[2]
KESTREL = ROOT / "examples" / "kestrel_kb.jsonl"
TRACE_ID = "0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Case:
    name: str
    args: list[str]
    code: int
    message: str  # regex the one error line must match (after "error: ")
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Files:
    testset: Path
    events: Path
    labels: Path
    bad_config: Path
    no_question: Path


@pytest.fixture
def files(tmp_path: Path) -> Files:
    ts = tmp_path / "mini.jsonl"
    ts.write_text("\n".join(KESTREL.read_text(encoding="utf-8").splitlines()[:2]) + "\n", encoding="utf-8")
    events = tmp_path / "events.jsonl"
    events.write_text('{"traceId": "t1", "question": "q", "answer": "a"}\n', encoding="utf-8")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"question": "q", "answer": "a", "label": 1}\n', encoding="utf-8")
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("engine_sampling_rate: abc\n", encoding="utf-8")
    no_q = tmp_path / "no_question.jsonl"
    no_q.write_text('{"id": "a", "question": "q"}\n{"id": "b", "answer": "a"}\n', encoding="utf-8")
    return Files(ts, events, labels, cfg, no_q)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAGPULSE_", "OTEL_", "OPENAI_")) or k in ("RAGPULSE_SHARED_DIR",)
    }
    env.update(extra)
    return env


def _run(case: Case, base_env: dict[str, str]) -> tuple[Case, subprocess.CompletedProcess[str]]:
    proc = subprocess.run(
        [sys.executable, "-m", "ragpulse", *case.args],
        env={**base_env, **case.env},
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    return case, proc


def _problems(results: list[tuple[Case, subprocess.CompletedProcess[str]]]) -> list[str]:
    problems = []
    for case, proc in results:
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
        why = []
        if proc.returncode != case.code:
            why.append(f"exit {proc.returncode}, want {case.code}")
        if "Traceback" in proc.stderr:
            why.append("traceback in stderr")
        if len(errors) != 1:
            why.append(f"{len(errors)} error lines")
        elif not re.search(case.message, errors[0]):
            why.append(f"message {errors[0]!r} does not match {case.message!r}")
        if why:
            problems.append(f"{case.name}: {'; '.join(why)}\n  stderr: {proc.stderr[-600:]!r}")
    return problems


def _commands(f: Files, *, http_port: int) -> dict[str, list[str]]:
    """Each command with otherwise valid arguments."""
    return {
        "replay": ["replay", str(f.testset)],
        "replay --test-set": ["replay", "--test-set", "kestrel"],
        "runs list": ["runs", "list"],
        "runs show": ["runs", "show", "some-run"],
        "runs compare": ["runs", "compare", "run-a", "run-b"],
        "trace": ["trace", TRACE_ID],
        "rejudge": ["rejudge", "--since", "1h"],
        "gate": ["gate", "some-run", "--min", "pass_rate=0.5"],
        "db info": ["db", "info"],
        "db prune": ["db", "prune", "--older-than-days", "30"],
        "send": ["send", str(f.events), "--to", "otlp", "--endpoint", f"http://127.0.0.1:{free_port()}"],
        "calibrate": ["calibrate", str(f.labels), "--judge", "keyword", "--label", "label"],
        "serve": ["serve"],
    }


SERVE_ENV = {
    "RAGPULSE_OTLP_GRPC_ADDRESS": "",
    "RAGPULSE_OTLP_HTTP_ADDRESS": "",
    "RAGPULSE_API_ADDRESS": "",  # no portal: its fixed default port would collide between concurrent rows
}


def _run_all(
    cases: list[Case], base_env: dict[str, str]
) -> list[tuple[Case, subprocess.CompletedProcess[str]]]:
    with ThreadPoolExecutor(max_workers=6) as pool:
        return list(pool.map(lambda c: _run(c, base_env), cases))


@pytest.fixture
def base_env(pg_url: str) -> Iterator[dict[str, str]]:
    yield _env(
        RAGPULSE_STORE_DATABASE_URL=pg_url, RAGPULSE_HTTP_ADDRESS=f"127.0.0.1:{free_port()}", **SERVE_ENV
    )


def _table(f: Files) -> list[Case]:
    """Every command × {bad config file, bad environment value, unreachable database, unknown id}."""
    cmds = _commands(f, http_port=free_port())
    closed_db = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    cases = []
    for name, args in cmds.items():
        cases.append(Case(f"{name} --config bad.yaml", ["--config", str(f.bad_config), *args], 2, CONFIG_MSG))
        cases.append(
            Case(
                f"{name} RAGPULSE_ENGINE_SAMPLING_RATE=abc",
                args,
                2,
                CONFIG_MSG,
                {"RAGPULSE_ENGINE_SAMPLING_RATE": "abc"},
            )
        )
        if name not in ("send", "calibrate"):  # they use no database
            cases.append(
                Case(f"{name} database down", args, 3, DB_MSG, {"RAGPULSE_STORE_DATABASE_URL": closed_db})
            )
    binary = f.testset.parent / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    deep = f.testset.parent / "deep.yaml"
    deep.write_bytes(b"[" * 10_000 + b"]" * 10_000)
    shadow = f.testset.parent / "shadow"
    shadow.write_text("root:*:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n", encoding="utf-8")
    cases += [
        Case(
            "binary config file",
            ["--config", str(binary), "runs", "list"],
            2,
            r"is not UTF-8 text \(byte 0\)",
        ),
        Case("deep config file", ["--config", str(deep), "runs", "list"], 2, r"nests too deeply"),
        Case(
            "a checklist path naming another file",
            ["replay", str(f.testset), "--judges", "x"],
            2,
            r"shadow is not a checklist: unknown key\(s\) 2 that are not setting names \(expected a YAML mapping",
            {"RAGPULSE_JUDGE_CHECKLISTS": json.dumps({"x": str(shadow)})},
        ),
        Case("send to a closed OTLP endpoint", cmds["send"], 3, r"OTLP export to .* failed"),
        Case("replay --test-set unknown", cmds["replay --test-set"], 2, r"no test set 'kestrel'"),
        Case("runs show unknown", cmds["runs show"], 2, r"no run 'some-run'"),
        Case("runs compare unknown", cmds["runs compare"], 2, r"no run 'run-a'"),
        Case("trace unknown", cmds["trace"], 2, rf"no trace '{TRACE_ID}'"),
        Case("gate unknown", cmds["gate"], 2, r"no run 'some-run'"),
        Case(
            "gate typo",
            ["gate", "some-run", "--min", "faithfulnes=0.5"],
            2,
            r"unknown metric or judge 'faithfulnes'",
        ),
        Case(
            "replay typo",
            ["replay", str(f.testset), "--fail-under", "pass_rat=0.5"],
            2,
            r"unknown metric or judge 'pass_rat'",
        ),
        Case(
            "replay with OTEL_EXPORTER_OTLP_PROTOCOL=bogus",
            cmds["replay"],
            2,
            r"unsupported OTLP protocol 'bogus'",
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "bogus",
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
            },
        ),
        Case(
            "send unparseable line",
            ["send", str(f.labels), "--to", "otlp", "--endpoint", f"http://127.0.0.1:{free_port()}"],
            2,
            r"1 line\(s\) were skipped .*\(no line has a traceId: to send a test set's cases as traces through "
            r"a running serve, run: ragpulse replay \S+labels\.jsonl --via otlp\)$",
        ),
        Case(
            "send a test set",
            ["send", str(f.testset)],
            2,
            r"mini\.jsonl looks like a test set \(cases without traceId\), not trace events: .*; to send a test "
            r"set's cases as traces through a running serve, run: ragpulse replay \S+mini\.jsonl --via kafka$",
        ),
        Case(
            "replay --run-id against the API's pattern",
            ["replay", str(f.testset), "--run-id", "bad id"],
            2,
            r"^error: invalid run id 'bad id': .* \(pattern \^\[A-Za-z0-9\]\[A-Za-z0-9\._-\]\{0,127\}\$\)$",
        ),
        *(
            Case(
                f"rejudge --since {span}", ["rejudge", "--app", "hr", "--since", span], 2, r"^error: --since "
            )
            for span in ("99999999999d", "999999d")
        ),
        *(
            Case(
                f"db prune --older-than-days {days}",
                ["db", "prune", "--older-than-days", days],
                2,
                r"too large",
            )
            for days in ("99999999999", "999999")
        ),
        Case(
            "judges compare --since 99999999999d",
            ["judges", "compare", "relevancy", "--since", "99999999999d"],
            2,
            r"^error: invalid time span '99999999999d': too long$",
        ),
        Case(
            "replay a case without a question",
            ["replay", str(f.no_question)],
            2,
            r"no_question\.jsonl:2: line 2: question is required \(question, query, user_input\)",
        ),
    ]
    return cases


CONFIG_MSG = r"^error: invalid configuration: engine\.sampling_rate \(.*\): Input should be a valid number"
DB_MSG = r"^error: store: connect failed"


def test_every_command_maps_errors_to_one_line_and_its_exit_code(
    files: Files, base_env: dict[str, str]
) -> None:
    """The table, each row a real ``python -m ragpulse`` process (six at a time)."""
    problems = _problems(_run_all(_table(files), base_env))
    assert not problems, "\n".join(problems)


def test_replay_whose_judgements_are_all_errors_exits_3(
    files: Files, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedOpenAIServer() as server:  # nothing scripted: every call answers HTTP 400
        for k, v in scripted_judge_env(server.base_url, RAGPULSE_STORE_DATABASE_URL=pg_url).items():
            monkeypatch.setenv(k, v)
        res = CliRunner().invoke(
            app, ["replay", str(files.testset), "--judges", "relevancy", "--fail-under", "pass_rate=0.5"]
        )
    assert res.exit_code == 3, res.output
    assert re.search(r"error: every judgement of run \S+ is an error \(first: relevancy: ", res.stderr)
    assert "threshold breached" not in res.stderr  # the runtime failure wins over the breach


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("bad"), 2),
        (NotFoundError("no run 'x'"), 2),
        (ExportError("unsupported OTLP protocol"), 2),
        (IngestError("line 3: not JSON"), 2),
        (IngestError("Kafka source failed: broker gone", retriable=True), 3),  # serve's consume loop died
        (StoreError("connect failed", retriable=True), 3),
        (JudgeError("judge_unavailable"), 3),
        (RuntimeError("a bug"), 3),
        (KeyboardInterrupt(), 130),
        (BrokenPipeError(), 141),
    ],
)
def test_exit_code_table(error: BaseException, code: int) -> None:
    assert exit_code_for(error) == code


def test_replay_of_an_empty_stored_test_set_is_refused(base_env: dict[str, str]) -> None:
    """A test set created empty (portal/API) is refused up front: exit 2, no run is stored."""
    import asyncio

    from ragpulse.config import Settings
    from ragpulse.store.postgres import PostgresStore

    url = base_env["RAGPULSE_STORE_DATABASE_URL"]

    async def prepare() -> None:
        store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
        try:
            assert await store.create_test_set_row("empty-set", None, None)
        finally:
            await store.close()

    asyncio.run(prepare())
    case = Case(
        "replay --test-set empty-set",
        ["replay", "--test-set", "empty-set"],
        2,
        r"^error: test set 'empty-set' has no cases: add cases",
    )
    assert _problems([_run(case, base_env)]) == []
    listed = _run(Case("runs list", ["runs", "list", "--json"], 0, ""), base_env)[1]
    assert json.loads(listed.stdout) == []


@pytest.mark.parametrize("args", [["version"], ["--help"], ["runs", "list"]])
def test_a_closed_stdout_ends_quietly_with_141(args: list[str], base_env: dict[str, str]) -> None:
    """``ragpulse … | head``: the reader is gone before the command writes; exit 141 (128 + SIGPIPE, as a
    Unix tool) and nothing on stderr — no error line, no traceback, no "Exception ignored"."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragpulse", *args],
        env=base_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err.decode()) == (141, "")
