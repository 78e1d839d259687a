"""A DSPy RAG program instrumented by OpenInference (``oi``). Usage: ``python dspy_app.py oi``.

Patterns: ``prompt`` (a module retrieves passages and calls ``dspy.ChainOfThought("context, question ->
answer")``: DSPy's chat adapter puts the passages in the user message and field descriptions in the system
message), ``react`` (``dspy.ReAct`` with a ``search_kb`` tool: the passages are the tool's observation).
The scripted server answers in DSPy's ``[[ ## field ## ]]`` format.
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
        from openinference.instrumentation.dspy import DSPyInstrumentor

        DSPyInstrumentor().instrument(tracer_provider=provider)

    import dspy

    lm = dspy.LM(
        "openai/gpt-4o-mini",
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
        cache=False,
        num_retries=0,
    )
    dspy.configure(lm=lm)
    found: list[list[tuple[str, str]]] = []

    def search_kb(query: str) -> list[dict[str, str]]:
        """Search the HR knowledge base for passages (id and text of each)."""
        docs = common.retrieve(query)
        found.append(docs)
        return [{"id": i, "text": t} for i, t in docs]

    class Rag(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.answer = dspy.ChainOfThought("context, question -> answer")

        def forward(self, question: str) -> Any:
            context = [d["text"] for d in search_kb(question)]
            return self.answer(context=context, question=question)

    program: Any = dspy.ReAct("question -> answer", tools=[search_kb]) if c["pattern"] == "react" else Rag()
    rec = common.Record()
    for question in c["turns"]:
        pred = program(question=question)
        documents_in = "retriever" if c["pattern"] == "react" else "prompt"
        rec.turn(question, found[-1], str(pred.answer), None, documents_in=documents_in)
    rec.write()
    provider.force_flush()
    provider.shutdown()


if __name__ == "__main__":
    main()
