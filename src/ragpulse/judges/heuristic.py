"""Offline judges: deterministic lexical relevancy and faithfulness for Chinese and English (``backend=heuristic``).

They are the default when no judge model is configured (``RAGPULSE_JUDGE_MODEL`` unset): no network, no
model, the same verdict for the same input on every machine, tens of microseconds to a few milliseconds per
trace. They catch answers that are not grounded in their context or that do not engage with the question at
the level of words; they cannot see negation, wrong relations between right words, or paraphrase. Methods and
measured agreement with human labels are in ``docs/judges.md``.
"""

from __future__ import annotations

import time
from typing import Any

from ragpulse.judges import lexical
from ragpulse.judges.base import precheck, skipped
from ragpulse.judges.offline import OfflineJudge
from ragpulse.judges.text import content_tokens
from ragpulse.model import Judgement, Trace

__all__ = ["HeuristicFaithfulnessJudge", "HeuristicRelevancyJudge"]

_SNIPPET_CHARS = 160
#: Yes/no words: they carry the answer's polarity, which word lookup cannot verify ("no" is a stop word
#: already), so they are not counted as unsupported content.
_POLARITY = frozenset({"yes", "yeah", "yep", "nope", "否", "不是", "是的", "对的", "没错"})


_ECHO_REASON = "restates_question: the answer only repeats the question"


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 1] + "…"


def _stem_key(token: str, prefix: int) -> str:
    """Token key for loose matching: English tokens cut to their first ``prefix`` characters."""
    return token if lexical.has_cjk(token) else token[:prefix]


class HeuristicFaithfulnessJudge(OfflineJudge):
    """Faithfulness by sentence-level lexical support (answer ↔ retrieved context).

    Method (``sentence_support/v1``):

    1. Shared rules (:func:`ragpulse.judges.base.precheck`): no answer / abstention → ``skipped``; no
       retrieved context → ``ok``, score 0, reason ``no_context``.
    2. An answer that only restates the question (:func:`lexical.restates_question`) → score 0: it makes no
       claim the context could support.
    3. The answer is split into sentences (:func:`lexical.sentences`). For each sentence:

       - a meta statement about the context ("the context does not mention …", "文中未提及…") → support 0;
       - a courtesy sentence (apology, thanks, reassurance: "Sorry for the delay", "非常抱歉给您带来不便")
         is left out: it carries no claim worth checking (:func:`lexical.is_courtesy`);
       - otherwise its *new* content tokens are taken: content tokens minus those of the question (words the
         user supplied are not evidence either way) and minus yes/no words (polarity cannot be looked up). No new token → support 1 (nothing to verify).
       - support = weighted share of the new tokens found in the **single best** context chunk (claims are
         checked chunk by chunk, not against a bag of every chunk's words). Tokens with digits weigh 2,
         code identifiers (``foreachBatch``, ``df.write.csv``) 2, capitalised names 1.5, others 1
         (:func:`lexical.token_weight`). Chinese words also match as
         substrings of the chunk, so jieba segmenting a word differently in the context does not count
         against the answer.
       - a sentence with Chinese text also gets a character-bigram support (share of its bigrams, minus
         the question's, found in the best chunk); its support is the mean of the two, because word
         boundaries are uncertain and numbers stick to their units ("2014年2月" → "20", "01", "14", "4年", …).

    4. score = mean sentence support (0–1); ``passed`` = score ≥ threshold (default
       :data:`DEFAULT_THRESHOLD`). ``reason`` names the least-supported sentence (quoted, or by position
       when ``settings.store.redact_text`` is on, so no answer text reaches the store).

    The idea of checking each answer statement against the context is the one of Ragas/TruLens
    faithfulness (Es et al., 2023, "RAGAS"), done with token support instead of an LLM verdict.

    Known blind spots: negation and wrong relations between supported words ("X does not support Y" when the
    context says it does) pass; correct paraphrases and general knowledge not in the context fail; long
    contexts make chance matches of common words likelier. The threshold was chosen in the middle of the
    range where balanced accuracy was stable on both halves of ares_human (see ``docs/judges.md``).

    Options (``settings.judge.options["faithfulness"]``): ``threshold`` (0–1). Other options (LLM modes) are ignored.

    Raises:
        ConfigError: (constructor) the threshold option is not a number in [0, 1].
    """

    DEFAULT_NAME = "faithfulness"
    #: Pass threshold shipped by default (mean sentence support, 0–1).
    DEFAULT_THRESHOLD = 0.65
    METHOD = "sentence_support/v1"

    def evaluate(self, trace: Trace) -> Judgement:
        """Score how much of the answer the retrieved context supports (0–1); never raises.

        Pure CPU, no I/O; a few ms for a 5,000-character context.
        """
        start = time.perf_counter()
        pre = precheck(trace, threshold=self.threshold, needs_context=True, **self._common())
        if pre is not None:
            return pre
        answer = trace.answer or ""
        chunks = [lexical.chunk_index(c) for c in trace.contexts]
        q_tokens = set(content_tokens(trace.question))
        q_grams: set[str] | None = (
            None  # the question's character bigrams, made for the first Chinese sentence
        )
        a_tokens = content_tokens(answer)
        if lexical.restates_question(q_tokens, a_tokens):
            return self._ok(0.0, _ECHO_REASON, "echo", start)
        salient = lexical.salient_terms(answer)
        supports: list[tuple[float, str, int]] = []
        for sentence in lexical.sentences(answer):
            if lexical.is_meta_statement(sentence):
                supports.append((0.0, sentence, -1))
                continue
            if lexical.is_courtesy(sentence):
                continue
            new = [t for t in content_tokens(sentence) if t not in q_tokens and t not in _POLARITY]
            value, chunk_i = lexical.best_chunk_support(new, chunks, salient)
            if lexical.has_cjk(sentence):
                if q_grams is None:
                    q_grams = set(lexical.char_bigrams(trace.question or ""))
                grams = [g for g in lexical.char_bigrams(sentence) if g not in q_grams]
                value = (value + lexical.best_chunk_bigram_support(grams, chunks)) / 2
            supports.append((value, sentence, chunk_i))
        if not supports:
            return self._ok(1.0, "no content words to check", "sentence_support", start)
        score = sum(s for s, _, _ in supports) / len(supports)
        worst_i = min(range(len(supports)), key=lambda i: supports[i][0])
        worst = supports[worst_i]
        unsupported = sum(1 for s, _, _ in supports if s < self.threshold)
        # With redact_text the store keeps no answer text, so the reason names the sentence by position only.
        where = f"sentence {worst_i + 1}" if self._settings.store.redact_text else _snippet(worst[1])
        reason = (
            f"mean support {score:.2f} over {len(supports)} sentence(s), {unsupported} below "
            f"{self.threshold:.2f}; least supported ({worst[0]:.2f}): {where}"
        )
        return self._ok(min(1.0, max(0.0, score)), reason, "sentence_support", start)


