"""Issue 11 item 16: optional OTLP receiver authentication (bearer token on HTTP, ``authorization`` metadata
on gRPC), TLS for both, and the exposure warning / ``/readyz`` report, on real sockets."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import structlog
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest.otlp_testutil import MemorySink
from ingest.serve_testutil import ServeProcess
from ragpulse.config import Settings
from ragpulse.errors import ConfigError, IngestError
from ragpulse.ingest.otlp.decode import decode_json
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from testsupport import free_port

TOKEN = "s3cret-otlp-token"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
BODY = json.dumps(
    {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "b7ad6b7169203331",
                                "name": "rag",
                                "attributes": [
                                    {"key": "input.value", "value": {"stringValue": "q?"}},
                                    {"key": "output.value", "value": {"stringValue": "a."}},
                                    {"key": "openinference.span.kind", "value": {"stringValue": "CHAIN"}},
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
).encode()
PROTO = decode_json(BODY).request.SerializeToString()
#: The same trace under another trace id (a second trace, not late spans of the first).
PROTO_2 = decode_json(
    BODY.replace(b"0af7651916cd43dd8448eb211c80319c", b"1" * 32)
).request.SerializeToString()
JSON = {"Content-Type": "application/json"}


def _settings(**over: Any) -> Settings:
    base: dict[str, Any] = {
        "otlp_grpc_address": "127.0.0.1:0",
        "otlp_http_address": "127.0.0.1:0",
        "otlp_root_grace_s": 0.0,
    }
    base.update(over)
    return Settings(**base)


@pytest.fixture
async def with_token() -> AsyncIterator[tuple[OtlpReceivers, MemorySink]]:
    sink = MemorySink()
    async with OtlpReceivers(_settings(otlp_token=TOKEN).otlp, sink) as r:
        yield r, sink


async def test_http_requires_the_bearer_token(with_token: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = with_token
    assert r.auth == "token"
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
        missing = await client.post("/v1/traces", content=BODY, headers=JSON)
        wrong = await client.post(
            "/v1/traces", content=BODY, headers={**JSON, "Authorization": "Bearer nope"}
        )
        basic = await client.post(
            "/v1/traces", content=BODY, headers={**JSON, "Authorization": f"Basic {TOKEN}"}
        )
        ok = await client.post(
            "/v1/traces", content=BODY, headers={**JSON, "Authorization": f"Bearer {TOKEN}"}
        )
    assert [missing.status_code, wrong.status_code, basic.status_code, ok.status_code] == [401, 401, 401, 200]
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert missing.json()["code"] == grpc.StatusCode.UNAUTHENTICATED.value[0]
    (trace,) = await sink.wait_for(1)
    assert trace.question == "q?"
    assert r.intake.spans_accepted == 1


async def test_grpc_requires_the_authorization_metadata(with_token: tuple[OtlpReceivers, MemorySink]) -> None:
    r, sink = with_token
    async with grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel:
        export = channel.unary_unary(EXPORT, response_deserializer=ExportTraceServiceResponse.FromString)
        for metadata in [(), (("authorization", "Bearer nope"),)]:
            with pytest.raises(grpc.aio.AioRpcError) as ei:
                await export(PROTO, timeout=5, metadata=metadata)
            assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED
        await export(PROTO, timeout=5, metadata=(("authorization", f"Bearer {TOKEN}"),))
    await sink.wait_for(1)
    assert r.intake.spans_accepted == 1


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_tls_on_both_receivers_with_token(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    sink = MemorySink()
    settings = _settings(otlp_token=TOKEN, otlp_tls_cert_file=cert, otlp_tls_key_file=key)
    async with OtlpReceivers(settings.otlp, sink) as r:
        async with httpx.AsyncClient(
            base_url=f"https://127.0.0.1:{r.http_port}", verify=ssl.create_default_context(cafile=cert)
        ) as client:
            resp = await client.post(
                "/v1/traces", content=BODY, headers={**JSON, "Authorization": f"Bearer {TOKEN}"}
            )
        assert resp.status_code == 200
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as plain:
            with pytest.raises(httpx.HTTPError):  # plain HTTP to a TLS port is not served
                await plain.post("/v1/traces", content=BODY, headers=JSON)
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        async with grpc.aio.secure_channel(f"localhost:{r.grpc_port}", creds) as channel:
            export = channel.unary_unary(EXPORT, response_deserializer=ExportTraceServiceResponse.FromString)
            resp = await export(PROTO_2, timeout=10, metadata=(("authorization", f"Bearer {TOKEN}"),))
        assert not resp.HasField("partial_success")
        await sink.wait_for(2)
    assert r.intake.spans_accepted == 2


async def test_tls_files_that_cannot_be_loaded_are_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "missing.pem"
    with pytest.raises(ConfigError, match="TLS"):
        async with OtlpReceivers(_settings(otlp_tls_cert_file=bad, otlp_tls_key_file=bad).otlp, MemorySink()):
            pass
    with pytest.raises(ValueError, match="together"):
        _settings(otlp_tls_cert_file=bad)


@pytest.mark.integration  # slow check (three receiver start-ups, ~1 s): the integration lane, docs/dev/testing.md
async def test_exposed_without_token_warns_once_and_loopback_does_not() -> None:
    with structlog.testing.capture_logs() as logs:
        async with OtlpReceivers(_settings(otlp_http_address="0.0.0.0:0").otlp, MemorySink()) as r:
            assert r.auth == "none"
        async with OtlpReceivers(_settings().otlp, MemorySink()):
            pass
        async with OtlpReceivers(
            _settings(otlp_http_address="0.0.0.0:0", otlp_token=TOKEN).otlp, MemorySink()
        ):
            pass
    warnings = [e for e in logs if e["event"] == "otlp_receivers_unauthenticated"]
    assert len(warnings) == 1
    assert warnings[0]["log_level"] == "warning"
    assert warnings[0]["addresses"] == ["0.0.0.0:0"]
    assert TOKEN not in json.dumps(logs, default=str)


def test_serve_reports_otlp_auth_on_readyz(pg_url: str) -> None:
    """``serve`` bound to 0.0.0.0 without a token: one warning line and ``"otlp_auth": "none"``."""
    http_port = free_port()
    env = {
        "RAGPULSE_STORE_DATABASE_URL": pg_url,
        "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{http_port}",
        "RAGPULSE_OTLP_HTTP_ADDRESS": f"0.0.0.0:{free_port()}",
        "RAGPULSE_OTLP_GRPC_ADDRESS": "",
        "RAGPULSE_JUDGE_ENABLED": "keyword",
        "RAGPULSE_LOG_LEVEL": "INFO",
    }
    proc = ServeProcess(env)
    try:
        proc.start()
        ready = httpx.get(f"http://127.0.0.1:{http_port}/readyz", timeout=10).json()
        assert ready["otlp_auth"] == "none"
        assert len(proc.events("otlp_receivers_unauthenticated")) == 1
        assert proc.terminate(timeout=30) == 0
        proc.env["RAGPULSE_OTLP_TOKEN"] = TOKEN
        proc.start()
        ready = httpx.get(f"http://127.0.0.1:{http_port}/readyz", timeout=10).json()
        assert ready["otlp_auth"] == "token"
        assert proc.events("otlp_receivers_unauthenticated") == []
        assert all(TOKEN not in json.dumps(e) for e in proc.logs)
        assert proc.terminate(timeout=30) == 0
    finally:
        proc.close()


async def test_send_and_replay_via_otlp_carry_the_token(with_token: tuple[OtlpReceivers, MemorySink]) -> None:
    from ragpulse.ingest.publish import publish_otlp
    from ragpulse.model import Trace

    r, sink = with_token
    trace = Trace(trace_id="2" * 32, question="q?", answer="a.")
    url = f"http://127.0.0.1:{r.http_port}"
    with pytest.raises(IngestError, match="401"):
        await publish_otlp(Settings().otlp, [trace], url)
    assert await publish_otlp(Settings(otlp_token=TOKEN).otlp, [trace], url) == 1
    (got,) = await sink.wait_for(1)
    assert got.trace_id == "2" * 32


@pytest.mark.integration  # slow check (the metrics install and two receivers, ~1 s): docs/dev/testing.md
async def test_refused_attempts_are_counted_by_listener_and_logged_without_the_token(
    with_token: tuple[OtlpReceivers, MemorySink],
) -> None:
    """Over HTTP one request without a token and one with ``Bearer nope``, over gRPC the same two: each is
    +1 on ``ragpulse_auth_refused_total{listener, reason}`` and one WARNING ``auth_failed`` that holds neither
    the presented token nor the configured one; the right token is not counted."""
    from prometheus_client.parser import text_string_to_metric_families

    from ragpulse.export.otel_setup import install_metrics, render_metrics

    def refused() -> dict[tuple[str, str], float]:
        return {
            (s.labels["listener"], s.labels["reason"]): s.value
            for fam in text_string_to_metric_families(render_metrics().decode())
            for s in fam.samples
            if s.name == "ragpulse_auth_refused_total"
        }

    install_metrics(Settings().export)
    r, sink = with_token
    before = refused()
    with structlog.testing.capture_logs() as logs:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{r.http_port}") as client:
            for auth in [{}, {"Authorization": "Bearer nope"}, {"Authorization": f"Bearer {TOKEN}"}]:
                await client.post("/v1/traces", content=BODY, headers={**JSON, **auth})
        async with grpc.aio.insecure_channel(f"127.0.0.1:{r.grpc_port}") as channel:
            export = channel.unary_unary(EXPORT, response_deserializer=ExportTraceServiceResponse.FromString)
            for metadata in [(), (("authorization", "Bearer nope"),)]:
                with pytest.raises(grpc.aio.AioRpcError):
                    await export(PROTO_2, timeout=5, metadata=metadata)
    after = refused()
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    assert {k: v for k, v in delta.items() if v} == {
        ("otlp_http", "missing"): 1.0,
        ("otlp_http", "wrong"): 1.0,
        ("otlp_grpc", "missing"): 1.0,
        ("otlp_grpc", "wrong"): 1.0,
    }
    failed = [e for e in logs if e["event"] == "auth_failed"]
    assert [(e["listener"], e["reason"], e["where"], e["log_level"]) for e in failed] == [
        ("otlp_http", "missing", "http", "warning"),
        ("otlp_http", "wrong", "http", "warning"),
        ("otlp_grpc", "missing", "grpc", "warning"),
        ("otlp_grpc", "wrong", "grpc", "warning"),
    ]
    assert failed[0]["client"] == "127.0.0.1"
    assert not any("nope" in str(e) or TOKEN in str(e) for e in logs)
    await sink.wait_for(1)
