"""Relevancy: does the answer address the question? LLM judge and heuristic judge.

LLM (details in ``docs/llm-judges.md``): TruLens "answer relevance" (question ↔ answer, no context) by
default; ``mode: with_context`` also asks whether the answer is in line with the retrieved context (Spring
AI ``RelevancyEvaluator``). YES/NO gives 1 or 0, ``graded: true`` a 0–3 rating normalised to 0–1; threshold
0.5. No question → ``skipped``/``no_question``.

The heuristic judge (:class:`HeuristicRelevancyJudge`) measures lexical engagement with the question; its
method and blind spots are in ``docs/judges.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragpulse.judges.frame import CallLog, Decision, Judge
from ragpulse.judges.model.context import format_chunks
from ragpulse.judges.model.parsing import parse_score, parse_verdict
from ragpulse.judges.options import RelevancyOptions
from ragpulse.judges.text import lexical
from ragpulse.judges.text.tokens import content_tokens
from ragpulse.model import Judgement, Trace

__all__ = ["HeuristicRelevancyJudge", "LLMRelevancyJudge"]

_GRADED_MAX = 3.0


def _stem_key(token: str, prefix: int) -> str:
    """Token key for loose matching: English tokens cut to their first ``prefix`` characters."""
    return token if lexical.has_cjk(token) else token[:prefix]


def _tail(text: str) -> str:
    """The reply after its first line (the explanation that follows a YES/NO), whitespace-collapsed."""
    _, _, rest = text.strip().partition("\n")
    return " ".join(rest.split())


class LLMRelevancyJudge(Judge):
    """Relevancy of the answer to the question, decided by the judge model (score 0–1, default threshold 0.5)."""

    name = "relevancy"
    Options = RelevancyOptions
    options: RelevancyOptions

    def configure(self) -> None:
        self.mode = self.options.mode
        self.graded = self.options.graded
        self.needs_context = self.mode == "with_context"
        self.template = (
            "relevancy" + ("_context" if self.needs_context else "") + ("_graded" if self.graded else "")
        )

    def template_names(self) -> Sequence[str]:
        return [self.template]

    def version_settings(self) -> dict[str, Any]:
        return self.model_version_settings(mode=self.mode, graded=self.graded)

    async def decide(self, trace: Trace, log: CallLog) -> Decision | Judgement:
        question, answer = trace.question or "", trace.answer or ""
        if not question.strip():
            return self.skipped("no_question: relevancy needs the question")
        values = {"question": question, "answer": answer}
        untrusted = [question, answer]
        if self.needs_context:
            chunks = self.context(trace.contexts, log)
            values["context"] = format_chunks(chunks)
            untrusted.extend(chunks)
        text = await self.ask(log, self.template, self.lang(trace), **values)
        if self.graded:
            rating, reason = parse_score(text, scale_max=_GRADED_MAX, untrusted=untrusted)
            return Decision(score=rating / _GRADED_MAX, reason=f"rating {rating:g}/3: {reason}".rstrip(": "))
        score = parse_verdict(text, untrusted=untrusted)
        verdict = {1.0: "relevant", 0.0: "not relevant"}.get(score, f"graded {score:g}")
        tail = _tail(text)
        return Decision(score=score, reason=f"{verdict}: {tail}" if tail else verdict)


class HeuristicRelevancyJudge(Judge):
    """Answer relevancy by lexical engagement with the question (``question_coverage/v1``; see
    ``docs/judges.md``).

    An echo of the question, or an answer made only of questions, scores 0; a short direct answer (at most
    :data:`SHORT_ANSWER_TOKENS` distinct content tokens, some new, no meta statement) scores 1; otherwise score
    = share of the question's content tokens (interrogatives left out, English compared on their first
    :data:`STEM_PREFIX` characters, Chinese also as substrings) that the answer repeats × (1 − share of meta
    statements among its sentences). Options: ``threshold``; the LLM options are valid and ignored.
    """

    name = "relevancy"
    Options = RelevancyOptions
    METHOD = "question_coverage/v1"
    STEM_PREFIX = 6
    #: An answer with at most this many distinct content tokens, some new, is a direct (factoid) answer.
    SHORT_ANSWER_TOKENS = 4

    def method_settings(self) -> dict[str, Any]:
        return {"stem_prefix": self.STEM_PREFIX, "short_answer_tokens": self.SHORT_ANSWER_TOKENS}

    def decide_now(self, trace: Trace) -> Decision | Judgement:
        """Score how much the answer engages with the question (0–1). Pure CPU, no I/O."""
        if not (trace.question or "").strip():
            return self.skipped("no_question")
        self.require_short("question", trace.question)
        self.require_readable(trace.question, trace.answer)
        answer = trace.answer or ""
        q_tokens = content_tokens(trace.question)
        a_tokens = content_tokens(answer)
        if lexical.restates_question(q_tokens, a_tokens):
            return Decision(0.0, lexical.ECHO_REASON, "echo")
        sents = lexical.sentences(answer)
        if sents and all(s.rstrip().endswith(("?", "？")) for s in sents):
            return Decision(0.0, "answers with a question", "question_back")
        # key → the question's own word (the first with that key), for the reason: "missing: question", not "questi"
        q_words: dict[str, str] = {}
        for t in q_tokens:
            if t not in lexical.QUESTION_WORDS:
                q_words.setdefault(_stem_key(t, self.STEM_PREFIX), t)
        q_keys = set(q_words)
        a_keys = {_stem_key(t, self.STEM_PREFIX) for t in a_tokens}
        folded = answer.casefold()
        # Chinese question words also count when they occur inside the answer's text (jieba may cut it
        # differently): 延迟 is found in "订单延迟超过".
        a_keys |= {k for k in q_keys if lexical.has_cjk(k) and k in folded}
        meta = sum(1 for s in sents if lexical.is_meta_statement(s))
        meta_share = meta / len(sents) if sents else 0.0
        if len(set(a_keys)) <= self.SHORT_ANSWER_TOKENS and a_keys - q_keys and not meta:
            return Decision(1.0, "short direct answer", "short_answer")
        coverage = len(q_keys & a_keys) / len(q_keys) if q_keys else 1.0
        score = min(1.0, max(0.0, coverage * (1.0 - meta_share)))
        missing = sorted(q_words[k] for k in q_keys - a_keys)[:8]
        reason = f"covers {len(q_keys & a_keys)}/{len(q_keys)} question terms"
        if meta:
            reason += f"; {meta}/{len(sents)} sentence(s) talk about the context instead of answering"
        if missing and not self.settings.store.redact_text:
            reason += f"; missing: {', '.join(missing)}"
        return Decision(score, reason, "question_coverage")
