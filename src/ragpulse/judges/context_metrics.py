"""Retrieval judges: context precision, context recall (Ragas) and context relevance (TruLens).

Each judge decides, in order of preference (option ``method``: ``auto`` | ``labels`` | ``llm`` |
``heuristic``; ``auto`` = labels when the trace carries them, else the judge model when one is configured,
else the heuristic):

- **labels** (:mod:`ragpulse.judges.labels`): labelled chunk relevance (``context_labels``), else the
  ground-truth contexts (``reference_contexts``: a retrieved chunk is relevant when it matches one), no model
  call, ``backend=heuristic``, ``decided_by="labels"`` or ``"reference_contexts"``;
- **llm**: one judge-model call per trace with the numbered chunks (top-ranked first within
  ``judge_context_budget_chars``; chunks cut by the budget count as not relevant and the judgement is flagged
  ``context_truncated``);
- **heuristic** (:mod:`ragpulse.judges.lexsupport`): a chunk is useful for a reference when it supports one
  of the reference's statements (coverage ≥ ``min_coverage``, default 0.6), and relevant to a question when
  it covers ≥ ``min_coverage`` (default 0.5) of the question's content tokens.

Scores (all 0–1; formulas in :mod:`ragpulse.judges.refmath`):

=====================  =====================================================================  =========
judge                  score                                                                  threshold
=====================  =====================================================================  =========
``context_precision``  mean of precision@k over the ranks k holding a useful chunk (Ragas)     0.5
``context_recall``     supported ground-truth statements / all of them (Ragas); with labels:  0.5
                       relevant chunks retrieved (in the top ``k``) / chunks labelled relevant
                       (reference contexts: reference contexts retrieved / all of them)
``context_relevance``  relevant chunks / retrieved chunks (TruLens)                           0.5
=====================  =====================================================================  =========

``flags.verdicts`` keeps the per-item verdicts (0/1): one per retrieved chunk in rank order (precision,
relevance, label recall) or per reference statement (statement recall).

Edge cases: an empty retrieval scores ``ok`` 0.0 with reason ``no_context`` and no model call (recall first
needs a reference: without one it is ``skipped``/``no_reference``). Context precision and recall do not need
the answer; precision uses the expected answer (or keywords) as reference and falls back to the answer
(Ragas' reference-free variant). Option ``k`` limits all three judges to the top ``k`` retrieved chunks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.base import ok, skipped
from ragpulse.judges.labels import (
    LabelError,
    LabelledRelevance,
    labelled_relevance,
    reference_context_relevance,
)
from ragpulse.judges.lexsupport import coverage, split_statements, supported
from ragpulse.judges.refbase import FrameJudge, ModelCaller, ModelReply, check_options, resolve_caller
from ragpulse.judges.refmath import average_precision, share
from ragpulse.judges.refprompt import PromptPair, as_bool, extract_json, load_prompts, render_passages
from ragpulse.judges.text import detect_language
from ragpulse.model import Backend, Judgement, Trace

__all__ = ["ContextPrecisionJudge", "ContextRecallJudge", "ContextRelevanceJudge"]

METHODS = ("auto", "labels", "llm", "heuristic")


@dataclass(frozen=True)
class _Flags:
    flags: tuple[bool, ...]
    backend: Backend
    decided_by: str
    reply: ModelReply | None = None
    truncated: bool = False


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


class _ContextJudge(FrameJudge):
    """Shared set-up: method selection, model, prompts, top-k."""

    judge_name = ""
    prompt_name = ""
    #: Retrieval judges do not look at the answer: a trace without one can still be judged.
    needs_answer = False
    prompt_placeholders: tuple[str, ...] = ()
    default_coverage = 0.6

    def __init__(
        self,
        settings: Settings,
        options: Mapping[str, Any] | None = None,
        *,
        client: object | None = None,
        caller: ModelCaller | None = None,
    ) -> None:
        options = check_options(
            self.judge_name, dict(options or {}), {"method", "k", "min_coverage", "threshold"}
        )
        caller = caller or resolve_caller(settings, client)
        self.method = str(options.get("method", "auto"))
        if self.method not in METHODS:
            raise ConfigError(f"{self.judge_name}: method must be one of {METHODS}, got {self.method!r}")
        if self.method == "llm" and caller is None:
            raise ConfigError(f"{self.judge_name}: method llm needs a judge model (RAGPULSE_JUDGE_MODEL)")
        self.caller = caller if self.method in ("auto", "llm") else None
        k = options.get("k")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
            raise ConfigError(f"{self.judge_name}: k must be an integer >= 1, got {k!r}")
        self.k: int | None = k
        if self.k is not None and self.k < 1:
            raise ConfigError(f"{self.judge_name}: k must be >= 1")
        self.min_coverage = float(options.get("min_coverage", self.default_coverage))
        self.budget = settings.judge.context_budget_chars
        self.language = settings.judge.language
        self.prompts: PromptPair | None = None
        vs: dict[str, Any] = {"method": self.method, "k": self.k, "min_coverage": self.min_coverage}
        if self.caller is not None:
            self.prompts = load_prompts(
                self.prompt_name, self.prompt_placeholders, settings.judge.prompts_dir
            )
            vs["prompt"] = self.prompts.text
            vs["budget"] = self.budget
        super().__init__(
            name=self.judge_name,
            backend=Backend.LLM if self.caller is not None else Backend.HEURISTIC,
            threshold=float(options.get("threshold", 0.5)),
            version_settings=vs,
            model=self.caller.model if self.caller is not None else None,
        )

    def _top(self, items: Sequence[Any]) -> list[Any]:
        return list(items if self.k is None else items[: self.k])

    def _labels(self, trace: Trace) -> LabelledRelevance | None:
        if self.method not in ("auto", "labels"):
            return None
        try:
            return labelled_relevance(trace) or reference_context_relevance(trace)
        except LabelError as e:
            raise JudgeError("bad_labels", str(e)) from e

    def _lang(self, trace: Trace) -> str:
        return detect_language(trace.question) if self.language == "auto" else self.language

    def _no_labels(self) -> Judgement:
        return skipped(reason="no_labels: the trace carries no context_labels", **self._common())

    async def _chunk_flags(self, trace: Trace) -> _Flags | Judgement:
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
            return skipped(reason="no_question", **self._common())
        return await self._unlabelled_flags(trace, trace.question, chunks)

    async def _unlabelled_flags(self, trace: Trace, question: str, chunks: list[str]) -> _Flags | Judgement:
        raise NotImplementedError

    def _no_context(self) -> Judgement:
        return ok(
            score=0.0,
            reason="no_context: no retrieved context",
            flags=self._flags(decided_by="no_context"),
            **self._common(Backend.HEURISTIC),
        )

    async def _model_flags(self, trace: Trace, chunks: list[str], key: str, **fields: str) -> _Flags:
        assert self.caller is not None
        assert self.prompts is not None
        passages, kept, truncated = render_passages(chunks, self.budget)
        user = self.prompts.pick(self._lang(trace)).substitute(passages=passages, **fields)
        reply = await self.caller.ask(judge=self.name, version=self.version, user=user)
        obj = extract_json(reply.text)
        verdicts = obj.get("verdicts")
        if not isinstance(verdicts, list) or len(verdicts) < kept:
            raise JudgeError("unparseable", f"expected {kept} verdicts in the judge reply")
        flags: list[bool] = []
        for v in verdicts[:kept]:
            b = as_bool(v.get(key)) if isinstance(v, dict) else None
            if b is None:
                raise JudgeError("unparseable", f"verdict without a boolean {key!r}: {v!r}"[:200])
            flags.append(b)
        flags.extend([False] * (len(chunks) - kept))
        return _Flags(tuple(flags), Backend.LLM, "llm", reply, truncated)

    def _finish(self, score: float, reason: str, f: _Flags) -> Judgement:
        extra: dict[str, Any] = {}
        if f.reply is not None:
            extra = {
                "raw_output": f.reply.text,
                "prompt_tokens": f.reply.prompt_tokens,
                "completion_tokens": f.reply.completion_tokens,
            }
        return ok(
            score=score,
            reason=reason,
            flags=self._flags(
                f.reply,
                decided_by=f.decided_by,
                context_truncated=f.truncated,
                verdicts=[int(x) for x in f.flags],
            ),
            **self._common(f.backend),
            **extra,
        )


class ContextPrecisionJudge(_ContextJudge):
    """Rank-aware context precision (Ragas): are the useful chunks ranked first?

    Score = Σ_k precision@k · useful_k / (useful chunks), over the retrieved chunks in rank order; a perfect
    ranking is exactly 1.0, no useful chunk 0.0. Needs retrieved chunks, and (unless labelled) the question
    and a reference (expected answer, keywords, else the answer). Default threshold 0.5.
    """

    judge_name = "context_precision"
    prompt_name = "context_precision"
    prompt_placeholders = ("question", "reference", "passages")

    async def _unlabelled_flags(self, trace: Trace, question: str, chunks: list[str]) -> _Flags | Judgement:
        ref = _reference(trace) or (trace.answer if trace.answer and trace.answer.strip() else None)
        if ref is None:
            return skipped(reason="no_reference: no expected answer, keywords or answer", **self._common())
        if self.caller is not None:
            return await self._model_flags(trace, chunks, "useful", question=question, reference=ref)
        stmts = split_statements(ref) or [ref]
        hf = tuple(any(supported(s, [c], self.min_coverage) for s in stmts) for c in chunks)
        return _Flags(hf, Backend.HEURISTIC, "heuristic")

    async def _decide(self, trace: Trace) -> Judgement:
        flags = await self._chunk_flags(trace)
        if isinstance(flags, Judgement):
            return flags
        score = average_precision(flags.flags)
        n_rel = sum(flags.flags)
        reason = (
            f"{n_rel} of {len(flags.flags)} retrieved chunks useful (ranks {_ranks(flags.flags)}); "
            f"average precision {score:.4f}"
        )
        return self._finish(score, reason, flags)


class ContextRecallJudge(_ContextJudge):
    """Context recall (Ragas): share of the ground truth the retrieved chunks support.

    With labels: relevant chunks among the (top ``k``) retrieved / all chunks labelled relevant. Otherwise the
    reference (expected answer, else each keyword) is split into statements and each is checked against the
    retrieved chunks; score = supported / total. No reference → ``skipped``/``no_reference``; a reference
    without statements → ``skipped``/``no_statements``. Default threshold 0.5.
    """

    judge_name = "context_recall"
    prompt_name = "context_recall"
    prompt_placeholders = ("question", "reference", "passages")

    async def _decide(self, trace: Trace) -> Judgement:
        labels = self._labels(trace)
        if labels is not None:
            if labels.total_relevant == 0:
                return skipped(reason="no_reference: no chunk is labelled relevant", **self._common())
            if not trace.documents:
                return self._no_context()
            found = labels.found(self.k)
            score = min(1.0, found / labels.total_relevant)
            what = "chunks labelled relevant" if labels.source == "labels" else "reference contexts"
            reason = f"{found} of {labels.total_relevant} {what} were retrieved"
            if self.k is not None:
                reason += f" in the top {self.k}"
            return self._finish(
                score, reason, _Flags(tuple(self._top(labels.retrieved)), Backend.HEURISTIC, labels.source)
            )
        if self.method == "labels":
            return self._no_labels()
        ref = _reference(trace)
        if ref is None:
            return skipped(reason="no_reference", **self._common())
        chunks = self._top(trace.contexts)
        if not chunks:
            return self._no_context()
        if self.caller is not None:
            return await self._model_recall(trace, chunks, ref)
        stmts = _reference_statements(trace)
        if not stmts:
            return skipped(reason="no_statements: the reference has no statements", **self._common())
        sup = [supported(s, chunks, self.min_coverage) for s in stmts]
        missing = [s for s, ok_ in zip(stmts, sup, strict=True) if not ok_]
        return self._finish(
            share(sup) or 0.0,
            _recall_reason(sup, missing),
            _Flags(tuple(sup), Backend.HEURISTIC, "heuristic"),
        )

    async def _model_recall(self, trace: Trace, chunks: list[str], ref: str) -> Judgement:
        assert self.caller is not None
        assert self.prompts is not None
        passages, _, truncated = render_passages(chunks, self.budget)
        user = self.prompts.pick(self._lang(trace)).substitute(
            question=trace.question or "", reference=ref, passages=passages
        )
        reply = await self.caller.ask(judge=self.name, version=self.version, user=user)
        items = extract_json(reply.text).get("statements")
        if not isinstance(items, list) or not items:
            raise JudgeError("unparseable", "no statements in the judge reply")
        sup: list[bool] = []
        missing: list[str] = []
        for it in items:
            b = as_bool(it.get("supported")) if isinstance(it, dict) else None
            if b is None:
                raise JudgeError("unparseable", f"statement without a boolean 'supported': {it!r}"[:200])
            sup.append(b)
            if not b:
                missing.append(str(it.get("statement", "")))
        return self._finish(
            share(sup) or 0.0,
            _recall_reason(sup, missing),
            _Flags(tuple(sup), Backend.LLM, "llm", reply, truncated),
        )


class ContextRelevanceJudge(_ContextJudge):
    """Context relevance (TruLens): share of the retrieved chunks relevant to the question.

    For online traffic without ground truth: needs only the question and the retrieved chunks. Default
    threshold 0.5.
    """

    judge_name = "context_relevance"
    prompt_name = "context_relevance"
    prompt_placeholders = ("question", "passages")
    default_coverage = 0.5

    async def _unlabelled_flags(self, trace: Trace, question: str, chunks: list[str]) -> _Flags | Judgement:
        if self.caller is not None:
            return await self._model_flags(trace, chunks, "relevant", question=question)
        hf = tuple(coverage(question, c) >= self.min_coverage for c in chunks)
        return _Flags(hf, Backend.HEURISTIC, "heuristic")

    async def _decide(self, trace: Trace) -> Judgement:
        flags = await self._chunk_flags(trace)
        if isinstance(flags, Judgement):
            return flags
        score = share(flags.flags) or 0.0
        reason = (
            f"{sum(flags.flags)} of {len(flags.flags)} retrieved chunks relevant to the question "
            f"(ranks {_ranks(flags.flags)})"
        )
        return self._finish(score, reason, flags)
