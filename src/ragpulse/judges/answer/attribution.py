"""Why a claim is unsupported: retrieval miss or generation error (``flags.claims[].cause``).

For a **failing** faithfulness judgement (score below the threshold) of a trace that carries ground truth —
``reference_contexts`` (a test case's) or relevance labels (``context_labels``, with or without a labelled
pool ``labelled_contexts``/``labelled_doc_ids``; :mod:`ragpulse.judges.retrieval.labels`) — each claim whose
verdict is ``unsupported`` or ``contradicted`` gets a ``cause``:

- ``retrieval_miss``: a ground-truth context that was **not retrieved** supports the claim; ``reference``
  names it: ``{"source": "reference_contexts" | "labelled_contexts", "index": i, "doc_id": id | None}``
  (``index`` into that trace field);
- ``generation_error``: no ground-truth context that was not retrieved supports it (also when every one was
  retrieved: the claim is then not in the ground truth the retriever delivered);
- ``null``: undecided, and ``flags.attribution.reason`` says why — the trace has no ground truth
  (``no_ground_truth``), a relevant labelled chunk that was not retrieved has no text to check
  (``reference_without_text``), reference contexts were cut by the context budget (``reference_truncated``),
  the retrieved context itself was cut, so the judge did not see all of it (``context_truncated``; a retrieval
  miss is still reported),
  the sentence check ran out of calls (``max_calls_per_trace``), or the check itself failed
  (``attribution_failed: <code>: …``; the judgement keeps its score).

"Not retrieved" is decided as the retrieval judges decide it: a labelled chunk by document id when both
sides have one, else by whitespace-normalised text; a reference context by containment or lexical coverage
(:func:`~ragpulse.judges.retrieval.labels.reference_context_relevance`). The check is made by the backend
that judged the claim: the ``claims`` mode asks the judge model once per judgement (template
``faithfulness_attribution``, every unsupported claim against every missed reference context), the
``sentence_check`` mode asks the fact-checking template per (sentence, missed context) within what is left
of ``max_calls_per_trace``, and the heuristic judge uses its own lexical support rule.

``flags.attribution`` = ``{"retrieval_misses", "generation_errors", "undecided", "reason"}`` (claim counts;
``reason`` ``None`` when every cause was decided). Run reports sum the first two
(:mod:`ragpulse.runs.reports`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ragpulse.judges.answer.claims import Claim
from ragpulse.judges.retrieval.labels import LabelError, labelled_relevance, reference_context_relevance
from ragpulse.model import Trace

__all__ = [
    "ATTRIBUTION",
    "UNCHECKED",
    "Cause",
    "MissedReference",
    "Pool",
    "attribute",
    "cause_note",
    "missed_references",
    "targets",
]

#: Version of the attribution rule (hashed into the faithfulness judges' versions).
ATTRIBUTION = 1
#: A claim the checker could not check (call cap reached): its cause stays undecided.
UNCHECKED = -1

Cause = Literal["retrieval_miss", "generation_error"]
_WS_RE = re.compile(r"\s+")
_TARGET_VERDICTS = ("unsupported", "contradicted")


@dataclass(frozen=True)
class MissedReference:
    """A ground-truth context that was not retrieved: its trace field, index there, document id, text."""

    source: str
    index: int
    doc_id: str | None
    text: str

    def ref(self) -> dict[str, Any]:
        """The ``reference`` of a ``retrieval_miss`` claim."""
        return {"source": self.source, "index": self.index, "doc_id": self.doc_id}


@dataclass(frozen=True)
class Pool:
    """The trace's ground-truth contexts that were not retrieved (``missed``, with text) and how many
    relevant labelled chunks were not retrieved but have no text to check (``textless``)."""

    missed: tuple[MissedReference, ...]
    textless: int = 0


def _norm(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def missed_references(trace: Trace) -> Pool | None:
    """Ground-truth contexts of ``trace`` that were not retrieved; ``None`` when it carries no ground truth
    (no ``reference_contexts`` and no usable ``context_labels``)."""
    missed: list[MissedReference] = []
    textless = 0
    known = False
    seen: set[str] = set()
    refs = reference_context_relevance(trace)
    if refs is not None:
        known = True
        found = {m for m in refs.matches if m is not None}
        nonblank = [i for i, r in enumerate(trace.reference_contexts) if r.strip()]
        for k, i in enumerate(nonblank):
            text = trace.reference_contexts[i]
            if k not in found and _norm(text) not in seen:
                seen.add(_norm(text))
                missed.append(MissedReference("reference_contexts", i, None, text))
    try:
        labels = labelled_relevance(trace)
    except LabelError:
        labels = None
    if labels is not None:
        known = True
        if trace.labelled_contexts is not None or trace.labelled_doc_ids is not None:
            found = {m for m in labels.matches if m is not None}
            texts, ids = trace.labelled_contexts, trace.labelled_doc_ids
            for i, relevant in enumerate(trace.context_labels or ()):
                if not relevant or i in found:
                    continue
                text = texts[i] if texts is not None else ""
                if not text or not text.strip():
                    textless += 1
                elif _norm(text) not in seen:
                    seen.add(_norm(text))
                    doc_id = ids[i] if ids is not None else None
                    missed.append(MissedReference("labelled_contexts", i, doc_id, text))
        # Labels parallel to the retrieved documents: every labelled chunk was retrieved; nothing missed.
    return Pool(tuple(missed), textless) if known else None


def targets(claims: Sequence[Claim]) -> list[int]:
    """Indices of the claims that need a cause (verdict ``unsupported`` or ``contradicted``)."""
    return [i for i, c in enumerate(claims) if c.verdict in _TARGET_VERDICTS]


def attribute(
    claims: Sequence[Claim],
    pool: Pool | None,
    found: Sequence[int | None] | None,
    *,
    unchecked_refs: str | None = None,
    unchecked_reason: str = "max_calls_per_trace: the call cap left the claim unchecked",
    failure: str | None = None,
) -> tuple[list[Claim], dict[str, Any]]:
    """Set the cause of every :func:`targets` claim; return the claims and ``flags.attribution``.

    Args:
        claims: the judgement's claims in answer order.
        pool: :func:`missed_references` of the trace.
        found: per target claim (in :func:`targets` order), the index into ``pool.missed`` of a context that
            supports it, ``None`` (none does) or :data:`UNCHECKED`; ``None`` when no check ran.
        unchecked_refs: why some missed contexts were not (fully) checked (e.g. ``reference_truncated: …``);
            a claim none of the checked ones supports is then undecided.
        unchecked_reason: why an :data:`UNCHECKED` claim was not checked.
        failure: why the check failed (every cause undecided).
    """
    idx = targets(claims)
    out = list(claims)
    counts = {"retrieval_misses": 0, "generation_errors": 0, "undecided": 0}
    reasons: list[str] = []

    def undecided(reason: str) -> None:
        counts["undecided"] += 1
        if reason not in reasons:
            reasons.append(reason)

    if pool is None:
        failure = "no_ground_truth: the trace has no reference contexts or relevance labels"
    elif pool.textless and unchecked_refs is None:
        unchecked_refs = (
            f"reference_without_text: {pool.textless} relevant labelled chunk(s) not retrieved have no text"
        )
    for k, i in enumerate(idx):
        cause: Cause | None = None
        reference: dict[str, Any] | None = None
        hit = found[k] if found is not None and k < len(found) else None
        if failure is not None:
            undecided(failure)
        elif hit == UNCHECKED:
            undecided(unchecked_reason)
        elif hit is not None and pool is not None:
            cause, reference = "retrieval_miss", pool.missed[hit].ref()
            counts["retrieval_misses"] += 1
        elif unchecked_refs is not None:
            undecided(unchecked_refs)
        else:
            cause = "generation_error"
            counts["generation_errors"] += 1
        out[i] = replace(claims[i], cause=cause, reference=reference, attributed=True)
    return out, {**counts, "reason": "; ".join(reasons) or None}


def cause_note(summary: dict[str, Any]) -> str:
    """The reason suffix of an attributed judgement (``""`` when no cause was decided)."""
    a, b = summary["retrieval_misses"], summary["generation_errors"]
    if not a and not b:
        return ""
    return f"; causes: {a} retrieval miss(es), {b} generation error(s)"
