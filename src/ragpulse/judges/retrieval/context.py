"""Retrieval judges: context precision, context recall (Ragas) and context relevance (TruLens).

Each judge decides with (option ``method``: ``auto`` | ``labels`` | ``llm`` | ``heuristic``; ``auto`` = labels
when the trace carries them, else the judge model when one is configured, else the heuristic): **labels**
(:mod:`ragpulse.judges.retrieval.labels`, no model call, ``backend=heuristic``), **llm** (one call per trace
with the numbered chunks; chunks cut by the context budget count as not relevant) or **heuristic**
(:mod:`ragpulse.judges.text.statements`: statement support / question coverage ≥ ``min_coverage``). Scores
(formulas in :mod:`ragpulse.judges.formulas`, definitions and edge cases in ``docs/reference-metrics.md``):
precision = mean of precision@k over the ranks holding a useful chunk, recall = supported reference
statements (or relevant labelled chunks retrieved) / all, relevance = relevant chunks / retrieved chunks;
threshold 0.5. ``flags.verdicts`` keeps the per-chunk (or per-statement) 0/1 verdicts; option ``k`` limits
the judges to the top ``k`` chunks; an empty retrieval is ``ok`` 0.0, ``no_context``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.formulas import average_precision, share
from ragpulse.judges.frame import REPLY_PROTOCOL, UNREADABLE_SCRIPTS, CallLog, Decision, JudgeBase
from ragpulse.judges.model.context import format_chunks
from ragpulse.judges.model.parsing import extract_json, normalize_verdict_word
from ragpulse.judges.model.prompts import JSON_SYSTEM, prompt_pair_text
from ragpulse.judges.options import ContextOptions
from ragpulse.judges.retrieval.labels import (
    LabelError,
    LabelledRelevance,
    labelled_relevance,
    reference_context_relevance,
)
from ragpulse.judges.text.statements import coverage, split_statements, supported
from ragpulse.model import Backend, Judgement, Trace

__all__ = ["ContextPrecisionJudge", "ContextRecallJudge", "ContextRelevanceJudge"]


@dataclass(frozen=True)
class _Flags:
    flags: tuple[bool, ...]
    backend: Backend
    decided_by: str


def _reference(trace: Trace) -> str | None:
    if trace.expected_answer and trace.expected_answer.strip():
        return trace.expected_answer
    if trace.keywords:
        return "；".join(trace.keywords)
    return None


def _reference_statements(trace: Trace) -> list[str]:
    if trace.expected_answer and trace.expected_answer.strip():
        return split_statements(trace.expected_answer)
    return [k for k in (trace.keywords or ()) if k.strip()]


def _ranks(flags: Sequence[bool]) -> str:
    r = [str(i + 1) for i, f in enumerate(flags) if f]
    return ", ".join(r) if r else "none"


def _recall_reason(sup: Sequence[bool], missing: Sequence[str]) -> str:
    reason = f"{sum(sup)} of {len(sup)} reference statements supported by the context"
    if missing:
        reason += "; unsupported: " + " | ".join(missing)
    return reason


def _passage_verdicts(verdicts: Any, key: str, n: int) -> list[bool]:
    """One flag per passage 1..n from the reply's ``verdicts``.

    When the verdicts carry ``passage`` numbers (as the prompts ask), the numbers are the mapping: every
    passage exactly once, none out of range (a duplicate, missing or out-of-range number → ``unparseable``);
    without numbers, the verdicts are taken in order (extra ones ignored).
    """
    if not isinstance(verdicts, list) or not all(isinstance(v, dict) for v in verdicts):
        raise JudgeError("unparseable", "no list of verdict objects in the judge reply")
    by_number = any("passage" in v for v in verdicts)
    if not by_number:
        if len(verdicts) < n:
            raise JudgeError("unparseable", f"expected {n} verdicts in the judge reply, got {len(verdicts)}")
        verdicts = verdicts[:n]
    out: dict[int, bool] = {}
    for i, v in enumerate(verdicts, 1):
        number = v.get("passage") if by_number else i
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number)
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= n or number in out:
            raise JudgeError("unparseable", f"passage number {number!r} is duplicate or not in 1..{n}")
        b = normalize_verdict_word(v.get(key))
        if b is None:
            raise JudgeError("unparseable", f"verdict without a boolean {key!r}: {v!r}"[:200])
        out[number] = b
    missing = sorted(set(range(1, n + 1)) - set(out))
    if missing:
        raise JudgeError("unparseable", f"no verdict for passage(s) {', '.join(map(str, missing))}")
    return [out[i] for i in range(1, n + 1)]


class _ContextJudge(JudgeBase):
    """Shared set-up: method selection, model, prompts, top-k."""

    Options = ContextOptions
    options: ContextOptions
    #: Retrieval judges do not look at the answer: a trace without one can still be judged.
    needs_answer = False
    SYSTEM = JSON_SYSTEM
    default_coverage: ClassVar[float] = 0.6

    def configure(self) -> None:
        self.method = self.options.method
        if self.method == "llm" and self.client is None:
            raise ConfigError(f"{self.name}: method llm needs a judge model (RAGPULSE_JUDGE_MODEL)")
        if self.method not in ("auto", "llm"):
            self.client = None
        self.k = self.options.k
        cov = self.options.min_coverage
        self.min_coverage = self.default_coverage if cov is None else cov

    def template_names(self) -> Sequence[str]:
        return [self.name]

    def version_settings(self) -> dict[str, Any]:
        vs: dict[str, Any] = {
            "method": self.method,
            "k": self.k,
            "min_coverage": self.min_coverage,
            "threshold": self.threshold,
            "model": self.model,
            **self.options.model_dump(include={"language", "max_tokens"}, exclude_none=True),
        }
        if self.client is None:
            vs["unreadable_scripts"] = UNREADABLE_SCRIPTS
        if self.client is not None:
            vs["prompt"] = prompt_pair_text(self.templates, self.name)
            vs["budget"] = self.settings.judge.context_budget_chars
            vs["reply_protocol"] = REPLY_PROTOCOL
        return vs

    def _top(self, items: Sequence[Any]) -> list[Any]:
        return list(items if self.k is None else items[: self.k])

    def _labels(self, trace: Trace) -> LabelledRelevance | None:
        if self.method not in ("auto", "labels"):
            return None
        if trace.reference_contexts or trace.labelled_contexts:  # compared with the retrieved texts
            self.require_short("retrieved context", *trace.contexts)
            self.require_short("reference context", *trace.reference_contexts)
            self.require_short("labelled context", *(trace.labelled_contexts or ()))
        try:
            return labelled_relevance(trace) or reference_context_relevance(trace)
        except LabelError as e:
            raise JudgeError("bad_labels", str(e)) from e

    def _no_labels(self) -> Judgement:
        return self.skipped("no_labels: the trace carries no context_labels")

    async def _chunk_flags(self, trace: Trace, log: CallLog) -> _Flags | Judgement:
        """Per-chunk flags of the (top ``k``) retrieved chunks, from labels when the trace has them, else from
        :meth:`_unlabelled_flags`; or the ``ok``/``skipped`` judgement when there is nothing to judge."""
        if not trace.documents and not trace.contexts:
            return self._no_context()
        labels = self._labels(trace)
        if labels is not None:
            return _Flags(tuple(self._top(labels.retrieved)), Backend.HEURISTIC, labels.source)
        if self.method == "labels":
            return self._no_labels()
        chunks = self._top(trace.contexts)
        if not chunks:
            return self._no_context()
        if not (trace.question and trace.question.strip()):
            return self.skipped("no_question")
        return await self._unlabelled_flags(trace, trace.question, chunks, log)

    async def _unlabelled_flags(
        self, trace: Trace, question: str, chunks: list[str], log: CallLog
    ) -> _Flags | Judgement:
        raise NotImplementedError

    def _no_context(self) -> Judgement:
        return self.ok(
            0.0, "no_context: no retrieved context", backend=Backend.HEURISTIC, decided_by="no_context"
        )

    async def _model_flags(
        self, trace: Trace, chunks: list[str], key: str, log: CallLog, **fields: str
    ) -> _Flags:
        """One model call: a verdict per numbered chunk (``key``: ``useful``/``relevant``); chunks cut by the
        context budget count as not relevant."""
        kept = self.context(chunks, log)
        text = await self.ask(log, self.name, self.lang(trace), passages=format_chunks(kept), **fields)
        obj = extract_json(text, required=("verdicts",), untrusted=[*fields.values(), *kept])
        flags = _passage_verdicts(obj.get("verdicts"), key, len(kept))
        flags.extend([False] * (len(chunks) - len(kept)))
        return _Flags(tuple(flags), Backend.LLM, "llm")

    async def decide(self, trace: Trace, log: CallLog) -> Decision | Judgement:
        """Per-chunk flags (:meth:`_chunk_flags`) scored by :meth:`_score` (precision and relevance)."""
        flags = await self._chunk_flags(trace, log)
        if isinstance(flags, Judgement):
            return flags
        return self._decision(*self._score(flags.flags), flags)

    def _score(self, flags: tuple[bool, ...]) -> tuple[float, str]:
        raise NotImplementedError

    def _decision(self, score: float, reason: str, f: _Flags) -> Decision:
        return Decision(score, reason, f.decided_by, {"verdicts": [int(x) for x in f.flags]}, f.backend)


class ContextPrecisionJudge(_ContextJudge):
    """Rank-aware context precision (Ragas): are the useful chunks ranked first?

    Score = Σ_k precision@k · useful_k / (useful chunks), over the retrieved chunks in rank order; a perfect
    ranking is exactly 1.0, no useful chunk 0.0. Needs retrieved chunks, and (unless labelled) the question
    and a reference (expected answer, keywords, else the answer). Default threshold 0.5.
    """

    name = "context_precision"

    async def _unlabelled_flags(
        self, trace: Trace, question: str, chunks: list[str], log: CallLog
    ) -> _Flags | Judgement:
        ref = _reference(trace) or (trace.answer if trace.answer and trace.answer.strip() else None)
        if ref is None:
            return self.skipped("no_reference: no expected answer, keywords or answer")
        if self.client is not None:
            return await self._model_flags(trace, chunks, "useful", log, question=question, reference=ref)
        self.require_short("reference", ref)
        self.require_short("retrieved context", *chunks)
        self.require_readable(ref, *chunks)
        stmts = split_statements(ref) or [ref]
        hf = tuple(any(supported(s, [c], self.min_coverage) for s in stmts) for c in chunks)
        return _Flags(hf, Backend.HEURISTIC, "heuristic")

    def _score(self, flags: tuple[bool, ...]) -> tuple[float, str]:
        score = average_precision(flags)
        return score, f"{sum(flags)} of {len(flags)} retrieved chunks useful (ranks {_ranks(flags)}); " + (
            f"average precision {score:.4f}"
        )


class ContextRecallJudge(_ContextJudge):
    """Context recall (Ragas): share of the ground truth the retrieved chunks support.

    With labels: relevant chunks among the (top ``k``) retrieved / all chunks labelled relevant. Otherwise the
    reference (expected answer, else each keyword) is split into statements and each is checked against the
    retrieved chunks; score = supported / total. No reference → ``skipped``/``no_reference``; a reference
    without statements → ``skipped``/``no_statements``. Default threshold 0.5.
    """

    name = "context_recall"

    async def decide(self, trace: Trace, log: CallLog) -> Decision | Judgement:
        labels = self._labels(trace)
        if labels is not None:
            if labels.total_relevant == 0:
                return self.skipped("no_reference: no chunk is labelled relevant")
            if not trace.documents:
                return self._no_context()
            found = labels.found(self.k)
            score = min(1.0, found / labels.total_relevant)
            what = "chunks labelled relevant" if labels.source == "labels" else "reference contexts"
            reason = f"{found} of {labels.total_relevant} {what} were retrieved"
            if self.k is not None:
                reason += f" in the top {self.k}"
            return self._decision(
                score, reason, _Flags(tuple(self._top(labels.retrieved)), Backend.HEURISTIC, labels.source)
            )
        if self.method == "labels":
            return self._no_labels()
        ref = _reference(trace)
        if ref is None:
            return self.skipped("no_reference")
        chunks = self._top(trace.contexts)
        if not chunks:
            return self._no_context()
        if self.client is not None:
            return await self._model_recall(trace, chunks, ref, log)
        self.require_short("reference", ref)
        self.require_short("retrieved context", *chunks)
        self.require_readable(ref, *chunks)
        stmts = _reference_statements(trace)
        if not stmts:
            return self.skipped("no_statements: the reference has no statements")
        sup = [supported(s, chunks, self.min_coverage) for s in stmts]
        missing = [s for s, ok_ in zip(stmts, sup, strict=True) if not ok_]
        return self._decision(
            share(sup) or 0.0,
            _recall_reason(sup, missing),
            _Flags(tuple(sup), Backend.HEURISTIC, "heuristic"),
        )

    async def _model_recall(self, trace: Trace, chunks: list[str], ref: str, log: CallLog) -> Decision:
        question = trace.question or ""
        kept = self.context(chunks, log)
        text = await self.ask(
            log, self.name, self.lang(trace), question=question, reference=ref, passages=format_chunks(kept)
        )
        items = extract_json(text, required=("statements",), untrusted=[question, ref, *kept]).get(
            "statements"
        )
        if not isinstance(items, list) or not items:
            raise JudgeError("unparseable", "no statements in the judge reply")
        sup: list[bool] = []
        missing: list[str] = []
        for it in items:
            b = normalize_verdict_word(it.get("supported")) if isinstance(it, dict) else None
            if b is None:
                raise JudgeError("unparseable", f"statement without a boolean 'supported': {it!r}"[:200])
            sup.append(b)
            if not b:
                missing.append(str(it.get("statement", "")))
        return self._decision(
            share(sup) or 0.0,
            _recall_reason(sup, missing),
            _Flags(tuple(sup), Backend.LLM, "llm"),
        )


class ContextRelevanceJudge(_ContextJudge):
    """Context relevance (TruLens): share of the retrieved chunks relevant to the question.

    For online traffic without ground truth: needs only the question and the retrieved chunks. Default
    threshold 0.5.
    """

    name = "context_relevance"
    default_coverage = 0.5

    async def _unlabelled_flags(
        self, trace: Trace, question: str, chunks: list[str], log: CallLog
    ) -> _Flags | Judgement:
        if self.client is not None:
            return await self._model_flags(trace, chunks, "relevant", log, question=question)
        self.require_short("question", question)
        self.require_short("retrieved context", *chunks)
        self.require_readable(question, *chunks)
        hf = tuple(coverage(question, c) >= self.min_coverage for c in chunks)
        return _Flags(hf, Backend.HEURISTIC, "heuristic")

    def _score(self, flags: tuple[bool, ...]) -> tuple[float, str]:
        reason = (
            f"{sum(flags)} of {len(flags)} retrieved chunks relevant to the question (ranks {_ranks(flags)})"
        )
        return share(flags) or 0.0, reason
