"""Nothing overwritten without being asked, and runs that name what they ran (issue 13), end to end through
the CLI on real PostgreSQL: run-id reuse, test-set content hashes, ``--via`` guards, runs known only from
their traces."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.config import Settings
from ragpulse.model import Backend, Judgement, JudgementStatus, Source, Trace, TraceOutcome, TraceResult
from ragpulse.runs import load_test_set
from ragpulse.store.postgres import PostgresStore
from testsupport import free_port

ROOT = Path(__file__).resolve().parents[2]
KESTREL = ROOT / "examples" / "kestrel_kb.jsonl"


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _json(*args: str) -> Any:
    res = _invoke(*args, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _bom(tmp_path: Path, name: str, rows: list[dict[str, str]]) -> Path:
    p = tmp_path / name
    if name.endswith(".csv"):
        header = list(rows[0])
        p.write_text(
            ",".join(header) + "\n" + "".join(",".join(r[h] for h in header) + "\n" for r in rows),
            encoding="utf-8",
        )
    else:
        p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


BOM = [
    {"id": "b1", "question": "What is a BOM?", "answer": "A bill of materials.", "keywords": "bill"},
    {"id": "b2", "question": "Who signs the BOM?", "answer": "The engineer.", "keywords": "engineer"},
]


def test_run_id_reuse_with_other_cases_is_refused_unless_replace_run(db: str, tmp_path: Path) -> None:
    first = _json("replay", str(KESTREL), "--judges", "keyword", "--run-id", "r1")
    assert first["cases_total"] == 17
    bom = _bom(tmp_path, "bom.jsonl", BOM)
    res = _invoke("replay", str(bom), "--judges", "keyword", "--run-id", "r1")
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    assert lines[0].startswith(
        "error: run 'r1' already exists for test set 'kestrel_kb' (completed, started "
    )
    assert lines[0].endswith("with other cases; use another --run-id, or --replace-run to replace it")
    kept = _json("runs", "show", "r1")  # the old run's report is untouched
    assert (kept["test_set"], kept["cases_total"]) == ("kestrel_kb", 17)
    # the same test set again re-runs it as before
    again = _json("replay", str(KESTREL), "--judges", "keyword", "--run-id", "r1")
    assert again["pass_rate"] == first["pass_rate"]
    replaced = _json("replay", str(bom), "--judges", "keyword", "--run-id", "r1", "--replace-run")
    assert (replaced["test_set"], replaced["cases_total"]) == ("bom", 2)
    shown = _json("runs", "show", "r1")
    assert [c["case_id"] for c in shown["cases"]] == [
        "b1",
        "b2",
    ]  # the old run's traces no longer belong to it
    listed = {r["run_id"]: r for r in _json("runs", "list")}
    assert listed["r1"]["cases_hash"] == load_test_set(bom).content_hash()


def test_test_set_with_other_cases_under_the_same_name_is_refused(db: str, tmp_path: Path) -> None:
    jsonl = _bom(tmp_path, "bom.jsonl", BOM)
    first = _json("replay", str(jsonl), "--judges", "keyword", "--run-id", "b-1")
    assert first["cases_total"] == 2
    # the same cases as CSV: same content hash, accepted
    (tmp_path / "csv").mkdir()
    same_csv = _bom(tmp_path / "csv", "bom.csv", BOM)
    assert load_test_set(same_csv).content_hash() == load_test_set(jsonl).content_hash()
    assert _json("replay", str(same_csv), "--judges", "keyword", "--run-id", "b-2")["cases_total"] == 2
    # other cases under the name "bom": refused, nothing stored changes
    edited = [BOM[0], {**BOM[1], "answer": "The buyer."}]
    other = _bom(tmp_path / "csv", "bom.jsonl", edited)
    res = _invoke("replay", str(other), "--judges", "keyword", "--run-id", "b-3")
    assert res.exit_code == 2, res.output
    assert "error: test set 'bom' is already stored with other cases (sha256:" in res.stderr
    assert "give --name NEW to store this one under another name, or --replace-test-set" in res.stderr
    assert _invoke("runs", "show", "b-3").exit_code == 2  # no run was created
    stored = _json("replay", "--test-set", "bom", "--judges", "keyword", "--run-id", "b-4")
    assert stored["pass_rate"] == 1.0  # the stored answers are still the first file's: both keywords found
    # --name stores it beside; --replace-test-set replaces it
    beside = _json("replay", str(other), "--judges", "keyword", "--name", "bom-v2", "--run-id", "b-5")
    assert beside["test_set"] == "bom-v2"
    replaced = _json("replay", str(other), "--judges", "keyword", "--replace-test-set", "--run-id", "b-6")
    assert replaced["test_set"] == "bom"
    assert replaced["pass_rate"] == 0.5  # "The buyer." lacks the keyword "engineer"
    assert _json("replay", "--test-set", "bom", "--judges", "keyword", "--run-id", "b-7")["pass_rate"] == 0.5
    runs = {r["run_id"]: r["cases_hash"] for r in _json("runs", "list")}
    # every run records the hash of the cases it ran, so history stays interpretable
    assert runs["b-1"] == runs["b-2"] == runs["b-4"] == load_test_set(jsonl).content_hash()
    assert runs["b-5"] == runs["b-6"] == load_test_set(other).content_hash()
    assert runs["b-1"] != runs["b-6"]


def test_judges_with_via_is_rejected(db: str) -> None:
    res = _invoke("replay", str(KESTREL), "--via", "otlp", "--judges", "keyword")
    assert res.exit_code == 2, res.output
    assert "error: --judges cannot be used with --via: serve runs its own configured judges" in res.stderr


@pytest.fixture
def serve_elsewhere(pg_url_session: str) -> Iterator[dict[str, str]]:
    """A real ``ragpulse serve`` writing to another database (the session database), OTLP/HTTP only."""
    http_port, otlp_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_"))}
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        RAGPULSE_STORE_DATABASE_URL=pg_url_session,
        RAGPULSE_OTLP_GRPC_ADDRESS="",
        RAGPULSE_OTLP_HTTP_ADDRESS=f"127.0.0.1:{otlp_port}",
        RAGPULSE_HTTP_ADDRESS=f"127.0.0.1:{http_port}",
        RAGPULSE_API_ADDRESS="",
        RAGPULSE_JUDGE_ENABLED="keyword",
        RAGPULSE_LOG_LEVEL="WARNING",
    )
    proc = subprocess.Popen([sys.executable, "-m", "ragpulse", "serve"], env=env, stderr=subprocess.PIPE)
    try:
        import httpx

        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{http_port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, "serve exited"
            assert time.monotonic() < deadline, "serve did not become ready"
            time.sleep(0.1)
        yield {
            "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{http_port}",
            "RAGPULSE_OTLP_HTTP_ADDRESS": f"127.0.0.1:{otlp_port}",
        }
    finally:
        proc.terminate()
        proc.wait(30)


def test_via_a_serve_that_writes_elsewhere_fails_within_seconds(
    db: str, serve_elsewhere: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in serve_elsewhere.items():
        monkeypatch.setenv(k, v)
    started = time.monotonic()
    res = _invoke("replay", str(KESTREL), "--via", "otlp", "--wait", "300")
    assert time.monotonic() - started < 10
    assert res.exit_code == 2, res.output
    assert "error: serve (http://127.0.0.1:" in res.stderr
    assert "writes to another database (" in res.stderr
    assert "give serve and replay the same RAGPULSE_STORE_DATABASE_URL" in res.stderr


async def _store_event_traces(url: str) -> None:
    """What serve stores for two Kafka events carrying ``runId: ext-1`` (no replay created the run)."""
    store = await PostgresStore.connect(url, Settings(store_database_url=url).store)
    try:
        results = []
        for i, score in enumerate((0.9, 0.2)):
            trace = Trace(
                trace_id=f"{i + 1:032x}",
                question=f"q{i}",
                answer=f"a{i}",
                source=Source.KAFKA,
                run_id="ext-1",
                test_case_id=f"case-{i}",
                attributes={"test_set": "nightly"},
            )
            j = Judgement(
                judge="keyword",
                version="k1",
                backend=Backend.HEURISTIC,
                status=JudgementStatus.OK,
                score=score,
                passed=score >= 0.5,
                threshold=0.5,
            )
            results.append(TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED, judgements=(j,)))
        await store.write_results(results)
    finally:
        await store.close()


def test_runs_show_and_gate_on_a_run_id_sent_with_events(db: str) -> None:
    asyncio.run(_store_event_traces(db))
    shown = _json("runs", "show", "ext-1")
    assert (shown["run_id"], shown["test_set"], shown["cases_total"]) == ("ext-1", "nightly", 2)
    assert shown["pass_rate"] == 0.5
    assert [c["case_id"] for c in shown["cases"]] == ["case-0", "case-1"]
    ok = _invoke("gate", "ext-1", "--min", "pass_rate=0.5")
    assert ok.exit_code == 0, ok.output
    breached = _invoke("gate", "ext-1", "--min", "pass_rate=0.6")
    assert breached.exit_code == 1, breached.output
    missing = _invoke("runs", "show", "nope")
    assert missing.exit_code == 2
    assert "no run 'nope'" in missing.stderr
