"""Keyword overlap judge: does the answer contain the expected keywords? (no model call)

score = |K ∩ A| / |K|, where K is the reference keyword list and A the answer.

- **K**: the trace's explicit ``keywords`` when present; otherwise keywords extracted from the
  ``expected_answer``: its distinct content tokens in order of appearance (:func:`ragpulse.judges.text.tokens.
  content_tokens`: jieba words for Chinese, case-folded words for other text, English and Chinese stop words
  and punctuation removed), dropping single Chinese characters (mostly particles and measure words: "人" in
  "12人" is not a keyword, "12" is). If that leaves nothing, all content tokens are kept, and if there are
  none, all tokens (a reference answer "No" gives K = ["no"]).
- **Matching** a keyword k against the answer:

  1. k's case-folded, whitespace-collapsed text occurs in the case-folded answer as a substring, where k
     contains Chinese or several words ("machine learning", "明斯克协议"); a single Latin-script word must
     instead be a whole answer token, so "cat" does not match "category";
  2. or every content token of k (every token when k has only stop words) is among the answer's tokens
     (so the phrase "Delta Lake tables" matches "tables in Delta Lake").

Default threshold 0.3 (pass when at least ~a third of the keywords appear). No expected answer and no
keywords → ``skipped`` ``no_reference``; the other shared rules of :func:`ragpulse.judges.frame.precheck`
apply too (no answer, abstention).

Blind spots: synonyms and paraphrases do not match; a keyword can appear in a negated or wrong statement.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragpulse.judges.frame import Decision, Judge
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


class KeywordJudge(Judge):
    """Keyword overlap between the reference keywords and the answer (``backend=heuristic``).

    Options (``settings.judges["keyword"]``): ``threshold`` (0–1, default :data:`DEFAULT_THRESHOLD`).
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
