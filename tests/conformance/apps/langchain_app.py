"""A LangChain RAG app (LCEL), instrumented by OpenInference (``oi``) or OpenLLMetry (``traceloop``).
Usage: ``python langchain_app.py <instrumentation>``; the case comes from ``RECORD_CASE``.

Patterns: ``plain`` (retriever → prompt with the documents in the system message → ChatOpenAI), ``condense``
(a condense-question call rewrites a follow-up from the chat history, then retrieve and answer; one session,
two turns), ``stream`` (the plain chain, streamed), ``agent`` (``langchain.agents.create_agent``, a ReAct-style
tool-calling agent whose ``search_kb`` tool returns the passages as a JSON list); ``two_services`` runs it under a
W3C remote parent.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any

import common


def main() -> None:
    inst = sys.argv[1]
    c = common.case()
    service = c.get("service", "hr-assistant")
    os.environ.setdefault("OTEL_SERVICE_NAME", service)
    from opentelemetry import trace

    provider: Any = None
    if inst == "traceloop":
        from traceloop.sdk import Traceloop

        Traceloop.init(app_name=service, api_endpoint=os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"])
    else:
        provider = common.tracer_provider(service)
        trace.set_tracer_provider(provider)
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)

    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.retrievers import BaseRetriever
    from langchain_openai import ChatOpenAI

    found: list[list[tuple[str, str]]] = []

    class KbRetriever(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            docs = common.retrieve(query)
            found.append(docs)
            return [Document(id=i, page_content=t, metadata={"source": f"kb/{i}.md"}) for i, t in docs]

    retriever = KbRetriever()
    llm = ChatOpenAI(model="gpt-4o-mini", max_retries=0, stream_usage=True)
    answer_prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are the HR assistant. Answer from the context only.\n\nContext:\n{context}"),
            MessagesPlaceholder("history"),
            ("human", "{question}"),
        ]
    )
    condense_prompt = ChatPromptTemplate.from_messages(
        [
            MessagesPlaceholder("history"),
            (
                "human",
                "Given the conversation above, rewrite this follow-up as a standalone question: {question}",
            ),
        ]
    )

    def fmt(docs: list[Document]) -> str:
        return "\n\n".join(d.page_content for d in docs)

    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    def standalone(inputs: dict[str, Any]) -> Any:
        if not inputs["history"]:
            return inputs["question"]
        return (condense_prompt | llm | StrOutputParser()).invoke(inputs)

    chain = (
        RunnablePassthrough.assign(standalone=RunnableLambda(standalone))
        | RunnablePassthrough.assign(context=(lambda x: x["standalone"]) | retriever | fmt)
        | answer_prompt
        | llm
    )

    def search_kb(query: str) -> str:
        """Search the HR knowledge base; returns the matching passages as JSON."""
        docs = common.retrieve(query)
        found.append(docs)
        return json.dumps([{"id": i, "text": t} for i, t in docs])

    agent: Any = None
    if c["pattern"] == "agent":
        from langchain.agents import create_agent

        agent = create_agent(
            model=llm,
            tools=[search_kb],
            system_prompt="You are the HR assistant. Use search_kb to find passages.",
        )
    rec = common.Record()
    history: list[Any] = []
    session = f"sess-{uuid.uuid4().hex[:8]}" if c["pattern"] == "condense" else None

    def rag(question: str) -> tuple[str, Any]:
        inputs = {"question": question, "history": list(history)}
        if agent is not None:
            state = agent.invoke({"messages": [("user", question)]})
            final = state["messages"][-1]
            usage = {"prompt_tokens": 0, "completion_tokens": 0}
            for m in state["messages"]:  # every model call of the agent loop
                um = getattr(m, "usage_metadata", None) or {}
                usage["prompt_tokens"] += um.get("input_tokens", 0)
                usage["completion_tokens"] += um.get("output_tokens", 0)
            return str(final.content), usage
        if c["pattern"] == "stream":
            msg: Any = None
            for part in chain.stream(inputs):
                msg = part if msg is None else msg + part
        else:
            msg = chain.invoke(inputs)
        um = msg.usage_metadata or {}
        return str(msg.content), {
            "prompt_tokens": um.get("input_tokens"),
            "completion_tokens": um.get("output_tokens"),
        }

    def run(question: str) -> tuple[str, Any]:
        if c.get("two_services"):
            result: tuple[str, Any] = common.two_services(rag, question)
            return result
        return rag(question)

    for question in c["turns"]:
        if session and inst == "oi":
            from openinference.instrumentation import using_session

            with using_session(session):
                answer, usage = run(question)
        elif session:
            from traceloop.sdk import Traceloop

            Traceloop.set_association_properties({"session_id": session})
            answer, usage = run(question)
        else:
            answer, usage = run(question)
        sources = {i: f"kb/{i}.md" for i, _ in found[-1]}  # metadata["source"] of each Document
        rec.turn(question, found[-1], answer, usage, session_id=session, sources=sources)
        history += [HumanMessage(question), AIMessage(answer)]
    rec.write()
    tp: Any = trace.get_tracer_provider()
    tp.force_flush()
    tp.shutdown()


if __name__ == "__main__":
    main()
