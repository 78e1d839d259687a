"""Send traces to an OTLP receiver (ragpulse's own, or a Collector) as OpenInference spans.

For ``ragpulse send FILE`` and ``ragpulse replay --via otlp``::

    async with OtlpTraceClient("http://127.0.0.1:4318") as client:      # or "grpc://127.0.0.1:4317"
        await client.send(traces)

Each trace becomes the spans of :func:`~ragpulse.ingest.otlp.encode.trace_to_openinference_spans`; one
``send`` call is one export request (protobuf, gzip over HTTP).
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from types import TracebackType
from typing import Self

import grpc
import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

from ragpulse.errors import IngestError
from ragpulse.ingest.otlp.encode import trace_to_openinference_spans
from ragpulse.model import Trace

__all__ = ["OtlpTraceClient", "build_request"]


def build_request(traces: Sequence[Trace]) -> ExportTraceServiceRequest:
    """One ``ExportTraceServiceRequest`` holding the spans of every trace."""
    req = ExportTraceServiceRequest()
    for t in traces:
        req.resource_spans.extend(trace_to_openinference_spans(t).resource_spans)
    return req


class OtlpTraceClient:
    """OTLP trace sender over HTTP (``http://host:port``; ``/v1/traces`` is appended unless the URL has a
    path) or gRPC (``grpc://host:port``, plaintext).

    Args:
        endpoint: the receiver URL.
        timeout_s: per-request timeout, seconds.
        token: bearer token the receiver requires (``RAGPULSE_OTLP_TOKEN``): ``Authorization: Bearer …`` over
            HTTP, the ``authorization`` metadata key over gRPC.

    Raises:
        ValueError: an endpoint with another scheme.
    """

    def __init__(self, endpoint: str, timeout_s: float = 10.0, *, token: str | None = None) -> None:
        self._timeout = timeout_s
        self._auth = f"Bearer {token}" if token else None
        self._http: httpx.AsyncClient | None = None
        self._channel: grpc.aio.Channel | None = None
        url = httpx.URL(endpoint)
        if url.scheme in ("http", "https"):
            self._url = str(url if url.path not in ("", "/") else url.join("/v1/traces"))
            self._grpc_target: str | None = None
        elif url.scheme == "grpc":
            self._url = ""
            self._grpc_target = f"{url.host}:{url.port or 4317}"
        else:
            raise ValueError(f"OTLP endpoint must be http://, https:// or grpc://, got {endpoint!r}")

    async def __aenter__(self) -> Self:
        if self._grpc_target is not None:
            self._channel = grpc.aio.insecure_channel(self._grpc_target)
        else:
            headers = {"Authorization": self._auth} if self._auth else None
            self._http = httpx.AsyncClient(timeout=self._timeout, headers=headers)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection. Idempotent."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def send(self, traces: Sequence[Trace]) -> int:
        """Export ``traces`` in one request. Returns the receiver's ``partial_success.rejected_spans``.

        Raises:
            IngestError: the receiver answered an error (``retriable`` for HTTP 429/502/503/504 and gRPC
                UNAVAILABLE/DEADLINE_EXCEEDED) or could not be reached (retriable).
            RuntimeError: used outside ``async with``.
        """
        req = build_request(traces)
        if self._channel is not None:
            return await self._send_grpc(req)
        if self._http is None:
            raise RuntimeError("OtlpTraceClient used outside 'async with'")
        try:
            resp = await self._http.post(
                self._url,
                content=gzip.compress(req.SerializeToString()),
                headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
            )
        except httpx.HTTPError as e:
            raise IngestError(f"OTLP export to {self._url} failed: {e}", retriable=True) from e
        if resp.status_code != 200:
            raise IngestError(
                f"OTLP export to {self._url} answered {resp.status_code}: {resp.text[:200]}",
                retriable=resp.status_code in (429, 502, 503, 504),
            )
        return int(ExportTraceServiceResponse.FromString(resp.content).partial_success.rejected_spans)

    async def _send_grpc(self, req: ExportTraceServiceRequest) -> int:
        stub = TraceServiceStub(self._channel)  # type: ignore[no-untyped-call]
        try:
            metadata = (("authorization", self._auth),) if self._auth else None
            resp = await stub.Export(req, timeout=self._timeout, metadata=metadata)
        except grpc.aio.AioRpcError as e:
            retriable = e.code() in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.DEADLINE_EXCEEDED,
            )
            raise IngestError(
                f"OTLP export to {self._grpc_target} failed: {e.code().name}", retriable=retriable
            ) from e
        return int(resp.partial_success.rejected_spans)
