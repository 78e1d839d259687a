"""Lexical building blocks of the heuristic reference metrics: statements, support, similarity.

:func:`split_statements` cuts a text at sentence ends, semicolons and line breaks (empty or content-free
pieces dropped); :func:`coverage` is the share of a statement's content tokens found in a text (Chinese
tokens also as substrings, :func:`ragpulse.judges.text.lexical.token_supported`); :func:`supported` is true
when some text covers ≥ ``min_coverage`` (default 0.6) or contains the statement literally;
:func:`lexical_similarity` is the cosine of content-token frequency vectors. Blind spots: paraphrases and
synonyms, negation (``not approved`` covers ``approved``), numbers written differently.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragpulse.judges.formulas import bag, cosine
from ragpulse.judges.text.lexical import chunk_index, token_supported
from ragpulse.judges.text.tokens import content_tokens

__all__ = ["coverage", "lexical_similarity", "split_statements", "supported"]

_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|[。！？；;\n]+")
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)、])\s*")
_WS_RE = re.compile(r"\s+")

DEFAULT_MIN_COVERAGE = 0.6


def split_statements(text: str | None) -> list[str]:
    """Cut ``text`` into statements (see the module docstring). ``[]`` for empty or content-free text."""
    if not text:
        return []
    out: list[str] = []
    for piece in _SPLIT_RE.split(text):
        s = _BULLET_RE.sub("", piece or "").strip().rstrip(".。，,")
        if s and content_tokens(s):
            out.append(s)
    return out


def _norm(text: str) -> str:
    return _WS_RE.sub(" ", text.casefold()).strip()


def coverage(statement: str, text: str) -> float:
    """Share (0–1) of the statement's content tokens found in ``text``; 0.0 when it has none.

    A token is found as by :func:`ragpulse.judges.text.lexical.token_supported` with ``min_cjk_chars=1``; ``text``
    is tokenised once (:func:`ragpulse.judges.text.lexical.chunk_index`, LRU-cached by text).
    """
    st = content_tokens(statement)
    if not st:
        return 0.0
    chunk = chunk_index(text)
    found = sum(1 for t in st if token_supported(t, chunk, min_cjk_chars=1))
    return found / len(st)


def supported(statement: str, texts: Sequence[str], min_coverage: float = DEFAULT_MIN_COVERAGE) -> bool:
    """True when one of ``texts`` contains ``statement`` literally or covers ≥ ``min_coverage`` of its tokens."""
    ns = _norm(statement)
    for t in texts:
        if ns and ns in _norm(t):
            return True
        if coverage(statement, t) >= min_coverage:
            return True
    return False


def lexical_similarity(a: str, b: str) -> float:
    """Cosine (0–1) of the content-token frequency vectors of ``a`` and ``b``; 0.0 if either has none."""
    return cosine(bag(content_tokens(a)), bag(content_tokens(b)))
