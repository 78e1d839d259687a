"""Shared by the recorder's apps (run under the recorder's venv, never imported by ragpulse's tests).

The apps are small RAG services. Each reads its case from the environment (set by ``record.py``):
``RECORD_CASE`` (JSON: ``pattern``, ``turns`` = list of questions, ``service`` …), ``OPENAI_BASE_URL`` (the
scripted OpenAI-compatible server), ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the capture server), and
``RECORD_OUT`` (where the app writes what it actually did: per turn the question it asked, the documents its
retriever returned, the answer it received and the usage the server reported). ``expected.json`` is built
from that file, never from ragpulse's mapping.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

#: The knowledge base: id → text.
KB: dict[str, str] = {
    "hr-remote-1": "Employees on probation may work remotely up to two days per week with manager approval.",
    "hr-remote-2": "After probation, employees may work remotely up to four days per week.",
    "hr-leave-1": "Parental leave is sixteen weeks at full pay for all permanent employees.",
    "it-vpn-1": "The VPN client must be updated every ninety days by the IT service desk.",
}

_WORD = re.compile(r"[a-z]+")
_STOP = frozenset(
    "a an the is are be can i my me how many much what while on for of to per in do does it".split()
)


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def retrieve(query: str, k: int = 2) -> list[tuple[str, str]]:
    """Top ``k`` (id, text) by word overlap with ``query`` (ties: KB order); only documents with overlap."""
    q = words(query)
    scored = [(len(q & words(t)), i, doc_id, t) for i, (doc_id, t) in enumerate(KB.items())]
    scored = [s for s in scored if s[0] > 0]
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [(doc_id, t) for _, _, doc_id, t in scored[:k]]


def case() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(os.environ["RECORD_CASE"])
    return data


def prompt_with_passages(question: str, docs: list[tuple[str, str]]) -> str:
    """The user message of the "passages in the user message" pattern."""
    passages = "\n".join(f"[{doc_id}] {text}" for doc_id, text in docs)
    return f"Answer using only these passages.\n\n{passages}\n\nQuestion: {question}"


SYSTEM = "You are the HR assistant. Answer from the context only.\n\nContext:\n{context}"


def context_block(docs: list[tuple[str, str]]) -> str:
    return "\n".join(text for _, text in docs)


class Record:
    """What the app did, turn by turn; written to ``RECORD_OUT`` as JSON."""

    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}

    def turn(
        self,
        question: str,
        docs: list[tuple[str, str]],
        answer: str,
        usage: Any = None,
        *,
        documents_in: str = "retriever",
        session_id: str | None = None,
        sources: dict[str, str] | None = None,
    ) -> None:
        u = None
        if usage is not None:
            get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
            u = {"prompt_tokens": get("prompt_tokens"), "completion_tokens": get("completion_tokens")}
        self.turns.append(
            {
                "question": question,
                "documents": [
                    {"id": i, "text": t, **({"source": sources[i]} if sources and i in sources else {})}
                    for i, t in docs
                ],
                "documents_in": documents_in,
                "answer": answer,
                "usage": u,
                "session_id": session_id,
            }
        )

    def write(self) -> None:
        with open(os.environ["RECORD_OUT"], "w", encoding="utf-8") as f:
            json.dump({"turns": self.turns, **self.extra}, f, indent=2, ensure_ascii=False)


def tracer_provider(service: str) -> Any:
    """An SDK TracerProvider exporting OTLP/HTTP protobuf to the capture server (batch processor, as apps do)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def logger_provider(service: str) -> Any:
    """An SDK LoggerProvider exporting OTLP/HTTP protobuf logs to the capture server."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    provider = LoggerProvider(resource=Resource.create({"service.name": service}))
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    return provider


def two_services(rag: Any, question: str) -> Any:
    """Run ``rag(question)`` inside a second "service": a front service (its own provider, ``gateway``) calls
    an HTTP endpoint of this process with a W3C ``traceparent``; the handler extracts it and runs ``rag`` under
    the remote parent. Returns what ``rag`` returned."""
    import http.server
    import threading
    import urllib.request

    from opentelemetry import context as otel_context
    from opentelemetry import propagate

    result: dict[str, Any] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            ctx = propagate.extract(dict(self.headers))
            token = otel_context.attach(ctx)
            try:
                result["value"] = rag(json.loads(body)["question"])
            finally:
                otel_context.detach(token)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    front = tracer_provider("gateway")
    tracer = front.get_tracer("gateway.http")
    with tracer.start_as_current_span("POST /ask", kind=2) as span:  # SpanKind.CLIENT
        span.set_attribute("http.request.method", "POST")
        headers = {"content-type": "application/json"}
        propagate.inject(headers)
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.server_address[1]}/ask",
            data=json.dumps({"question": question}).encode(),
            headers=headers,
        )
        urllib.request.urlopen(req).read()
    server.shutdown()
    front.shutdown()
    return result["value"]
