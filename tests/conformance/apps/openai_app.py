"""A RAG app on the plain ``openai`` client, instrumented by one of: OpenInference (``oi``), OpenLLMetry
(``traceloop``), or ``opentelemetry-instrumentation-openai-v2`` with content in log events (``otel-v2``). Usage: ``python openai_app.py <instrumentation>``; the case comes from
``RECORD_CASE`` (see ``common.py``).

Patterns: ``prompt`` (passages pasted into the user message, no retriever), ``stream`` (same, streamed),
``reasoning`` (the model's reply carries ``<think>…</think>`` before the answer), ``system`` (passages in
the system message), ``two-services`` (the call runs in a second service under a W3C remote parent).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import common


def main() -> None:
    inst = sys.argv[1]
    c = common.case()
    service = c.get("service", "hr-assistant")
    os.environ.setdefault("OTEL_SERVICE_NAME", service)
    from opentelemetry import trace

    provider: Any = None
    logs: Any = None
    if inst == "traceloop":
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: F401
        from traceloop.sdk import Traceloop

        Traceloop.init(
            app_name=service, api_endpoint=os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"], disable_batch=False
        )
    else:
        provider = common.tracer_provider(service)
        trace.set_tracer_provider(provider)
        if inst == "oi":
            from openinference.instrumentation.openai import OpenAIInstrumentor

            OpenAIInstrumentor().instrument(tracer_provider=provider)
        else:
            from opentelemetry._logs import set_logger_provider

            # 2.3b0 knows one content mode: "true" puts prompts and completions in log events
            os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
            logs = common.logger_provider(service)
            set_logger_provider(logs)
            try:
                from opentelemetry._events import set_event_logger_provider
                from opentelemetry.sdk._events import EventLoggerProvider

                set_event_logger_provider(EventLoggerProvider(logs))
            except ImportError:
                pass
            from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as V2

            V2().instrument(tracer_provider=provider, logger_provider=logs)

    import openai

    client = openai.OpenAI(max_retries=0)
    rec = common.Record()
    pattern = c["pattern"]

    def rag(question: str) -> tuple[str, Any, list[tuple[str, str]]]:
        docs = common.retrieve(question)
        if pattern == "system":
            messages: list[Any] = [
                {"role": "system", "content": common.SYSTEM.format(context=common.context_block(docs))},
                {"role": "user", "content": question},
            ]
        else:
            messages = [{"role": "user", "content": common.prompt_with_passages(question, docs)}]
        if pattern == "stream":
            stream = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, stream=True, stream_options={"include_usage": True}
            )
            parts: list[str] = []
            usage = None
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
                if chunk.usage is not None:
                    usage = chunk.usage
            return "".join(parts), usage, docs
        out = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        return out.choices[0].message.content or "", out.usage, docs

    for question in c["turns"]:
        if c.get("two_services"):
            answer, usage, docs = common.two_services(rag, question)
        else:
            answer, usage, docs = rag(question)
        if c.get("strip_think"):
            rec.extra["raw_answer"] = answer
            answer = answer.split("</think>", 1)[-1].strip()
        rec.turn(question, docs, answer, usage, documents_in="system" if pattern == "system" else "prompt")
    rec.write()
    if inst == "traceloop":
        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        trace.get_tracer_provider().shutdown()  # type: ignore[attr-defined]
    else:
        provider.shutdown()
        if logs is not None:
            logs.shutdown()


if __name__ == "__main__":
    main()
