"""LLM relevancy judge: does the answer address the question?

Method (source): TruLens "answer relevance" (question ↔ answer, no context) by default, so it costs few tokens
and does not overlap with faithfulness; the ``with_context`` mode also asks whether the answer is in line with
the retrieved context (Spring AI ``RelevancyEvaluator`` behaviour). The model answers YES/NO (score 1 or 0) or,
with ``graded: true``, a 0–3 rating with a one-sentence reason, normalised to 0–1 (``rating / 3``).

Options (``settings.judge.options.relevancy``): ``mode`` (``question`` default, ``with_context``), ``graded`` (bool,
default false), ``threshold`` (default 0.5: YES passes, NO fails; graded 2–3 pass, 0–1 fail) and the common
LLM-judge options (see :mod:`ragpulse.judges.llm_judge`). ``with_context`` needs retrieved context: without
any the judgement is ``ok``, score 0, reason ``no_context``. A trace without a question is ``skipped`` with
reason ``no_question`` (the engine normally filters those out first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ragpulse.judges.llm_judge import CallLog, Decision, LLMJudge
from ragpulse.judges.parsing import parse_score, parse_yes_no
from ragpulse.judges.prompts import format_chunks
from ragpulse.model import Judgement, Trace

__all__ = ["LLMRelevancyJudge"]

_GRADED_MAX = 3.0


def _tail(text: str) -> str:
    """The reply after its first line (the explanation that follows a YES/NO), whitespace-collapsed."""
    _, _, rest = text.strip().partition("\n")
    return " ".join(rest.split())


class LLMRelevancyJudge(LLMJudge):
    """Relevancy of the answer to the question, decided by the judge model (score 0–1, default threshold 0.5)."""

    name: ClassVar[str] = "relevancy"
    OPTIONS: ClassVar[frozenset[str]] = frozenset({"mode", "graded"})
    DEFAULT_THRESHOLD: ClassVar[float] = 0.5

    def _configure(self) -> tuple[Sequence[str], dict[str, Any]]:
        self.mode = self._choice_option("mode", ("question", "with_context"))
        self.graded = self._bool_option("graded", False)
        self.needs_context = self.mode == "with_context"
        template = (
            "relevancy" + ("_context" if self.needs_context else "") + ("_graded" if self.graded else "")
        )
        self.template = template
        return [template], {"mode": self.mode, "graded": self.graded}

    async def _decide(self, trace: Trace, lang: str, log: CallLog) -> Decision | Judgement:
        question, answer = trace.question or "", trace.answer or ""
        if not question.strip():
            return self._skipped("no_question: relevancy needs the question")
        values = {"question": question, "answer": answer}
        untrusted = [question, answer]
        if self.needs_context:
            chunks = self._context(trace, log)
            values["context"] = format_chunks(chunks)
            untrusted.extend(chunks)
        text = await self._ask(self.template, lang, log, **values)
        if self.graded:
            rating, reason = parse_score(text, scale_max=_GRADED_MAX, untrusted=untrusted)
            return Decision(score=rating / _GRADED_MAX, reason=f"rating {rating:g}/3: {reason}".rstrip(": "))
        yes = parse_yes_no(text, untrusted=untrusted)
        verdict = "relevant" if yes else "not relevant"
        tail = _tail(text)
        return Decision(score=1.0 if yes else 0.0, reason=f"{verdict}: {tail}" if tail else verdict)
