"""A LlamaIndex RAG app instrumented by OpenInference (``oi``). Usage: ``python llamaindex_app.py oi``.

A keyword retriever (``BaseRetriever``) over the knowledge base, ``llama_index.llms.openai.OpenAI`` against the
scripted server. Patterns: ``plain`` (``RetrieverQueryEngine``: the default QA template puts the passages in
the user message), ``stream`` (the same, ``streaming=True``), ``condense`` (``CondenseQuestionChatEngine``, two
turns: the second is condensed with the history before retrieval), ``agent`` (``FunctionAgent`` with a
``search_kb`` tool returning the passages as a JSON list).
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
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        LlamaIndexInstrumentor().instrument(tracer_provider=provider)

    from llama_index.core import Settings
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.chat_engine import CondenseQuestionChatEngine
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.llms.openai import OpenAI

    found: list[list[tuple[str, str]]] = []

    class KbRetriever(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            docs = common.retrieve(query_bundle.query_str)
            found.append(docs)
            return [
                NodeWithScore(node=TextNode(id_=i, text=t), score=1.0 / (r + 1))
                for r, (i, t) in enumerate(docs)
            ]

    llm = OpenAI(model="gpt-4o-mini", api_base=os.environ["OPENAI_BASE_URL"], max_retries=0)
    Settings.llm = llm
    engine = RetrieverQueryEngine.from_args(KbRetriever(), llm=llm, streaming=c["pattern"] == "stream")
    rec = common.Record()
    if c["pattern"] == "agent":
        import asyncio
        import json

        from llama_index.core.agent.workflow import FunctionAgent

        def search_kb(query: str) -> str:
            """Search the HR knowledge base; returns the matching passages as JSON."""
            docs = common.retrieve(query)
            found.append(docs)
            return json.dumps([{"id": i, "text": t} for i, t in docs])

        agent = FunctionAgent(tools=[search_kb], llm=llm, system_prompt="You are the HR assistant.")

        async def ask(question: str) -> Any:
            return await agent.run(user_msg=question)  # the workflow needs a running loop when started

        for question in c["turns"]:
            result: Any = asyncio.run(ask(question))
            rec.turn(question, found[-1], str(result.response.content), None)
    elif c["pattern"] == "condense":
        chat = CondenseQuestionChatEngine.from_defaults(query_engine=engine, llm=llm)
        for question in c["turns"]:
            resp: Any = chat.chat(question)
            rec.turn(question, found[-1], str(resp.response), None)
    else:
        for question in c["turns"]:
            resp = engine.query(question)
            answer = "".join(resp.response_gen) if c["pattern"] == "stream" else str(resp.response)
            rec.turn(question, found[-1], answer, None)
    rec.write()
    provider.force_flush()
    provider.shutdown()


if __name__ == "__main__":
    main()
