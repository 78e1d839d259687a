"""Faithfulness: is the answer supported by the retrieved context? LLM judge and heuristic judge.

LLM modes (option ``mode``; details in ``docs/llm-judges.md``): ``claims`` (default, Ragas/TruLens: one call
lists the answer's claims, each supported or not; score = supported / all; threshold 0.8), ``binary`` (the
claim against the whole context, then each chunk in rank order, then an optional literal match; 1 or 0;
threshold 0.5) and ``sentence_check`` (each answer sentence against each chunk with the fixed prompt of
small fact checkers such as Bespoke-MiniCheck; score = supported / checked sentences; threshold 0.8).
``claims`` and ``sentence_check`` store ``flags.claims`` (:mod:`ragpulse.judges.answer.claims`); when such a
judgement fails, each unsupported claim gets a ``cause`` (retrieval miss or generation error) checked by the
same backend (:mod:`ragpulse.judges.answer.attribution`). Contexts are cut to ``judge_context_budget_chars``
(flagged ``context_truncated``).

The heuristic judge (:class:`HeuristicFaithfulnessJudge`) checks each sentence's lexical support in the best
chunk; its method, measured agreement and blind spots are in ``docs/judges.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.answer import attribution
from ragpulse.judges.answer.attribution import UNCHECKED, Pool
from ragpulse.judges.answer.claims import Claim, Verdict, claims_flag, evidence_of, locate
from ragpulse.judges.frame import CallLog, Decision, JudgeBase
from ragpulse.judges.model.client import ModelUnavailableError
from ragpulse.judges.model.context import fit_context, format_chunks
from ragpulse.judges.model.parsing import extract_json, normalize_verdict_word, parse_verdict
from ragpulse.judges.model.prompts import defuse
from ragpulse.judges.options import FaithfulnessOptions
from ragpulse.judges.text import answer_type, checks, lexical
from ragpulse.judges.text.scripts import unreadable_script
from ragpulse.judges.text.tokens import content_tokens, tokens
from ragpulse.logging import get_logger
from ragpulse.model import Judgement, Trace

__all__ = ["HeuristicFaithfulnessJudge", "LLMFaithfulnessJudge"]

_log = get_logger("ragpulse.judges")

# Words for the short-answer rule: Latin/digit runs, and each CJK character on its own (no jieba: its
# dictionary load would block the event loop on first use).
_WORD_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]|[^\W_]+")
_CLAIM_TEXT_KEYS = ("claim", "statement", "text")
#: The prompt small fact-checking models (Bespoke-MiniCheck) are trained on, as Spring AI's
#: FactCheckingEvaluator sends it; ``{document}`` is one retrieved chunk, ``{claim}`` one answer sentence.
FACT_CHECK_TEMPLATE = "Document: {document}\nClaim: {claim}"
_CLAIM_LABELS = {"en": ("Question", "Answer"), "zh": ("问题", "回答")}


_SNIPPET_CHARS = 160
#: Factor on a sentence's support when one of its entities or numbers stands in another's slot of the context.
SWAP_PENALTY = 0.5
#: Yes/no words: they carry the answer's polarity, which word lookup cannot verify ("no" is a stop word
#: already), so they are not counted as unsupported content.
_POLARITY = frozenset({"yes", "yeah", "yep", "nope", "否", "不是", "是的", "对的", "没错"})
#: Reply words of a bare yes/no answer ("Yes.", "No, it isn't.", "是的。", "不是。"), by the stance they take.
_YES_WORDS = frozenset(
    "yes yeah yep sure correct right true indeed 是 是的 对 对的 没错 有 可以 能 会 行".split()
)
_NO_WORDS = frozenset("no nope not false incorrect 否 不 不是 不对 没 没有 不可以 不能 不会 不行".split())
#: What :func:`checks.context_edit` found, for the reason.
_EDIT_NOTES = {
    checks.ContextEdit.NEGATION: "a negation added to or dropped from a context sentence",
    checks.ContextEdit.SWAP: "two names or numbers of a context sentence exchanged",
    checks.ContextEdit.SUBSTITUTION: "another name or number in a context sentence's",
    checks.ContextEdit.REPLACED_NAME: "a word the context does not hold in place of a context sentence's name or number",
}
#: Reason code (and start of the reason) of a judgement with nothing to check: the LLM judge's code.
NO_CLAIMS = "no_claims"


def _bare_stance(answer: str) -> bool | None:
    """``True``/``False`` when ``answer`` is only a yes or a no ("Yes.", "No, it isn't.", "是的。", "不是。"):
    every content word a reply word, and all reply words of one stance; ``None`` otherwise."""
    words = tokens(answer)
    if any(t not in _YES_WORDS and t not in _NO_WORDS for t in content_tokens(answer)):
        return None
    no = any(t in _NO_WORDS or checks.is_negation(t) for t in words)
    yes = any(t in _YES_WORDS for t in words)
    return None if no == yes else yes


def _snippet(text: str) -> str:
    """``text`` on one line, without the clause's closing ``;`` (the reason goes on with "; causes: …"), cut to
    :data:`_SNIPPET_CHARS` characters."""
    text = " ".join(text.split()).rstrip(";；")
    return text if len(text) <= _SNIPPET_CHARS else text[: _SNIPPET_CHARS - 1] + "…"


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def _references_too_long(judge: JudgeBase, trace: Trace) -> str | None:
    """``attribution_failed: text_too_long: …`` when finding the trace's missed ground-truth contexts would read
    a text over ``judge.max_text_chars`` (they are matched with the retrieved contexts lexically, and
    ``sentence_check`` sends each one whole to the model), else ``None``."""
    try:
        if trace.reference_contexts or trace.labelled_contexts:
            judge.require_short("retrieved context", *trace.contexts)
        judge.require_short("reference context", *trace.reference_contexts)
        judge.require_short("labelled context", *(trace.labelled_contexts or ()))
    except JudgeError as e:
        return f"attribution_failed: {e}"
    return None


class LLMFaithfulnessJudge(JudgeBase):
    """Faithfulness of the answer to the retrieved context, decided by the judge model (score 0–1)."""

    name = "faithfulness"
    Options = FaithfulnessOptions
    options: FaithfulnessOptions
    needs_context = True
    READS_HISTORY = True
    #: Default thresholds per mode.
    THRESHOLDS: ClassVar[dict[str, float]] = {"claims": 0.8, "binary": 0.5, "sentence_check": 0.8}

    def configure(self) -> None:
        o = self.options
        self.mode = o.mode
        self.literal_match = o.literal_match
        self.literal_min_chars = o.literal_min_chars
        self.short_answer_tokens = o.short_answer_tokens
        if self.mode != "binary" and self.literal_match:
            raise ConfigError("judge.options.faithfulness.literal_match applies to mode binary only")
        self.fact_check_template = o.template or FACT_CHECK_TEMPLATE
        missing = [p for p in ("{document}", "{claim}") if p not in self.fact_check_template]
        if missing:
            raise ConfigError(f"judge.options.faithfulness.template: lacks {' and '.join(missing)}")

    def template_names(self) -> Sequence[str]:
        if self.mode == "claims":
            return ["faithfulness_claims", "faithfulness_attribution"]
        return [] if self.mode == "sentence_check" else [f"faithfulness_{self.mode}"]

    def version_settings(self) -> dict[str, Any]:
        if self.mode == "claims":
            return self.model_version_settings(mode="claims", attribution=attribution.ATTRIBUTION)
        if self.mode == "sentence_check":
            return self.model_version_settings(
                mode="sentence_check",
                template=self.fact_check_template,
                max_calls_per_trace=self.options.max_calls_per_trace,
                attribution=attribution.ATTRIBUTION,
            )
        return self.model_version_settings(
            mode="binary",
            literal_match=self.literal_match,
            literal_min_chars=self.literal_min_chars,
            short_answer_tokens=self.short_answer_tokens,
        )

    def default_threshold(self) -> float:
        return self.THRESHOLDS[self.mode]

    def reads_history(self) -> bool:
        return self.mode != "sentence_check"  # its fact-check template has no question

    async def decide(self, trace: Trace, log: CallLog) -> Decision | Judgement:
        chunks = self.context(trace.contexts, log)
        lang = self.lang(trace)
        if self.mode == "claims":
            return await self._claims(trace, chunks, lang, log)
        if self.mode == "sentence_check":
            return await self._sentence_check(trace, chunks, log)
        return await self._binary(trace, chunks, lang, log)

    # -- claims ----------------------------------------------------------------------------------------
    async def _claims(self, trace: Trace, chunks: list[str], lang: str, log: CallLog) -> Decision | Judgement:
        question, answer = trace.question or "", trace.answer or ""
        history = self.history(trace)
        text = await self.ask(
            log,
            "faithfulness_claims",
            lang,
            history,
            question=question,
            answer=answer,
            context=format_chunks(chunks),
        )
        untrusted = [question, answer, *chunks, *(t.question for t in history)]
        obj = extract_json(text, required=("claims", "statements"), untrusted=untrusted)
        items = obj.get("claims", obj.get("statements"))
        if not isinstance(items, list):
            raise JudgeError("unparseable", "'claims' is not a list")
        claims: list[Claim] = []
        for item in items:
            if not isinstance(item, dict):
                raise JudgeError("unparseable", "a claim is not an object")
            claim = next((str(item[k]) for k in _CLAIM_TEXT_KEYS if k in item), "")
            raw = item.get("supported", item.get("verdict"))
            verdict = normalize_verdict_word(raw)
            contradicted = isinstance(raw, str) and raw.strip().casefold().startswith("contradict")
            if verdict is None and not contradicted:
                raise JudgeError("unparseable", f"claim without a yes/no 'supported' value: {claim[:80]}")
            start, end = locate(claim, answer) or (None, None)
            label: Verdict = "contradicted" if contradicted else "supported" if verdict else "unsupported"
            claims.append(Claim(claim.strip(), start, end, label))
        return await self._claims_decision(trace, claims, "claims", log, lang=lang)

    async def _claims_decision(
        self,
        trace: Trace,
        claims: list[Claim],
        decided_by: str,
        log: CallLog,
        note: str = "",
        *,
        lang: str = "en",
        calls_left: int = 0,
    ) -> Decision | Judgement:
        """Score = supported / checked claims (``unchecked`` ones left out); ``flags.claims`` the details; a
        failing score attributes each unsupported claim (:meth:`_attribute`)."""
        checked = [c for c in claims if c.verdict != "unchecked"]
        if not checked:
            return self.skipped("no_claims: the judge model found no factual claims in the answer" + note)
        supported = sum(1 for c in checked if c.verdict == "supported")
        score = supported / len(checked)
        reason = f"{supported}/{len(checked)} claims supported"
        unsupported = [c.text for c in checked if c.verdict != "supported"]
        if unsupported and not self.settings.store.redact_text:
            reason += "; unsupported: " + "; ".join(unsupported)
        flags: dict[str, Any] = {}
        if score < self.threshold and attribution.targets(claims):
            claims, flags["attribution"] = await self._attribute(trace, claims, log, lang, calls_left)
            note = attribution.cause_note(flags["attribution"]) + note
        flags["claims"] = claims_flag(claims, redact_text=self.settings.store.redact_text)
        return Decision(score, reason + note, decided_by, flags)

    async def _attribute(
        self, trace: Trace, claims: list[Claim], log: CallLog, lang: str, calls_left: int
    ) -> tuple[list[Claim], dict[str, Any]]:
        """Causes of the unsupported claims (:func:`attribution.attribute`), checked against the trace's
        ground-truth contexts that were not retrieved by the same model and prompt style that judged them; a
        failed check leaves every cause undecided with the reason, never fails the judgement. When the
        retrieved context was cut by the budget, a claim no missed context supports stays undecided (the
        judge did not see the whole retrieval, so "generation error" would be a guess)."""
        too_long = _references_too_long(self, trace)
        if too_long is not None:
            return attribution.attribute(claims, Pool(()), None, failure=too_long)
        pool = attribution.missed_references(trace)
        unseen = None
        if log.context_truncated:
            unseen = "context_truncated: retrieved chunks over the context budget were not judged"
        if pool is None or not pool.missed:
            return attribution.attribute(claims, pool, None, unchecked_refs=unseen)
        texts = [claims[i].text for i in attribution.targets(claims)]
        accepted = len(log.replies)
        try:
            if self.mode == "claims":
                found, cut = await self._attribution_call(log, lang, texts, pool)
                missing = "unparseable: the judge model gave no verdict for the claim"
                return attribution.attribute(
                    claims, pool, found, unchecked_refs=unseen or cut, unchecked_reason=missing
                )
            found = await self._attribution_checks(log, texts, pool, calls_left)
            return attribution.attribute(claims, pool, found, unchecked_refs=unseen)
        except JudgeError as e:
            if isinstance(e, ModelUnavailableError):
                log.retries += e.retries
            del log.replies[accepted:]  # a reply that failed the check is never cached (the verdict stands)
            return attribution.attribute(
                claims, pool, None, failure=f"attribution_failed: {str(e) or e.code}"
            )
        except Exception as e:
            _log.error("attribution_internal_error", judge=self.name, trace_id=trace.trace_id, exc_info=e)
            return attribution.attribute(
                claims, pool, None, failure=f"attribution_failed: internal_error: {type(e).__name__}"
            )

    async def _attribution_call(
        self, log: CallLog, lang: str, texts: list[str], pool: Pool
    ) -> tuple[list[int | None], str | None]:
        """One ``faithfulness_attribution`` call: every claim against every missed context (cut to the context
        budget); per claim the index of the supporting context or ``None``, and why some went unchecked."""
        refs = [r.text for r in pool.missed]
        kept, truncated = fit_context(refs, self.settings.judge.context_budget_chars)
        cut = None
        if truncated:
            whole = sum(1 for k, r in zip(kept, refs, strict=False) if k == r)
            cut = f"reference_truncated: {len(refs) - whole} reference context(s) over the context budget"
        numbered = "\n".join(f"{i}. {t}" for i, t in enumerate(texts, 1))
        reply = await self.ask(
            log, "faithfulness_attribution", lang, claims=numbered, passages=format_chunks(kept)
        )
        obj = extract_json(reply, required=("verdicts",), untrusted=[*texts, *kept])
        items = obj.get("verdicts")
        if not isinstance(items, list):
            raise JudgeError("unparseable", "'verdicts' is not a list")
        found: list[int | None] = [UNCHECKED] * len(texts)
        for item in items:
            if not isinstance(item, dict):
                raise JudgeError("unparseable", "a verdict is not an object")
            n, p = item.get("claim"), item.get("passage")
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(texts):
                raise JudgeError("unparseable", f"claim number out of range: {n!r}")
            if p is None or p == 0:
                hit = None
            elif isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= len(kept):
                raise JudgeError("unparseable", f"passage number out of range: {p!r}")
            else:
                hit = p - 1
            if found[n - 1] == UNCHECKED:
                found[n - 1] = hit
        return found, cut

    async def _attribution_checks(
        self, log: CallLog, texts: list[str], pool: Pool, calls_left: int
    ) -> list[int | None]:
        """``sentence_check``: each sentence against each missed context with the fact-checking template,
        stopping at the first that supports it, within ``calls_left`` calls (then :data:`UNCHECKED`)."""
        found: list[int | None] = []
        for sentence in texts:
            hit: int | None = None
            for k, ref in enumerate(pool.missed):
                if calls_left == 0:
                    hit = UNCHECKED
                    break
                calls_left -= 1
                if await self._fact_check(log, ref.text, sentence) >= 0.5:
                    hit = k
                    break
            found.append(hit)
        return found

    async def _fact_check(self, log: CallLog, document: str, claim: str) -> float:
        """One fact-checking call: does ``document`` support ``claim`` (1.0/0.0, or a graded score)."""
        prompt = self.fact_check_template.replace("{document}", defuse(document))
        text = await self.ask_prompt(log, prompt.replace("{claim}", defuse(claim)))
        return parse_verdict(text, untrusted=[claim, document])

    # -- sentence_check --------------------------------------------------------------------------------
    async def _sentence_check(self, trace: Trace, chunks: list[str], log: CallLog) -> Decision | Judgement:
        """Each answer sentence against each chunk (rank order, stopping at the first that supports it), one
        call each with the fact-checking template; at most ``max_calls_per_trace`` calls."""
        answer = trace.answer or ""
        calls_left = self.options.max_calls_per_trace
        claims: list[Claim] = []
        for start, end in lexical.sentence_spans(answer):
            sentence = answer[start:end]
            verdict: Verdict = "unsupported"
            evidence = None
            for rank, chunk in enumerate(chunks):
                if calls_left == 0:
                    verdict = "unchecked"
                    break
                calls_left -= 1
                if await self._fact_check(log, chunk, sentence) >= 0.5:
                    verdict, evidence = "supported", evidence_of(trace, rank)
                    break
            claims.append(Claim(sentence, start, end, verdict, evidence))
        unchecked = sum(1 for c in claims if c.verdict == "unchecked")
        note = (
            f"; {unchecked} sentence(s) unchecked (max_calls_per_trace {self.options.max_calls_per_trace})"
            if unchecked
            else ""
        )
        return await self._claims_decision(trace, claims, "sentence_check", log, note, calls_left=calls_left)

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
        history = self.history(trace)
        text = await self.ask(
            log, "faithfulness_binary", lang, history, claim=claim, context=format_chunks(chunks)
        )
        score = parse_verdict(text, untrusted=untrusted)
        if score > 0:  # yes, or a graded score the model gave instead
            return Decision(score, "supported by the retrieved context", "whole_context")
        if len(chunks) > 1:
            for rank, chunk in enumerate(chunks):
                text = await self.ask(log, "faithfulness_binary", lang, claim=claim, context=chunk)
                score = parse_verdict(text, untrusted=untrusted)
                if score > 0:
                    return Decision(score, f"supported by retrieved chunk {rank}", f"chunk:{rank}")
        answer = (trace.answer or "").strip()
        if self.literal_match and len(answer) >= self.literal_min_chars:
            folded = _fold(answer)
            if any(folded in _fold(c) for c in trace.contexts):
                return Decision(1.0, "the context contains the answer literally", "literal")
        return Decision(0.0, "not supported by the retrieved context", "unsupported")


class HeuristicFaithfulnessJudge(JudgeBase):
    """Faithfulness by sentence-level lexical support (``sentence_support/v6``; see ``docs/judges.md``).

    An answer that only restates the question scores 0 — not one that takes a stance on a yes/no question
    (:func:`answer_type.takes_stance`: "No, contractors are not eligible …"), whose opening reply word is
    stripped before the check (:func:`answer_type.strip_stance`). Per sentence (:func:`lexical.sentence_spans`): a meta
    statement about the context scores 0, a courtesy sentence or chat talk (:func:`checks.is_chat_talk`: a
    question, short exclamation or first-person sentence that names nothing) is left out, any other — its
    leading or trailing hedge stripped (:func:`checks.strip_hedge`) — scores the weighted share of its new
    content tokens (not from the question, not yes/no words; all its tokens when every one is from the question,
    as the question is never evidence) found in the single best chunk
    (:func:`lexical.best_chunk_support`; for Chinese the mean with character-bigram support), halved
    (:data:`SWAP_PENALTY`) when a name or number of it stands in another's slot of the context
    (:func:`lexical.swapped_slot`), it copies a context sentence with a negation, name or number edited or a
    name replaced by a common word (:func:`checks.context_edit`), or it turns the polarity of a word of the
    context in other words (:func:`checks.polarity_conflict`: "…, but it is not paid" for "paid parental
    leave"); the reason says which. score = mean sentence support, at most the least support +
    :data:`WORST_MARGIN`; ``flags.claims`` has one entry per sentence. A sentence with nothing to check
    ("Yes." in a longer answer) is left out; a bare yes/no answer is decided against the question's
    proposition (:meth:`_bare_yes_no`); an answer with nothing to check is skipped (``no_claims``). The idea is Ragas/TruLens faithfulness
    (Es et al., 2023) with token support instead of an LLM verdict; the edits are FactCC's perturbation types
    (Kryściński et al., 2020); chat talk is the non-claim part of knowledge-grounded dialogue (FaithDial,
    Dziri et al., 2022).

    Options: ``threshold`` (default :data:`DEFAULT_THRESHOLD`); the LLM modes' options are valid and ignored.
    """

    name = "faithfulness"
    Options = FaithfulnessOptions
    needs_context = True
    #: Pass threshold shipped by default (mean sentence support, 0–1).
    DEFAULT_THRESHOLD = 0.65
    METHOD = "sentence_support/v6"
    READS_HISTORY = True
    #: The score is at most the least-supported sentence's support plus this: one sentence with less than
    #: half of its words supported (a partial hallucination) fails the answer at the default threshold.
    WORST_MARGIN = 0.2

    def method_settings(self) -> dict[str, Any]:
        return {"attribution": attribution.ATTRIBUTION, "worst_margin": self.WORST_MARGIN}

    def _attribute(
        self,
        trace: Trace,
        claims: list[Claim],
        support: Callable[[str, Sequence[str], Sequence[lexical.ChunkIndex]], tuple[float, int]],
    ) -> tuple[list[Claim], dict[str, Any]]:
        """Causes of the unsupported sentences: ``support`` (the judge's own rule) against the trace's
        ground-truth contexts that were not retrieved (:mod:`ragpulse.judges.answer.attribution`)."""
        too_long = _references_too_long(self, trace)
        if too_long is not None:
            return attribution.attribute(claims, Pool(()), None, failure=too_long)
        pool = attribution.missed_references(trace)
        if pool is None or not pool.missed:
            return attribution.attribute(claims, pool, None)
        texts = [r.text for r in pool.missed]
        script = unreadable_script(texts)
        if script is not None:
            failure = f"attribution_failed: unsupported_language: the reference contexts hold {script} text"
            return attribution.attribute(claims, pool, None, failure=failure)
        index = [lexical.chunk_index(t) for t in texts]
        found: list[int | None] = []
        for i in attribution.targets(claims):
            value, k = support(claims[i].text, texts, index)
            found.append(k if k >= 0 and value >= self.threshold else None)
        return attribution.attribute(claims, pool, found)

    def decide_now(self, trace: Trace) -> Decision | Judgement:
        """Score how much of the answer the retrieved context supports (0–1). Pure CPU, no I/O; a few ms
        for a 5,000-character context."""
        answer = trace.answer or ""
        self.require_short("question", trace.question)
        self.require_short("retrieved context", *trace.contexts)
        self.require_readable(answer, *trace.contexts)
        chunks = [lexical.chunk_index(c) for c in trace.contexts]
        q_tokens = set(content_tokens(trace.question))
        # words of the conversation's earlier questions are not new claims either (never evidence)
        history_tokens = {t for turn in self.history(trace) for t in content_tokens(turn.question)}
        q_grams: set[str] | None = (
            None  # the question's character bigrams, made for the first Chinese sentence
        )
        a_tokens = content_tokens(answer)
        # an answer that takes a stance on a yes/no question ("No, contractors are not eligible …") is a claim
        # to check, not an echo
        if lexical.restates_question(q_tokens, a_tokens) and not answer_type.takes_stance(
            trace.question or "", answer
        ):
            return Decision(0.0, lexical.ECHO_REASON, "echo")
        stance = _bare_stance(answer)
        if stance is not None:
            return self._bare_yes_no(trace, stance)
        salient = lexical.salient_terms(answer)
        redact = self.settings.store.redact_text

        def check(
            sentence: str, texts: Sequence[str], index: Sequence[lexical.ChunkIndex]
        ) -> tuple[float, int, str]:
            """The sentence's support in the best of ``texts`` (0–1), that text's index (-1: none) and why the
            support was halved ("" when it was not; -1 support: nothing to check)."""
            nonlocal q_grams
            # the reply word opening a yes/no answer ("No, …", "是的，…") is its stance, not a claim: a leading
            # "No," would read as a negation added to the context's sentence
            claim = checks.strip_hedge(answer_type.strip_stance(sentence))
            words = [t for t in content_tokens(claim) if t not in _POLARITY]
            if not words:
                return -1.0, -1, ""
            # Words taken from the question are not new claims, but the question is never evidence: a sentence
            # made only of question words (a question that wrongly carries the passages, issue 23) is checked
            # on all its words.
            new = [t for t in words if t not in q_tokens and t not in history_tokens] or words
            value, chunk_i = lexical.best_chunk_support(new, index, salient)
            if lexical.has_cjk(sentence):
                if q_grams is None:
                    q_grams = set(lexical.char_bigrams(trace.question or ""))
                all_grams = lexical.char_bigrams(claim)
                grams = [g for g in all_grams if g not in q_grams] or all_grams
                value = (value + lexical.best_chunk_bigram_support(grams, index)) / 2
            if chunk_i < 0 or value < self.threshold:
                return value, chunk_i, ""
            # every word is in the context, but an entity or number sits in another's place, the sentence
            # copies a context sentence with a negation, name or number edited, or it turns the polarity of a
            # word the context states (or negates)
            chunk = texts[chunk_i]
            note = ""
            swapped = lexical.swapped_slot(sentence, chunk)
            if swapped is not None:
                note = (
                    "swapped: "
                    + ("a name or number" if redact else f'"{swapped}"')
                    + " stands in another's place"
                )
            elif (edit := checks.context_edit(claim, chunk)) is not None:
                note = f"edited: {_EDIT_NOTES[edit]}"
            elif (flip := checks.polarity_conflict(claim, chunk)) is not None:
                word = "a word" if redact else f'"{flip.word}"'
                note = (
                    f"contradicted: negates {word}, which the context states"
                    if flip.negated
                    else f"contradicted: states {word}, which the context negates"
                )
            if note:
                value *= SWAP_PENALTY
            return value, chunk_i, note

        def support(
            sentence: str, texts: Sequence[str], index: Sequence[lexical.ChunkIndex]
        ) -> tuple[float, int]:
            value, chunk_i, _ = check(sentence, texts, index)
            return max(value, 0.0), chunk_i

        supports: list[tuple[float, str, int]] = []
        notes: list[str] = []
        claims: list[Claim] = []
        for start, end in lexical.sentence_spans(answer):
            sentence = answer[start:end]
            if lexical.is_meta_statement(sentence):
                supports.append((0.0, sentence, -1))
                notes.append("")
                claims.append(Claim(sentence, start, end, "unsupported"))
                continue
            if lexical.is_courtesy(sentence) or checks.is_chat_talk(sentence):
                claims.append(Claim(sentence, start, end, "unchecked"))
                continue
            value, chunk_i, note = check(sentence, trace.contexts, chunks)
            if value < 0:  # only reply words ("Yes.") or question words: nothing to check
                claims.append(Claim(sentence, start, end, "unchecked"))
                continue
            supports.append((value, sentence, chunk_i))
            notes.append(note)
            ok_ = value >= self.threshold
            evidence = evidence_of(trace, chunk_i) if ok_ else None
            claims.append(Claim(sentence, start, end, "supported" if ok_ else "unsupported", evidence))
        if not supports:
            # courtesy, chat talk or reply words only: a pass would be a verdict on nothing
            return self.skipped(f"{NO_CLAIMS}: the answer has no content words to check")
        mean = sum(s for s, _, _ in supports) / len(supports)
        lowest = min(s for s, _, _ in supports)
        score = min(mean, lowest + self.WORST_MARGIN)
        extra: dict[str, Any] = {}
        cause = ""
        if score < self.threshold and attribution.targets(claims):
            claims, extra["attribution"] = self._attribute(trace, claims, support)
            cause = attribution.cause_note(extra["attribution"])
        flags = {"claims": claims_flag(claims, redact_text=self.settings.store.redact_text), **extra}
        worst_i = min(range(len(supports)), key=lambda i: supports[i][0])
        worst = supports[worst_i]
        unsupported = sum(1 for s, _, _ in supports if s < self.threshold)
        # With redact_text the store keeps no answer text, so the reason names the sentence by position only.
        where = f"sentence {worst_i + 1}" if self.settings.store.redact_text else _snippet(worst[1])
        capped = (
            f" (capped at the least supported + {self.WORST_MARGIN:.2f}: {score:.2f})" if score < mean else ""
        )
        why = f"; {notes[worst_i]}" if notes[worst_i] else ""
        reason = (
            f"mean support {mean:.2f}{capped} over {len(supports)} sentence(s), {unsupported} below "
            f"{self.threshold:.2f}; least supported ({worst[0]:.2f}): {where}{why}{cause}"
        )
        return Decision(min(1.0, max(0.0, score)), reason, "sentence_support", flags)

    def _bare_yes_no(self, trace: Trace, yes: bool) -> Decision | Judgement:
        """A bare "Yes." or "No." (``yes``: which) decided against the yes/no question's proposition: the
        question's content words (without its question words, 是否/吗 …) found together in a context sentence
        that negates none of them (:func:`checks.proposition_polarity`) — "Yes." to "Is parental leave paid?"
        against "Employees get 16 weeks of paid parental leave." is supported (1.0), "No." contradicted (0.0).
        Skipped (``no_claims``) when the question is not a yes/no question, holds a negation itself, or the
        context does not state the proposition one way for sure."""
        question = trace.question or ""
        said = "yes" if yes else "no"
        if answer_type.asked_type(question) != "yesno":
            return self.skipped(f"{NO_CLAIMS}: a bare {said} to a question that is not a yes/no question")
        q_words = tokens(question)
        if any(checks.is_negation(t) for t in q_words if t not in checks.ASKING_WORDS):
            return self.skipped(f"{NO_CLAIMS}: a bare {said} to a negated question is not checked")
        words = [t for t in content_tokens(question) if t not in checks.ASKING_WORDS]
        stated = {checks.proposition_polarity(words, c) for c in trace.contexts} - {None}
        if len(stated) != 1:
            return self.skipped(
                f"{NO_CLAIMS}: a bare {said}; the context does not state for sure whether the question's "
                "proposition holds"
            )
        holds = stated.pop()
        verdict: Verdict
        if holds == yes:
            verdict = "supported"
            reason = f"bare {said}: the context {'states' if holds else 'negates'} what the question asks"
        else:
            verdict = "contradicted"
            reason = (
                f"contradicted: bare {said}, but the context {'states' if holds else 'negates'} what the "
                "question asks"
            )
        answer = trace.answer or ""
        span = answer.strip()
        start = answer.find(span)
        claims = [Claim(span, start, start + len(span), verdict)]
        flags = {"claims": claims_flag(claims, redact_text=self.settings.store.redact_text)}
        return Decision(1.0 if holds == yes else 0.0, reason, "yes_no", flags)
