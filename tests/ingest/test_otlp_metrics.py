"""The OTLP receivers count received and rejected traces on ragpulse's metric instruments."""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ingest.otlp_testutil import MemorySink, fixtures_dir
from ragpulse.config import Settings
from ragpulse.export.otel_setup import install_metrics, render_metrics
from ragpulse.ingest.otlp.receivers import OtlpReceivers

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples() -> Samples:
    out: Samples = {}
    for fam in text_string_to_metric_families(render_metrics().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


@pytest.mark.integration  # slow check (a receiver start-up and the metrics install, ~0.8 s): the integration lane, docs/dev/testing.md
async def test_received_and_rejected_counters() -> None:
    install_metrics(Settings().export)
    before = _samples()
    sink = MemorySink()
    settings = Settings(otlp_grpc_address="", otlp_http_address="127.0.0.1:0", otlp_root_grace_s=0.0)
    doc = json.loads((fixtures_dir() / "otlp-openinference-langchain-rag.json").read_text("utf-8"))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "zz"
    async with OtlpReceivers(settings.otlp, sink) as r:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
            ok = await client.post("/v1/traces", json=doc)
            bad = await client.post("/v1/traces", content=b"[", headers={"Content-Type": "application/json"})
        assert (ok.status_code, bad.status_code) == (200, 400)
        await sink.wait_for(1)
    after = _samples()
    # Received traces are counted once, by the engine at submit (tests/engine); the receivers count rejections.
    assert len(sink.traces) == 1
    assert _delta(before, after, "ragpulse_traces_received_total", source="otlp") == 0
    assert _delta(before, after, "ragpulse_traces_rejected_total", source="otlp", reason="bad_span") == 1
    assert _delta(before, after, "ragpulse_traces_rejected_total", source="otlp", reason="malformed") == 1
