"""LLM faithfulness judge: is the answer supported by the retrieved context?

Two modes (``settings.judge.options.faithfulness.mode``):

``claims`` (default; the Ragas/TruLens method)
    One model call splits the answer into atomic claims and marks each supported or not by the context (one
    structured JSON answer). score = supported claims / all claims; the reason lists the unsupported ones.
    Default threshold 0.8. A reply with no claims at all is ``skipped`` with reason ``no_claims``.

``binary`` (the seed design's three-stage strategy), score 1 or 0, default threshold 0.5:
    (a) the claim — question + answer for answers of at most ``short_answer_tokens`` words (default 8; a
    CJK character counts as one word),
    else the answer — is checked against the whole retrieved context (``decided_by="whole_context"``);
    (b) if unsupported and there are several chunks, against each chunk in rank order, passing on the first
    supporting one (``decided_by="chunk:<0-based rank>"``);
    (c) only with ``literal_match: true`` (off by default): passes when the context contains the answer
    literally (case and whitespace folded) and the answer has at least ``literal_min_chars`` characters
    (default 20) so that "Yes" or "2" cannot match by chance (``decided_by="literal"``).
    Nothing supports it → score 0 (``decided_by="unsupported"``).

Both modes: an abstaining answer is ``skipped``/``abstained``; no retrieved context → ``ok``, score 0,
``no_context`` (no model call). Contexts are cut to ``judge_context_budget_chars`` (top-ranked chunks first,
flagged ``context_truncated``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.llm_judge import CallLog, Decision, LLMJudge
from ragpulse.judges.parsing import find_json_object, normalize_verdict_word, parse_yes_no
from ragpulse.judges.prompts import format_chunks
from ragpulse.model import Judgement, Trace

__all__ = ["LLMFaithfulnessJudge"]

# Words for the short-answer rule: Latin/digit runs, and each CJK character on its own (no jieba: its
# dictionary load would block the event loop on first use).
_WORD_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]|[^\W_]+")
_CLAIM_TEXT_KEYS = ("claim", "statement", "text")
_CLAIM_LABELS = {"en": ("Question", "Answer"), "zh": ("问题", "回答")}


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


class LLMFaithfulnessJudge(LLMJudge):
    """Faithfulness of the answer to the retrieved context, decided by the judge model (score 0–1)."""

    name: ClassVar[str] = "faithfulness"
    OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"mode", "literal_match", "literal_min_chars", "short_answer_tokens"}
    )
    needs_context = True
    #: Default thresholds per mode.
    THRESHOLDS: ClassVar[dict[str, float]] = {"claims": 0.8, "binary": 0.5}

    def _configure(self) -> tuple[Sequence[str], dict[str, Any]]:
        self.mode = self._choice_option("mode", ("claims", "binary"))
        self.literal_match = self._bool_option("literal_match", False)
        self.literal_min_chars = self._int_option("literal_min_chars") or 20
        self.short_answer_tokens = self._int_option("short_answer_tokens") or 8
        if self.mode == "claims":
            if self.literal_match:
                raise ConfigError("judges.faithfulness.literal_match applies to mode binary only")
            return ["faithfulness_claims"], {"mode": "claims"}
        return ["faithfulness_binary"], {
            "mode": "binary",
            "literal_match": self.literal_match,
            "literal_min_chars": self.literal_min_chars,
            "short_answer_tokens": self.short_answer_tokens,
        }

    def _default_threshold(self) -> float:
        return self.THRESHOLDS[self.mode]

    async def _decide(self, trace: Trace, lang: str, log: CallLog) -> Decision | Judgement:
        chunks = self._context(trace, log)
        if self.mode == "claims":
            return await self._claims(trace, chunks, lang, log)
        return await self._binary(trace, chunks, lang, log)

    # -- claims ----------------------------------------------------------------------------------------
    async def _claims(self, trace: Trace, chunks: list[str], lang: str, log: CallLog) -> Decision | Judgement:
        question, answer = trace.question or "", trace.answer or ""
        text = await self._ask(
            "faithfulness_claims", lang, log, question=question, answer=answer, context=format_chunks(chunks)
        )
        if not text.strip():
            raise JudgeError("empty_output", "the judge model returned no text")
        obj = find_json_object(text, required=("claims", "statements"), untrusted=[question, answer, *chunks])
        if obj is None:
            raise JudgeError("unparseable", "no JSON object with a 'claims' list in the reply")
        items = obj.get("claims", obj.get("statements"))
        if not isinstance(items, list):
            raise JudgeError("unparseable", "'claims' is not a list")
        supported: list[str] = []
        unsupported: list[str] = []
        for item in items:
            if not isinstance(item, dict):
                raise JudgeError("unparseable", "a claim is not an object")
            claim = next((str(item[k]) for k in _CLAIM_TEXT_KEYS if k in item), "")
            verdict = normalize_verdict_word(item.get("supported", item.get("verdict")))
            if verdict is None:
                raise JudgeError("unparseable", f"claim without a yes/no 'supported' value: {claim[:80]}")
            (supported if verdict else unsupported).append(claim)
        total = len(supported) + len(unsupported)
        if total == 0:
            return self._skipped(
                "no_claims: the judge model found no factual claims in the answer", flags=log.flags()
            )
        reason = f"{len(supported)}/{total} claims supported"
        if unsupported:
            reason += "; unsupported: " + "; ".join(c.strip() for c in unsupported)
        return Decision(score=len(supported) / total, reason=reason)

    # -- binary ----------------------------------------------------------------------------------------
    def _claim_text(self, trace: Trace, lang: str) -> str:
        answer = (trace.answer or "").strip()
        if len(_WORD_RE.findall(answer)) <= self.short_answer_tokens and trace.question:
            q_label, a_label = _CLAIM_LABELS.get(lang, _CLAIM_LABELS["en"])
            return f"{q_label}: {trace.question.strip()}\n{a_label}: {answer}"
        return answer

    async def _binary(self, trace: Trace, chunks: list[str], lang: str, log: CallLog) -> Decision:
        claim = self._claim_text(trace, lang)
        untrusted = [trace.question or "", trace.answer or "", *chunks]
        text = await self._ask("faithfulness_binary", lang, log, claim=claim, context=format_chunks(chunks))
        if parse_yes_no(text, untrusted=untrusted):
            return Decision(1.0, "supported by the retrieved context", "whole_context")
        if len(chunks) > 1:
            for rank, chunk in enumerate(chunks):
                text = await self._ask("faithfulness_binary", lang, log, claim=claim, context=chunk)
                if parse_yes_no(text, untrusted=untrusted):
                    return Decision(1.0, f"supported by retrieved chunk {rank}", f"chunk:{rank}")
        answer = (trace.answer or "").strip()
        if self.literal_match and len(answer) >= self.literal_min_chars:
            folded = _fold(answer)
            if any(folded in _fold(c) for c in trace.contexts):
                return Decision(1.0, "the context contains the answer literally", "literal")
        return Decision(0.0, "not supported by the retrieved context", "unsupported")
