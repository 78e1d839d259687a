"""OTLP/gRPC trace receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``.

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
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ragpulse.errors import IngestError
from ragpulse.ingest.otlp.intake import OtlpIntake, Overloaded, bearer_matches, count_rejected

__all__ = ["SERVICE_NAME", "TraceServiceReceiver", "add_receiver"]

_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"]
#: ``opentelemetry.proto.collector.trace.v1.TraceService``.
SERVICE_NAME: str = _SERVICE.full_name


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
        if self._token is not None:
            metadata = dict(context.invocation_metadata() or ())
            if not bearer_matches(metadata.get("authorization"), self._token):
                count_rejected("unauthenticated")
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
        try:
            return await self._intake.handle(
                request, json=False, encoding=None, limit=len(request), transport="grpc"
            )
        except Overloaded as e:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
            raise
        except IngestError as e:
            count_rejected("malformed")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise  # abort raises; this line is never reached


def add_receiver(server: grpc.aio.Server, receiver: TraceServiceReceiver) -> None:
    """Register ``receiver`` on ``server`` under the ``TraceService`` name from the proto descriptor."""
    handler = grpc.unary_unary_rpc_method_handler(
        receiver.Export,
        request_deserializer=None,
        response_serializer=ExportTraceServiceResponse.SerializeToString,
    )
    method = _SERVICE.methods_by_name["Export"].name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, {method: handler}),))