class HeuristicRelevancyJudge(OfflineJudge):
    """Answer relevancy by lexical engagement with the question (question ↔ answer, no context).

    Method (``question_coverage/v1``):

    1. Shared rules (:func:`ragpulse.judges.base.precheck`): no answer / abstention → ``skipped``; no
       question → ``skipped`` ``no_question``.
    2. The answer only restates the question, or every sentence of it is itself a question → score 0.
       A short answer (at most :data:`SHORT_ANSWER_TOKENS` distinct content tokens, at least one not from
       the question, no meta statement) is a direct factoid answer ("Delhi", "12人") → score 1.
    3. coverage = share of the question's distinct content tokens, interrogatives such as 如何/什么 left
       out (:data:`lexical.QUESTION_WORDS`), that the answer repeats; English tokens compared on their first
       6 characters (a cheap stand-in for stemming: ``partitioning`` ~ ``partitioned``), Chinese words whole
       or as a substring of the answer.
    4. score = coverage × (1 − share of the answer's sentences that are meta statements about the context,
       such as "the context does not mention …").

    ``passed`` = score ≥ threshold (default :data:`DEFAULT_THRESHOLD`).

    Known blind spots: an answer may repeat the question's words and still not answer it (topic drift within
    the same vocabulary passes); a correct answer in other words ("When?" → "In 1844.") covers few question
    tokens and may fail; a short off-topic answer ("Banana.") passes as a direct answer. Use the LLM backend
    where that matters.

    Options (``settings.judge.options["relevancy"]``): ``threshold`` (0–1). Other options are ignored.

    Raises:
        ConfigError: (constructor) the threshold option is not a number in [0, 1].
    """

    DEFAULT_NAME = "relevancy"
    DEFAULT_THRESHOLD = 0.5
    METHOD = "question_coverage/v1"
    STEM_PREFIX = 6
    #: An answer with at most this many distinct content tokens, some new, is a direct (factoid) answer.
    SHORT_ANSWER_TOKENS = 4

    def _version_settings(self) -> dict[str, Any]:
        return {"stem_prefix": self.STEM_PREFIX, "short_answer_tokens": self.SHORT_ANSWER_TOKENS}

    def evaluate(self, trace: Trace) -> Judgement:
        """Score how much the answer engages with the question (0–1); never raises. Pure CPU, no I/O."""
        start = time.perf_counter()
        pre = precheck(trace, threshold=self.threshold, **self._common())
        if pre is not None:
            return pre
        if not (trace.question or "").strip():
            return skipped(reason="no_question", threshold=self.threshold, **self._common())
        answer = trace.answer or ""
        q_tokens = content_tokens(trace.question)
        a_tokens = content_tokens(answer)
        if lexical.restates_question(q_tokens, a_tokens):
            return self._ok(0.0, _ECHO_REASON, "echo", start)
        sents = lexical.sentences(answer)
        if sents and all(s.rstrip().endswith(("?", "？")) for s in sents):
            return self._ok(0.0, "answers with a question", "question_back", start)
        q_keys = {_stem_key(t, self.STEM_PREFIX) for t in q_tokens if t not in lexical.QUESTION_WORDS}
        a_keys = {_stem_key(t, self.STEM_PREFIX) for t in a_tokens}
        folded = answer.casefold()
        # Chinese question words also count when they occur inside the answer's text (jieba may cut it
        # differently): 延迟 is found in "订单延迟超过".
        a_keys |= {k for k in q_keys if lexical.has_cjk(k) and k in folded}
        meta = sum(1 for s in sents if lexical.is_meta_statement(s))
        meta_share = meta / len(sents) if sents else 0.0
        if len(set(a_keys)) <= self.SHORT_ANSWER_TOKENS and a_keys - q_keys and not meta:
            return self._ok(1.0, "short direct answer", "short_answer", start)
        coverage = len(q_keys & a_keys) / len(q_keys) if q_keys else 1.0
        score = min(1.0, max(0.0, coverage * (1.0 - meta_share)))
        missing = sorted(q_keys - a_keys)[:8]
        reason = f"covers {len(q_keys & a_keys)}/{len(q_keys)} question terms"
        if meta:
            reason += f"; {meta}/{len(sents)} sentence(s) talk about the context instead of answering"
        if missing and not self._settings.store.redact_text:
            reason += f"; missing: {', '.join(missing)}"
        return self._ok(score, reason, "question_coverage", start)
