"""Per-claim details: the one shape of every judge that checks parts of an answer (``flags.claims``).

``{"text", "start", "end", "verdict", "evidence"}`` per checked part, in answer order: ``answer[start:end]`` is
the sentence (or the span a model's claim was copied from; ``null`` only for a paraphrase that cannot be
located), ``verdict`` ``supported | unsupported | contradicted | unchecked``, ``evidence`` ``{"doc_id",
"rank"}`` of the supporting chunk or ``null``; no ``text`` under ``redact_text``. Used by faithfulness
``claims`` and ``sentence_check`` and the heuristic faithfulness judge (``docs/llm-judges.md``). An unsupported
claim of a failing judgement also has ``cause`` and ``reference`` (:mod:`ragpulse.judges.answer.attribution`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ragpulse.model import Trace

__all__ = ["Claim", "Verdict", "claims_flag", "evidence_of", "locate"]

Verdict = Literal["supported", "unsupported", "contradicted", "unchecked"]


@dataclass(frozen=True)
class Claim:
    """One checked part of the answer (see the module docstring)."""

    text: str
    start: int | None
    end: int | None
    verdict: Verdict
    evidence: dict[str, Any] | None = None
    #: Why an unsupported claim of a failing judgement is unsupported (:mod:`ragpulse.judges.answer.attribution`):
    #: ``retrieval_miss``, ``generation_error`` or ``None`` (undecided); written only when ``attributed``.
    cause: str | None = None
    #: The not-retrieved ground-truth context that supports a ``retrieval_miss`` claim.
    reference: dict[str, Any] | None = None
    attributed: bool = False

    def as_flag(self, *, redact_text: bool) -> dict[str, Any]:
        """The ``flags.claims`` entry (``text`` left out when ``redact_text``)."""
        out: dict[str, Any] = {"start": self.start, "end": self.end, "verdict": self.verdict}
        out["evidence"] = self.evidence
        if self.attributed:
            out["cause"] = self.cause
            out["reference"] = self.reference
        return out if redact_text else {"text": self.text, **out}


def claims_flag(claims: list[Claim], *, redact_text: bool) -> list[dict[str, Any]]:
    """``flags.claims`` of ``claims``."""
    return [c.as_flag(redact_text=redact_text) for c in claims]


def evidence_of(trace: Trace, chunk: int | None) -> dict[str, Any] | None:
    """``{"doc_id", "rank"}`` of the ``chunk``-th retrieved context (an index into ``trace.contexts``)."""
    if chunk is None or chunk < 0:
        return None
    docs = [d for d in trace.documents if d.content and d.content.strip()]
    if chunk < len(docs):
        return {"doc_id": docs[chunk].id, "rank": docs[chunk].rank}
    return {"doc_id": None, "rank": chunk}


def locate(claim: str, answer: str) -> tuple[int, int] | None:
    """Offsets of ``claim`` in ``answer``: verbatim, else ignoring case, white space and a final period; ``None``
    for a paraphrase that cannot be found."""
    c = claim.strip()
    if not c:
        return None
    i = answer.find(c)
    if i >= 0:
        return i, i + len(c)
    words = c.rstrip(".。!！?？").split()
    if not words:
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in words), answer, re.IGNORECASE)
    return (m.start(), m.end()) if m else None
