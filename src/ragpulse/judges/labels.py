"""Labelled chunk relevance carried by a trace (non-LLM context precision/recall/relevance).

How labels travel: a test case's ``context_labels`` (0/1 per context of the case, e.g. RGB's positive /
negative passages) is copied by replay into ``Trace.attributes``:

- ``attributes["context_labels"]``: list of 0/1 (or booleans), one per labelled chunk;
- ``attributes["labelled_doc_ids"]`` (optional): ids of the labelled chunks, parallel to the labels;
- ``attributes["labelled_contexts"]`` (optional): texts of the labelled chunks, parallel to the labels.

Without ``labelled_doc_ids``/``labelled_contexts`` the labels are parallel to ``Trace.documents`` (replay of
recorded contexts). With them, each retrieved document is matched to a labelled chunk by id, else by its
whitespace-normalised text (a live RAG endpoint may return the chunks in another order, or other chunks; an
unmatched retrieved chunk counts as not relevant).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse.model import Trace

__all__ = ["LabelError", "LabelledRelevance", "labelled_relevance"]

_WS_RE = re.compile(r"\s+")


class LabelError(ValueError):
    """The trace's labels cannot be used (wrong type, or not parallel to what they label)."""


@dataclass(frozen=True)
class LabelledRelevance:
    """Relevance of the retrieved chunks according to labels.

    Attributes:
        retrieved: one flag per retrieved document, in rank order (True = labelled relevant).
        total_relevant: number of chunks labelled relevant in the whole labelled pool (retrieved or not).
    """

    retrieved: tuple[bool, ...]
    total_relevant: int


def _norm(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def _as_flags(raw: Any) -> list[bool]:
    if not isinstance(raw, list | tuple):
        raise LabelError(f"context_labels must be a list of 0/1, got {type(raw).__name__}")
    out: list[bool] = []
    for v in raw:
        if isinstance(v, bool):
            out.append(v)
        elif isinstance(v, int | float) and v in (0, 1):
            out.append(bool(v))
        else:
            raise LabelError(f"context_labels must hold 0/1 values, got {v!r}")
    return out


def labelled_relevance(trace: Trace) -> LabelledRelevance | None:
    """Relevance flags of the trace's retrieved documents from its labels; ``None`` when it carries none.

    Raises:
        LabelError: labels are malformed, or (without a labelled pool) their count differs from the number of
            retrieved documents.
    """
    attrs = trace.attributes
    raw = attrs.get("context_labels")
    if raw is None:
        return None
    labels = _as_flags(raw)
    docs = trace.documents
    ids = attrs.get("labelled_doc_ids")
    texts = attrs.get("labelled_contexts")
    if ids is None and texts is None:
        if len(labels) != len(docs):
            raise LabelError(
                f"{len(labels)} context_labels for {len(docs)} retrieved documents "
                "(give labelled_doc_ids or labelled_contexts to match them)"
            )
        return LabelledRelevance(tuple(labels), sum(labels))
    for name, pool in (("labelled_doc_ids", ids), ("labelled_contexts", texts)):
        if pool is not None and (not isinstance(pool, list | tuple) or len(pool) != len(labels)):
            raise LabelError(f"{name} must be a list parallel to context_labels")
    by_id: dict[str, bool] = {}
    by_text: dict[str, bool] = {}
    for i, lab in enumerate(labels):
        if ids is not None and ids[i] is not None:
            by_id[str(ids[i])] = by_id.get(str(ids[i]), False) or lab
        if texts is not None and texts[i]:
            key = _norm(str(texts[i]))
            by_text[key] = by_text.get(key, False) or lab
    flags: list[bool] = []
    for d in docs:
        if d.id is not None and d.id in by_id:
            flags.append(by_id[d.id])
        else:
            flags.append(by_text.get(_norm(d.content), False) if d.content else False)
    return LabelledRelevance(tuple(flags), sum(labels))


def count_relevant_in(flags: Sequence[bool], k: int | None) -> int:
    """Relevant chunks among the first ``k`` flags (all when ``k`` is ``None``)."""
    return sum(1 for f in (flags if k is None else flags[:k]) if f)
