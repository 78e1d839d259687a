"""A Haystack 2 RAG pipeline instrumented by OpenInference (``oi``). Usage: ``python haystack_app.py oi``.

Pipeline: a keyword retriever component → ``ChatPromptBuilder`` (passages in the system message, or, for
pattern ``prompt``, in the user message with a ``Question:`` line) → ``OpenAIChatGenerator`` against the
scripted server.
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
    from opentelemetry import trace

    provider = common.tracer_provider(service)
    trace.set_tracer_provider(provider)
    if inst == "oi":
        from openinference.instrumentation.haystack import HaystackInstrumentor

        HaystackInstrumentor().instrument(tracer_provider=provider)

    from haystack import Document, Pipeline, component
    from haystack.components.builders import ChatPromptBuilder
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack.utils import Secret

    found: list[list[tuple[str, str]]] = []

    @component
    class KbRetriever:
        @component.output_types(documents=list[Document])
        def run(self, query: str) -> dict[str, Any]:
            docs = common.retrieve(query)
            found.append(docs)
            return {"documents": [Document(id=i, content=t) for i, t in docs]}

    globals()["KbRetriever"] = (
        KbRetriever  # OpenInference wraps <module>.<class>.run: the class must be reachable
    )
    passages = "{% for d in documents %}{{ d.content }}\n{% endfor %}"
    if c["pattern"] == "prompt":
        template = [
            ChatMessage.from_user(
                f"Answer using only these passages.\n\n{passages}\nQuestion: {{{{question}}}}"
            )
        ]
    else:
        template = [
            ChatMessage.from_system(
                "You are the HR assistant. Answer from the context only.\n\nContext:\n" + passages
            ),
            ChatMessage.from_user("{{question}}"),
        ]
    pipe = Pipeline()
    pipe.add_component("retriever", KbRetriever())
    pipe.add_component(
        "prompt", ChatPromptBuilder(template=template, required_variables=["question", "documents"])
    )
    pipe.add_component(
        "llm",
        OpenAIChatGenerator(
            api_key=Secret.from_env_var("OPENAI_API_KEY"),
            api_base_url=os.environ["OPENAI_BASE_URL"],
            model="gpt-4o-mini",
        ),
    )
    pipe.connect("retriever.documents", "prompt.documents")
    pipe.connect("prompt.prompt", "llm.messages")
    rec = common.Record()
    for question in c["turns"]:
        out = pipe.run({"retriever": {"query": question}, "prompt": {"question": question}})
        reply = out["llm"]["replies"][0]
        rec.turn(question, found[-1], reply.text or "", reply.meta.get("usage"))
    rec.write()
    provider.force_flush()
    provider.shutdown()


if __name__ == "__main__":
    main()
