"""A RAG app instrumented with the Langfuse Python SDK (v3 or newer; the SDK exports OTLP/HTTP to
``LANGFUSE_HOST``/api/public/otel, here the capture server). ``@observe`` root, a ``retriever`` observation,
the answer from ``langfuse.openai``'s wrapped client (a ``generation``); session and app metadata on the trace.
"""

from __future__ import annotations

from typing import Any

import common


def main() -> None:
    c = common.case()
    from langfuse import get_client, observe
    from langfuse.openai import openai

    client = openai.OpenAI(max_retries=0)
    rec = common.Record()
    session = "sess-langfuse-1"
    lf = get_client()

    @observe(as_type="retriever", name="kb-search")
    def search(question: str) -> list[dict[str, str]]:
        return [{"id": i, "text": t} for i, t in common.retrieve(question)]

    @observe(name="hr-assistant")
    def answer_question(question: str) -> tuple[str, Any, list[tuple[str, str]]]:
        meta = {"app": "hr-assistant", "scenario": "policy-qa"}
        if hasattr(lf, "update_current_trace"):  # SDK v3
            lf.update_current_trace(session_id=session, metadata=meta)
        docs = search(question)
        context = "\n".join(d["text"] for d in docs)
        out = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": common.SYSTEM.format(context=context)},
                {"role": "user", "content": question},
            ],
        )
        return out.choices[0].message.content or "", out.usage, [(d["id"], d["text"]) for d in docs]

    for question in c["turns"]:
        try:
            from langfuse import propagate_attributes  # SDK 4+

            with propagate_attributes(
                session_id=session, metadata={"app": "hr-assistant", "scenario": "policy-qa"}
            ):
                answer, usage, docs = answer_question(question)
        except ImportError:
            answer, usage, docs = answer_question(question)
        rec.turn(question, docs, answer, usage, session_id=session)
    rec.write()
    lf.flush()
    lf.shutdown()


if __name__ == "__main__":
    main()
