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

from ragpulse.judges.frame import CallLog, Decision, JudgeBase
from ragpulse.judges.model.context import format_chunks
from ragpulse.judges.model.parsing import parse_score, parse_verdict
from ragpulse.judges.options import RelevancyOptions
from ragpulse.judges.text import answer_type, forms, lexical
from ragpulse.judges.text.tokens import content_tokens, noun_characters, tokens
from ragpulse.model import Judgement, Trace

__all__ = ["HeuristicRelevancyJudge", "LLMRelevancyJudge"]


def _terms(question: str) -> dict[str, tuple[str, ...]]:
    """The question's terms, key (:func:`forms.form_key`) → pieces: its content tokens, interrogatives left out,
    the first of each key kept; a single Chinese character that jieba cut off the end of the term before it,
    and that jieba's dictionary tags as a noun (:func:`noun_characters`), joins that term — a compound's head,
    not a term of its own: 育儿 + 假 → 育儿假 in "怎么申请育儿假？", 年 + 假 → 年假 in "年假有几天？", 高级 + 版 →
    高级版. Any other character stays a term (丢 in "工牌丢了怎么办？", 坏 in "电脑坏了怎么办？")."""
    words = tokens(question)
    content = set(content_tokens(question))
    groups: list[list[str]] = []
    last = -2  # index in ``words`` of the last piece of ``groups[-1]``
    for i, w in enumerate(words):
        if w not in content or w in lexical.QUESTION_WORDS:
            continue
        prev = groups[-1] if groups else None
        if (
            prev is not None
            and len(w) == 1
            and len(prev) == 1
            and last == i - 1
            and lexical.has_cjk(w)
            and lexical.has_cjk(prev[0])
            and prev[0] + w in question
            and w in noun_characters(question)
        ):
            prev.append(w)
        else:
            groups.append([w])
        last = i
    out: dict[str, tuple[str, ...]] = {}
    for g in groups:
        out.setdefault(forms.form_key("".join(g)), tuple(g))
    return out


_GRADED_MAX = 3.0


def _tail(text: str) -> str:
    """The reply after its first line (the explanation that follows a YES/NO), whitespace-collapsed."""
    _, _, rest = text.strip().partition("\n")
    return " ".join(rest.split())


class LLMRelevancyJudge(JudgeBase):
    """Relevancy of the answer to the question, decided by the judge model (score 0–1, default threshold 0.5)."""

    name = "relevancy"
    Options = RelevancyOptions
    options: RelevancyOptions
    READS_HISTORY = True

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
        history = self.history(trace)
        untrusted = [question, answer, *(t for turn in history for t in (turn.question, turn.answer or ""))]
        if self.needs_context:
            chunks = self.context(trace.contexts, log)
            values["context"] = format_chunks(chunks)
            untrusted.extend(chunks)
        text = await self.ask(log, self.template, self.lang(trace), history, **values)
        if self.graded:
            rating, reason = parse_score(text, scale_max=_GRADED_MAX, untrusted=untrusted)
            return Decision(score=rating / _GRADED_MAX, reason=f"rating {rating:g}/3: {reason}".rstrip(": "))
        score = parse_verdict(text, untrusted=untrusted)
        verdict = {1.0: "relevant", 0.0: "not relevant"}.get(score, f"graded {score:g}")
        tail = _tail(text)
        return Decision(score=score, reason=f"{verdict}: {tail}" if tail else verdict)


