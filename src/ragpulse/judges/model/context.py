"""The one context budget: which retrieved chunks a judge-model prompt holds, and how they are numbered.

Every judge that sends retrieved context to the model cuts it with :func:`fit_context` to
``settings.judge.context_budget_chars`` characters (top-ranked chunks kept first; the judgement is flagged
``context_truncated`` when anything was cut) and numbers it with :func:`format_chunks`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["fit_context", "format_chunks"]

#: A partial chunk is kept at the end of a truncated context only when at least this many characters fit.
MIN_PARTIAL_CHARS = 200


def fit_context(chunks: Sequence[str], budget_chars: int) -> tuple[list[str], bool]:
    """Keep retrieved chunks in rank order until ``budget_chars`` characters are used.

    The first chunk that does not fit is cut to the remaining budget when at least
    :data:`MIN_PARTIAL_CHARS` characters (or, for the top-ranked chunk, any characters) remain; every
    lower-ranked chunk is dropped.

    Args:
        chunks: chunk texts, best-ranked first.
        budget_chars: total characters allowed (> 0).

    Returns:
        ``(kept_chunks, truncated)``: ``truncated`` is True when anything was cut or dropped.
    """
    kept: list[str] = []
    used = 0
    for i, chunk in enumerate(chunks):
        room = budget_chars - used
        if len(chunk) <= room:
            kept.append(chunk)
            used += len(chunk)
            continue
        if i == 0 or room >= MIN_PARTIAL_CHARS:
            kept.append(chunk[: max(room, 0)])
        return kept, True
    return kept, False


def format_chunks(chunks: Sequence[str]) -> str:
    """Number context chunks for a prompt: ``[1] text`` blocks separated by blank lines (rank order)."""
    return "\n\n".join(f"[{i}] {c.strip()}" for i, c in enumerate(chunks, 1))
