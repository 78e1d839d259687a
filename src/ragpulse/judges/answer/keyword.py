"""Keyword overlap judge: does the answer contain the expected keywords? (no model call; ``docs/judges.md``)

score = |K ∩ A| / |K|: K is the trace's ``keywords``, else the distinct content tokens of ``expected_answer``
(:func:`extract_keywords`); a keyword matches as a case-folded substring when it holds Chinese or several
words, as a whole answer token when it is one Latin-script word, or when all its content tokens are answer
tokens (:func:`keyword_matches`). Default threshold 0.3; no keywords and no expected answer →
``skipped``/``no_reference``. Blind spots: synonyms, paraphrases, keywords inside a wrong statement.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragpulse.judges.frame import Decision, JudgeBase
from ragpulse.judges.options import KeywordOptions
from ragpulse.judges.text.lexical import has_cjk
from ragpulse.judges.text.tokens import content_tokens, tokens
from ragpulse.model import Judgement, Trace

__all__ = ["KeywordJudge", "extract_keywords", "keyword_matches"]


def extract_keywords(expected_answer: str) -> list[str]:
    """Keywords of an expected answer: distinct content tokens in order, single Chinese characters dropped.

    Falls back to all distinct content tokens when the filter leaves none (e.g. the answer is "对"), then to
    all distinct tokens when there are no content tokens (e.g. the answer is "no").
    """
    toks = list(dict.fromkeys(content_tokens(expected_answer)))
    kept = [t for t in toks if not (len(t) == 1 and has_cjk(t))]
    return kept or toks or list(dict.fromkeys(tokens(expected_answer)))


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def keyword_matches(keyword: str, answer_folded: str, answer_tokens: frozenset[str]) -> bool:
    """True when ``keyword`` is found in the answer (rules in the module docstring).

    Args:
        keyword: one keyword or phrase.
        answer_folded: the answer case-folded with white space collapsed.
        answer_tokens: the answer's tokens (:func:`ragpulse.judges.text.tokens.tokens`).
    """
    k = _fold(keyword)
    if not k:
        return False
    k_tokens = tokens(k)
    if (has_cjk(k) or len(k_tokens) > 1) and k in answer_folded:
        return True
    needed = content_tokens(k) or k_tokens
    return bool(needed) and all(t in answer_tokens for t in needed)


class KeywordJudge(JudgeBase):
    """Keyword overlap between the reference keywords and the answer (``backend=heuristic``).

    Options (``settings.judge.options["keyword"]``): ``threshold`` (0–1, default :data:`DEFAULT_THRESHOLD`).
    """

    name = "keyword"
    Options = KeywordOptions
    needs_reference = True
    DEFAULT_THRESHOLD = 0.3
    METHOD = "keyword_overlap/v1"

    def keywords_for(self, trace: Trace) -> list[str]:
        """K for a trace: explicit keywords (deduplicated, case-insensitively) or extracted ones."""
        if trace.keywords:
            seen: dict[str, str] = {}
            for kw in trace.keywords:
                seen.setdefault(_fold(kw), kw)
            return list(seen.values())
        return extract_keywords(trace.expected_answer or "")

    def decide_now(self, trace: Trace) -> Decision | Judgement:
        """Score the share (0–1) of reference keywords found in the answer. Pure CPU."""
        self.require_short("expected answer", trace.expected_answer)
        self.require_short("keyword", *(trace.keywords or ()))
        keywords = self.keywords_for(trace)
        if not keywords:
            return self.skipped("no_reference: the expected answer has no content words")
        answer = trace.answer or ""
        folded = _fold(answer)
        if folded not in {_fold(trace.expected_answer or ""), _fold(" ".join(keywords))}:
            self.require_readable(answer, *keywords)  # identical texts score 1 in any script
        a_tokens = frozenset(tokens(answer))
        hits = [k for k in keywords if keyword_matches(k, folded, a_tokens)]
        missing = [k for k in keywords if k not in hits]
        score = len(hits) / len(keywords)
        source = "keywords" if trace.keywords else "expected_answer"
        reason = f"{len(hits)}/{len(keywords)} keywords found (from {source})"
        if missing:
            reason += "; missing: " + ", ".join(_clip(missing))
        return Decision(score, reason, source)


def _clip(items: Sequence[str], limit: int = 12) -> list[str]:
    out = list(items[:limit])
    if len(items) > limit:
        out.append(f"… (+{len(items) - limit})")
    return out
