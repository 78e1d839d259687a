"""OTLP/gRPC receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` and
``opentelemetry.proto.collector.logs.v1.LogsService/Export`` (``gen_ai`` event log records joined to their
spans, :mod:`ragpulse.ingest.otlp.logs`; same token, size and availability rules).

The servicer implements ``TraceServiceServicer`` from ``opentelemetry-proto``'s generated
``trace_service_pb2_grpc``. It is registered with the service and method names taken from the proto
descriptor, but with a raw-bytes request deserializer, so a payload that is not a valid
``ExportTraceServiceRequest`` answers ``INVALID_ARGUMENT`` (grpc's own deserializer would answer ``INTERNAL``).
Size limits are grpc's ``max_receive_message_length`` (``RESOURCE_EXHAUSTED``); gzip is handled by grpc.
While the assembler is full the answer is ``UNAVAILABLE`` (retryable for OTLP exporters); with a token
configured, a call without ``authorization: Bearer <token>`` metadata answers ``UNAUTHENTICATED``.
"""

from __future__ import annotations

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragpulse.authcheck import bearer_matches, refused
from ragpulse.errors import IngestError, PayloadTooLarge
from ragpulse.ingest.otlp.intake import OtlpIntake, Overloaded, count_rejected

__all__ = ["LOGS_SERVICE_NAME", "SERVICE_NAME", "TraceServiceReceiver", "add_receiver"]

_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"]
#: ``opentelemetry.proto.collector.trace.v1.TraceService``.
SERVICE_NAME: str = _SERVICE.full_name
_LOGS_SERVICE = logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"]
#: ``opentelemetry.proto.collector.logs.v1.LogsService``.
LOGS_SERVICE_NAME: str = _LOGS_SERVICE.full_name


class TraceServiceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """``TraceService`` implementation feeding an :class:`~ragpulse.ingest.otlp.intake.OtlpIntake`.

    Args:
        intake: where decoded requests go.
        token: when set, every call needs the metadata ``authorization: Bearer <token>`` (else
            ``UNAUTHENTICATED``).
    """

    def __init__(self, intake: OtlpIntake, token: str | None = None) -> None:
        self._intake = intake
        self._token = token

    async def Export(self, request: bytes, context: grpc.aio.ServicerContext) -> ExportTraceServiceResponse:
        """Decode and accept one request; ``INVALID_ARGUMENT`` when it cannot be decoded."""
        await self._check_token(context)
        try:
            return await self._intake.handle(
                request, json=False, encoding=None, limit=len(request), transport="grpc"
            )
        except Overloaded as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
            raise
        except PayloadTooLarge as e:
            count_rejected("too_large")
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
            raise
        except IngestError as e:
            count_rejected("malformed")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise  # abort raises; this line is never reached

    async def ExportLogs(
        self, request: bytes, context: grpc.aio.ServicerContext
    ) -> ExportLogsServiceResponse:
        """``LogsService/Export``: decode and accept one logs request (see the module docstring)."""
        await self._check_token(context)
        try:
            return await self._intake.handle_logs(
                request, json=False, encoding=None, limit=len(request), transport="grpc"
            )
        except Overloaded as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
            raise
        except IngestError as e:
            count_rejected("malformed")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise

    async def _check_token(self, context: grpc.aio.ServicerContext) -> None:
        if self._token is not None:
            metadata = dict(context.invocation_metadata() or ())
            auth = metadata.get("authorization")
            if not bearer_matches(auth, self._token):
                count_rejected("unauthenticated")
                refused("otlp_grpc", "wrong" if auth else "missing", where="grpc", client=context.peer())
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")


def add_receiver(server: grpc.aio.Server, receiver: TraceServiceReceiver) -> None:
    """Register ``receiver`` on ``server`` under the ``TraceService`` and ``LogsService`` names from the proto
    descriptors."""
    handler = grpc.unary_unary_rpc_method_handler(
        receiver.Export,
        request_deserializer=None,
        response_serializer=ExportTraceServiceResponse.SerializeToString,
    )
    method = _SERVICE.methods_by_name["Export"].name
    logs_handler = grpc.unary_unary_rpc_method_handler(
        receiver.ExportLogs,
        request_deserializer=None,
        response_serializer=ExportLogsServiceResponse.SerializeToString,
    )
    logs_method = _LOGS_SERVICE.methods_by_name["Export"].name
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(SERVICE_NAME, {method: handler}),
            grpc.method_handlers_generic_handler(LOGS_SERVICE_NAME, {logs_method: logs_handler}),
        )
    )
