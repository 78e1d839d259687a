"""An evaluator–optimizer loop against ragpulse's ``POST /api/v1/evaluate``.

Generate an answer, let ragpulse judge it, and while a judge's score is below its threshold append ragpulse's
``feedback`` (unsupported sentences, missing keywords …) to the question and generate again — at most
``max_rounds`` times. Each attempt is its own trace (``source=api``), kept out of the live-traffic statistics
and the alert rules.

Run it against a local ``ragpulse serve`` (portal on ``127.0.0.1:9470``)::

    python examples/evaluate_loop.py "How long do refunds take?"

Replace :func:`generate` with your RAG service's call; the stand-in here answers from a fixed context.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import httpx

PORTAL = os.environ.get("RAGPULSE_PORTAL_URL", "http://127.0.0.1:9470")
TOKEN = os.environ.get("RAGPULSE_API_TOKEN")

CONTEXT = [
    "Refunds are paid within five days of receiving the returned item, to the original payment method."
]

#: ``generate(question, feedback) -> (answer, contexts)``
Generator = Callable[[str, str], tuple[str, list[str]]]


def generate(question: str, feedback: str) -> tuple[str, list[str]]:
    """Stand-in RAG call: the first draft adds a claim the context does not support; with feedback it sticks to
    the context."""
    if not feedback:
        return "Refunds do not take long: they are paid within five days. Shipping back is always free.", CONTEXT
    return "Refunds do not take long: they are paid within five days of receiving the returned item.", CONTEXT


def evaluate_loop(
    question: str,
    generate: Generator = generate,
    *,
    client: httpx.Client,
    app: str = "evaluate-loop-example",
    keywords: list[str] | None = None,
    max_rounds: int = 3,
) -> list[dict[str, Any]]:
    """Run the loop; return every round's ``/evaluate`` answer (the last one passed, or ``max_rounds`` ran)."""
    rounds: list[dict[str, Any]] = []
    feedback = ""
    for _ in range(max_rounds):
        prompt = (
            question if not feedback else f"{question}\n\nFix these problems of your last answer:\n{feedback}"
        )
        answer, contexts = generate(prompt, feedback)
        event: dict[str, Any] = {"app": app, "question": question, "answer": answer, "contexts": contexts}
        if keywords:
            event["keywords"] = keywords
        r = client.post("/api/v1/evaluate", json=event, params={"timeout_s": 60})
        r.raise_for_status()
        verdict: dict[str, Any] = r.json()
        rounds.append(verdict)
        if verdict["passed"] is not False:
            break
        feedback = verdict["feedback"]
    return rounds


def main() -> None:
    question = sys.argv[1] if len(sys.argv) > 1 else "How long do refunds take?"
    headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
    with httpx.Client(base_url=PORTAL, headers=headers, timeout=90) as client:
        for i, verdict in enumerate(evaluate_loop(question, client=client), start=1):
            scores = ", ".join(f"{j['judge']} {j['score']}" for j in verdict["judgements"])
            print(f"round {i}: passed={verdict['passed']} ({scores})")
            if verdict["feedback"]:
                print("  feedback:", verdict["feedback"].replace("\n", "\n            "))


if __name__ == "__main__":
    main()
