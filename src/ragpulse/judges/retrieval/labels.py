"""Labelled chunk relevance carried by a trace (non-LLM context precision/recall/relevance).

How labels travel: a test case's ``context_labels`` (0/1 per context of the case, e.g. RGB's positive /
negative passages) is copied by replay into the trace's typed fields:

- ``Trace.context_labels``: one flag per labelled chunk;
- ``Trace.labelled_doc_ids`` (optional): ids of the labelled chunks, parallel to the labels;
- ``Trace.labelled_contexts`` (optional): texts of the labelled chunks, parallel to the labels.

(Older producers sent them as ``attributes`` keys of the same names; :class:`~ragpulse.model.Trace` moves
those into the fields.)

Without ``labelled_doc_ids``/``labelled_contexts`` the labels are parallel to ``Trace.documents`` (replay of
recorded contexts). With them, each retrieved document is matched to a labelled chunk by id, else by its
whitespace-normalised text (a live RAG endpoint may return the chunks in another order, or other chunks; an
unmatched retrieved chunk counts as not relevant).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragpulse.model import Trace

__all__ = ["LabelError", "LabelledRelevance", "labelled_relevance", "reference_context_relevance"]

_WS_RE = re.compile(r"\s+")


class LabelError(ValueError):
    """The trace's labels cannot be used (wrong type, or not parallel to what they label)."""


@dataclass(frozen=True)
class LabelledRelevance:
    """Relevance of the retrieved chunks according to labels (or reference contexts).

    Attributes:
        retrieved: one flag per retrieved document, in rank order (True = relevant).
        total_relevant: number of relevant items in the whole labelled pool (retrieved or not).
        matches: per retrieved document, the index of the relevant pool item it matched (``None``: none), so
            a pool item retrieved twice counts once for recall.
        source: ``labels`` (``context_labels``) or ``reference_contexts``.
    """

    retrieved: tuple[bool, ...]
    total_relevant: int
    matches: tuple[int | None, ...] = ()
    source: str = "labels"

    def found(self, k: int | None = None) -> int:
        """Distinct relevant pool items among the first ``k`` retrieved documents (all when ``None``)."""
        m = self.matches if k is None else self.matches[:k]
        return len({i for i in m if i is not None})


def _norm(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def labelled_relevance(trace: Trace) -> LabelledRelevance | None:
    """Relevance flags of the trace's retrieved documents from its labels; ``None`` when it carries none.

    Raises:
        LabelError: a labelled pool is not parallel to the labels, or (without one) their count differs from the number of
            retrieved documents.
    """
    if trace.context_labels is None:
        return None
    labels = list(trace.context_labels)
    docs = trace.documents
    ids = trace.labelled_doc_ids
    texts = trace.labelled_contexts
    if ids is None and texts is None:
        if len(labels) != len(docs):
            raise LabelError(
                f"{len(labels)} context_labels for {len(docs)} retrieved documents "
                "(give labelled_doc_ids or labelled_contexts to match them)"
            )
        return LabelledRelevance(
            tuple(labels), sum(labels), tuple(i if f else None for i, f in enumerate(labels))
        )
    for name, pool in (("labelled_doc_ids", ids), ("labelled_contexts", texts)):
        if pool is not None and (not isinstance(pool, list | tuple) or len(pool) != len(labels)):
            raise LabelError(f"{name} must be a list parallel to context_labels")
    by_id: dict[str, int] = {}
    by_text: dict[str, int] = {}
    for i, lab in enumerate(labels):
        if not lab:
            continue
        if ids is not None and ids[i] is not None:
            by_id.setdefault(str(ids[i]), i)
        if texts is not None and texts[i]:
            by_text.setdefault(_norm(str(texts[i])), i)
    matches: list[int | None] = []
    for d in docs:
        if d.id is not None and d.id in by_id:
            matches.append(by_id[d.id])
        else:
            matches.append(by_text.get(_norm(d.content)) if d.content else None)
    return LabelledRelevance(tuple(m is not None for m in matches), sum(labels), tuple(matches))


def reference_context_relevance(trace: Trace, min_coverage: float = 0.8) -> LabelledRelevance | None:
    """Relevance of the retrieved chunks from the trace's ground-truth contexts; ``None`` without them.

    ``Trace.reference_contexts`` (a test case's ``reference_contexts``) lists the passages a good
    retrieval returns. A retrieved chunk matches a reference context when one contains the other (whitespace
    normalised) or the chunk covers ≥ ``min_coverage`` of the reference's content tokens
    (:func:`ragpulse.judges.text.statements.coverage`). This is the non-LLM context recall/precision of Ragas
    (reference contexts compared by string similarity), with lexical coverage as the similarity.
    """
    from ragpulse.judges.text.statements import coverage

    raw = trace.reference_contexts
    if not raw:
        return None
    refs = [_norm(r) for r in raw if r.strip()]
    if not refs:
        return None
    matches: list[int | None] = []
    for d in trace.documents:
        c = _norm(d.content)
        hit: int | None = None
        if c:
            for i, r in enumerate(refs):
                if r in c or c in r or coverage(r, c) >= min_coverage:
                    hit = i
                    break
        matches.append(hit)
    return LabelledRelevance(
        tuple(m is not None for m in matches), len(refs), tuple(matches), "reference_contexts"
    )