class HeuristicRelevancyJudge(JudgeBase):
    """Answer relevancy by lexical engagement with the question (``question_coverage/v5``; see
    ``docs/judges.md``).

    An echo of the question (not an answer taking a stance on a yes/no question,
    :func:`answer_type.takes_stance`, nor the question turned into a statement,
    :func:`answer_type.states_yes_no_question`), or an answer made only of questions, scores 0. A bare yes/no
    answer to a yes/no question ("No, it is not.") scores 1. A question term (content token, interrogatives left
    out; a Chinese noun character jieba cut off the word before it joins that word, :func:`_terms`) is covered by a
    form of it in the answer (:mod:`ragpulse.judges.text.forms`: Snowball stems and simplemma lemmas for English,
    text and character bigrams for Chinese). A short answer (at most :data:`SHORT_ANSWER_TOKENS` distinct content
    tokens, some new, no meta statement, no yes/no opening) that covers no term and is not a whole sentence
    missing the asked-for answer type scores 1; otherwise coverage = (covered − :data:`FREE_TERMS`) / (terms −
    :data:`FREE_TERMS`), raised to 0.5 + 0.5 × coverage when the answer gives the kind of answer the question asks
    for (:mod:`ragpulse.judges.text.answer_type`) and takes up a question term (or the kind is one of
    :data:`SPECIFIC_CUES`, whose cue — an instruction — no unrelated text gives by chance, unlike a digit or a
    "Yes," before words about something else: "Yes, the canteen serves pizza." for "Is parental leave paid?"
    scores 0), × (1 − share of meta statements among its sentences). Options: ``threshold``; the LLM options are
    valid and ignored.

    A follow-up question (the trace has earlier turns, the last ``judge.history_turns`` read): a term of an
    earlier question that the answer takes up, and the follow-up does not repeat, counts as a covered question
    term (it adds to the covered terms and to the terms); one the answer leaves out does not count against it.
    So "Does that apply to contractors?" answered "Contractors get no paid parental leave." engages with the
    conversation about parental leave.
    """

    name = "relevancy"
    Options = RelevancyOptions
    METHOD = "question_coverage/v5"
    READS_HISTORY = True
    #: Question terms an answer gets no credit for: coverage = (covered − this) / (terms − this).
    FREE_TERMS = 0.5
    #: An answer with at most this many distinct content tokens, some new, is a direct (factoid) answer.
    SHORT_ANSWER_TOKENS = 4
    #: Answer kinds whose cue is specific enough to count without a question term (see the class docstring).
    SPECIFIC_CUES = frozenset({"procedure"})

    def method_settings(self) -> dict[str, Any]:
        return {
            "word_forms": "snowball_english+simplemma_lemmas",
            "answer_type": True,
            "free_terms": self.FREE_TERMS,
            "short_answer_tokens": self.SHORT_ANSWER_TOKENS,
            "specific_cues": sorted(self.SPECIFIC_CUES),
        }

    def decide_now(self, trace: Trace) -> Decision | Judgement:
        """Score how much the answer engages with the question (0–1). Pure CPU, no I/O."""
        if not (trace.question or "").strip():
            return self.skipped("no_question")
        self.require_short("question", trace.question)
        self.require_readable(trace.question, trace.answer)
        answer = trace.answer or ""
        q_tokens = content_tokens(trace.question)
        a_tokens = content_tokens(answer)
        question = trace.question or ""
        # an answer that takes a stance on a yes/no question ("No, contractors are not eligible …"), or states
        # it ("Contractors are eligible for parental leave."), repeats its words because it answers it
        if (
            lexical.restates_question(q_tokens, a_tokens)
            and not answer_type.takes_stance(question, answer)
            and not answer_type.states_yes_no_question(question, answer)
        ):
            return Decision(0.0, lexical.ECHO_REASON, "echo")
        sents = lexical.sentences(answer)
        if sents and all(s.rstrip().endswith(("?", "？")) for s in sents):
            return Decision(0.0, "answers with a question", "question_back")
        # what a yes/no answer says after its "Yes," / "不，" (None: no such opening); a bare one is the answer
        rest = answer_type.stance_rest(question, answer)
        own_tokens = a_tokens if rest is None else content_tokens(rest)
        if rest is not None and not own_tokens:
            return Decision(1.0, "direct yes/no answer", "short_answer")
        # key → the question term's pieces (one token, or a jieba word and a single character cut off it:
        # 育儿 + 假), and key → the term as the question writes it, for the reason ("missing: question", not
        # "question"'s stem)
        q_pieces = _terms(question)
        q_words = {k: "".join(p) for k, p in q_pieces.items()}
        q_keys = set(q_words)
        a_keys = {forms.form_key(t) for t in a_tokens}
        own_keys = {forms.form_key(t) for t in own_tokens}
        a_lemmas = {forms.lemma_key(t) for t in a_tokens}
        folded = answer.casefold()

        # A question word is covered by a form of it in the answer (Snowball stems, or the stems of their
        # dictionary lemmas for irregular forms such as paid/pay, :mod:`forms`); a Chinese one
        # also inside the answer's text or by one of its character bigrams (jieba may cut it differently):
        # 延迟 is found in "订单延迟超过", 报销款 in "报销的费用"; a compound cut by jieba (育儿 + 假) when the
        # compound is found so, or each of its pieces is (年 and 假 of 年假 in "每年有15天假").
        def found(key: str, pieces: tuple[str, ...]) -> bool:
            if lexical.has_cjk(key):
                return forms.zh_found(key, folded) or (len(pieces) > 1 and all(p in folded for p in pieces))
            return any(forms.forms_match(key, a) for a in a_keys) or forms.lemma_key(pieces[0]) in a_lemmas

        covered = {k for k in q_keys if found(k, q_pieces[k])}
        # earlier questions of the conversation: their terms the answer takes up count as covered terms
        h_pieces: dict[str, tuple[str, ...]] = {}
        for turn in self.history(trace):
            for k, p in _terms(turn.question).items():
                h_pieces.setdefault(k, p)
        from_history = {k for k, p in h_pieces.items() if k not in q_keys and found(k, p)}
        meta = sum(1 for s in sents if lexical.is_meta_statement(s))
        meta_share = meta / len(sents) if sents else 0.0
        asked = answer_type.asked_type(question)
        typed = asked is not None and (
            answer_type.gives_type(asked, answer) or answer_type.states_procedure(question, answer)
        )
        # A short answer that repeats none of the question's words is a direct (factoid) answer ("Delhi",
        # "12人"); one that repeats some is judged by coverage like any other ("Backups are encrypted with
        # AES-256." for "How often are backups taken?"), and so is a whole sentence (3+ content words and a
        # full stop) that does not give the kind of answer the question asks for.
        sentence_like = len(a_keys) >= 3 and answer.rstrip().endswith((".", "。", "!", "！"))
        if (
            len(a_keys) <= self.SHORT_ANSWER_TOKENS
            and a_keys - q_keys
            and rest is None
            and not meta
            and not covered
            and (typed or not sentence_like)
        ):
            return Decision(1.0, "short direct answer", "short_answer")
        # (covered − ½) / (terms − ½): more than half of the question's terms are needed to reach 0.5 (one of
        # two terms is a shared topic word, not an answer); all of them still give 1
        n, c = len(q_keys) + len(from_history), len(covered) + len(from_history)
        coverage = max(0.0, (c - self.FREE_TERMS) / (n - self.FREE_TERMS)) if n else 1.0
        bonus = bool(c) or not own_keys or asked in self.SPECIFIC_CUES
        if typed and bonus:
            # the answer gives the kind of answer the question asks for (answer_type): that engages with the
            # question as much as repeating half of its words — when it takes up at least one of them, or the
            # kind's cue is specific (a yes/no opening, an instruction): a number or a time alone is in any
            # text, no answer to "How many weeks of parental leave …?" ("Staff parking permits cost 40 EUR per
            # month."); a bare "No." has no words of its own and is the asked-for answer
            coverage = 0.5 + 0.5 * coverage
        score = min(1.0, max(0.0, coverage * (1.0 - meta_share)))
        missing = sorted(q_words[k] for k in q_keys - covered)[:8]
        reason = f"covers {len(covered)}/{len(q_keys)} question terms"
        if from_history:
            reason += f" and {len(from_history)} of the conversation's"
        if rest is not None and not c:
            # "Yes, the canteen serves pizza." for "Is parental leave paid?": the yes is not about the question
            reason += (
                "; opens with yes/no but goes on about none of the question's terms: not an answer to it"
            )
        elif typed:
            reason += f"; gives the asked-for {asked}" + ("" if bonus else " but takes up no question term")
        if meta:
            reason += f"; {meta}/{len(sents)} sentence(s) talk about the context instead of answering"
        if missing and not self.settings.store.redact_text:
            reason += f"; missing: {', '.join(missing)}"
        return Decision(score, reason, "question_coverage")
