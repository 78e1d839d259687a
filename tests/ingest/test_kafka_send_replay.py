"""``ragpulse send`` and ``ragpulse replay --via kafka|otlp`` as real processes against real sources."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from ingest.kafka_testutil import REPO, RecordingSink, create_topic, read_topic
from ingest.serve_testutil import ServeProcess
from ragpulse.config import Settings
from ragpulse.ingest.otlp import OtlpReceivers
from testsupport import free_port, shared_dir, wait_until


def _cli(args: list[str], env: dict[str, str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_"))}
    full.update(env)
    full["PYTHONPATH"] = str(REPO / "src")
    full["RAGPULSE_LOG_JSON"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "ragpulse", *args], env=full, capture_output=True, text=True, timeout=timeout
    )


def _fixture_file() -> str:
    fx = shared_dir() / "fixtures" / "kafka-events.jsonl"
    return str(fx)


async def test_send_to_kafka_publishes_lines_keyed_by_trace_id(kafka_bootstrap: str, topic: str) -> None:
    path = _fixture_file()
    await create_topic(kafka_bootstrap, topic, 3)
    r = await asyncio.to_thread(
        _cli,
        ["send", path, "--to", "kafka", "--topic", topic],
        {"RAGPULSE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"sent 9 events to Kafka topic {topic}"
    recs = await read_topic(kafka_bootstrap, topic, 9)
    lines = Path(path).read_bytes().splitlines()  # noqa: ASYNC240 - a small local file
    assert sorted(x.value for x in recs) == sorted(lines)
    keys = {x.value: x.key for x in recs}
    assert keys[lines[0]] == b"4a1f7c2e9b3d4e8fa0c1d2e3f4a5b6c7"
    assert keys[lines[6]] is None  # the truncated line has no readable trace id
    # Same key → same partition: the redelivered line 8 lands next to line 1.
    part = {x.value: x.partition for x in recs}
    assert part[lines[0]] == part[lines[7]]


async def test_send_to_kafka_reports_bad_lines_and_goes_on(
    kafka_bootstrap: str, topic: str, tmp_path: Path
) -> None:
    """A trace id with a lone surrogate used to crash send (UnicodeEncodeError); an oversized event stopped it."""
    await create_topic(kafka_bootstrap, topic, 1)
    big = json.dumps({"traceId": "big", "question": "q", "answer": "x" * 1_200_000}).encode()
    path = tmp_path / "events.jsonl"
    path.write_bytes(
        b'{"traceId": "first", "question": "q", "answer": "a"}\n'
        b'{"traceId": "half-\\ud83d", "question": "q", "answer": "a"}\n'
        + big
        + b'\n{"traceId": "last", "question": "q", "answer": "a"}\n'
    )
    r = await asyncio.to_thread(
        _cli,
        ["send", str(path), "--to", "kafka", "--topic", topic],
        # producer limit: max(max message bytes + 64 KiB, 1 MiB) = 1 MiB < the 1.2 MB event
        {"RAGPULSE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "RAGPULSE_KAFKA_MAX_MESSAGE_BYTES": "1000"},
    )
    assert "Traceback" not in r.stderr
    assert r.returncode == 2, r.stderr  # some lines were skipped: an input error (docs/cli.md), the rest sent
    assert r.stdout.strip() == f"sent 3 events to Kafka topic {topic} (1 lines skipped)"
    assert "line 3: skipped: too_large: MessageSizeTooLargeError" in r.stderr
    recs = await read_topic(kafka_bootstrap, topic, 3)
    assert [x.key for x in recs] == [b"first", "half-\ufffd".encode(), b"last"]


@pytest.mark.integration  # slow check (a CLI subprocess, ~2 s CPU): the integration lane, docs/dev/testing.md
async def test_send_to_otlp_posts_openinference_spans(tmp_path: object) -> None:
    path = _fixture_file()
    sink = RecordingSink(100)
    port = free_port()
    s = Settings(otlp_grpc_address="", otlp_http_address=f"127.0.0.1:{port}", otlp_root_grace_s=0.1)
    async with OtlpReceivers(s.otlp, sink):
        r = await asyncio.to_thread(
            _cli, ["send", path, "--to", "otlp", "--endpoint", f"http://127.0.0.1:{port}"], {}
        )
        await wait_until(lambda: len(sink.acked) >= 7, 20, "the 7 traces to be acknowledged")
    await sink.close()
    assert r.returncode == 2  # line 7 is not JSON: reported and skipped (an input error; the rest is sent)
    assert "line 7: skipped: not_json" in r.stderr
    assert r.stdout.strip() == "sent 8 traces as OTLP spans (1 lines skipped)"
    by_id = {t.trace_id: t for t in sink.acked}
    # Line 8 re-sends line 1 with the same (derived) span ids: the receiver assembles one trace from both.
    assert len(sink.acked) == len(by_id) == 7
    t = by_id["4a1f7c2e9b3d4e8fa0c1d2e3f4a5b6c7"]
    assert t.source.value == "otlp"
    assert t.question == "How many days per week can I work remotely while I'm still on probation?"
    assert t.doc_ids == [
        "hr-remote-work-policy-v3#s4.2",
        "hr-remote-work-policy-v3#s4.1",
        "it-security-standard#s7.3",
    ]
    assert t.app == "hr-assistant"
    assert (t.answer or "").startswith("While you're on probation")
    assert by_id["9f6c2173e4804d3f8516273849ad0e1c"].question is None


@pytest.fixture
def serve() -> Iterator[list[ServeProcess]]:
    made: list[ServeProcess] = []
    yield made
    for p in made:
        p.close()


async def test_replay_via_kafka_and_otlp_through_serve(
    kafka_bootstrap: str, topic: str, pg_url: str, serve: list[ServeProcess]
) -> None:
    await create_topic(kafka_bootstrap, topic, 2)
    http_port, otlp_port = free_port(), free_port()
    env = {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "RAGPULSE_KAFKA_TOPICS": topic,
        "RAGPULSE_KAFKA_GROUP_ID": f"g-{uuid.uuid4().hex[:8]}",
        "RAGPULSE_OTLP_GRPC_ADDRESS": "",
        "RAGPULSE_OTLP_HTTP_ADDRESS": f"127.0.0.1:{otlp_port}",
        "RAGPULSE_OTLP_ROOT_GRACE_S": "0.2",
        "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{http_port}",
        "RAGPULSE_API_ADDRESS": "",  # no portal (its default port may be taken by another test)
        "RAGPULSE_JUDGE_ENABLED": "relevancy,faithfulness,keyword",
        # issue 11 item 14: replayed traces carry their run id on the wire and are always judged
        "RAGPULSE_ENGINE_SAMPLING_RATE": "0.2",
    }
    proc = ServeProcess(env)
    serve.append(proc)
    proc.start()
    async with httpx.AsyncClient() as http:
        r = await http.get(f"http://127.0.0.1:{http_port}/readyz")
        assert r.json()["checks"] == {"store": True, "running": True, "otlp": True, "kafka": True}
    testset = str(REPO / "examples" / "kestrel_kb.jsonl")
    reports = {}
    for via in ("kafka", "otlp"):
        run_id = f"via-{via}-{uuid.uuid4().hex[:6]}"
        run = await asyncio.to_thread(
            _cli, ["replay", testset, "--via", via, "--run-id", run_id, "--json", "--wait", "90"], env, 150.0
        )
        assert run.returncode in (0, 1), run.stderr[-2000:]
        rep = json.loads(run.stdout)
        assert rep["run_id"] == run_id
        assert rep["via"] == via
        assert rep["cases_total"] == 17
        assert rep["status"] == "completed"
        assert rep["coverage"] > 0
        reports[via] = rep
    # The two paths judge the same synthetic traces alike (same judges, same inputs).
    assert reports["kafka"]["pass_rate"] == reports["otlp"]["pass_rate"]
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch("SELECT source, run_id, count(*) AS n FROM traces GROUP BY source, run_id")
        not_sampled = await conn.fetchval("SELECT count(*) FROM traces WHERE outcome = 'not_sampled'")
        runs = await conn.fetch("SELECT run_id, status FROM runs")
    finally:
        await conn.close()
    got = {(r["source"], r["run_id"].split("-")[1]): r["n"] for r in rows}
    assert got == {("kafka", "kafka"): 17, ("otlp", "otlp"): 17}
    assert {r["status"] for r in runs} == {"completed"}
    assert not_sampled == 0  # 8 of 10 were not_sampled at rate 0.2 before
    assert proc.terminate() == 0
