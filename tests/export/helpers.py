"""Test helpers: a real HTTP server for an ASGI app, a test-owned OTLP/HTTP logs receiver, metric parsing."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import uvicorn
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from prometheus_client.parser import text_string_to_metric_families


@contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free loopback port in a thread; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(5)
        sock.close()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text → ``{(sample name, frozenset(labels)): value}`` of ragpulse's own metrics.

    prometheus-client's process/GC metrics (``process_*``, ``python_*``) change by themselves and are left out.
    """
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name.startswith(("process_", "python_")):
            continue
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name{labels}`` (exact label set) in ``text``, or ``None``."""
    return samples(text).get((name, frozenset(labels.items())))


def series(text: str, name: str, **match: str) -> list[dict[str, str]]:
    """Label sets of samples named ``name`` whose labels include ``match``."""
    return [
        dict(lbls)
        for (n, lbls), _ in samples(text).items()
        if n == name and all(dict(lbls).get(k) == v for k, v in match.items())
    ]


def attr_value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class OtlpHttpReceiver:
    """A test-owned OTLP/HTTP receiver: ``POST <path>`` with a protobuf body of ``request_type``.

    Each parsed request is handed to :meth:`_received` under ``_lock``. ``gate`` (a ``threading.Event``) holds
    each request until set, to simulate a slow collector. ``url`` is the full endpoint URL.
    """

    path: str
    request_type: type[Any]
    response_type: type[Any]

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.gate.wait(30)
                if self.path != receiver.path or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                req = receiver.request_type()
                req.ParseFromString(body)
                with receiver._lock:
                    receiver._received(req)
                payload = receiver.response_type().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def _received(self, req: Any) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self._server.shutdown()
        self._server.server_close()


class OtlpMetricsReceiver(OtlpHttpReceiver):
    """A test-owned OTLP/HTTP metrics receiver (``POST /v1/metrics``, protobuf); ``requests`` holds them."""

    path = "/v1/metrics"
    request_type = ExportMetricsServiceRequest
    response_type = ExportMetricsServiceResponse

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        super().__init__()

    def _received(self, req: ExportMetricsServiceRequest) -> None:
        self.requests.append(req)

    def metrics(self) -> dict[str, Any]:
        """The last received value of each metric, by name (``Metric`` protobuf messages)."""
        out: dict[str, Any] = {}
        with self._lock:
            for req in self.requests:
                for rm in req.resource_metrics:
                    for sm in rm.scope_metrics:
                        for m in sm.metrics:
                            out[m.name] = m
        return out


class OtlpLogsReceiver(OtlpHttpReceiver):
    """A test-owned OTLP/HTTP logs receiver (``POST /v1/logs``, protobuf) built on ``opentelemetry-proto``.

    ``records`` holds every received ``LogRecord``; ``resources`` their resource attributes; ``requests`` counts
    the export requests.
    """

    path = "/v1/logs"
    request_type = ExportLogsServiceRequest
    response_type = ExportLogsServiceResponse

    def __init__(self) -> None:
        self.records: list[LogRecord] = []
        self.resources: list[dict[str, Any]] = []
        self.requests = 0
        super().__init__()

    def _received(self, req: ExportLogsServiceRequest) -> None:
        self.requests += 1
        for rl in req.resource_logs:
            res = {a.key: attr_value(a.value) for a in rl.resource.attributes}
            for sl in rl.scope_logs:
                for rec in sl.log_records:
                    self.records.append(rec)
                    self.resources.append(res)

    def wait_for(self, n: int, timeout: float = 10.0) -> list[LogRecord]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.records) >= n:
                    return list(self.records)
            time.sleep(0.02)
        with self._lock:
            return list(self.records)
