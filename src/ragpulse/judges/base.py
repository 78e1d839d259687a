"""Building blocks shared by every judge: versioning and judgement constructors.

A judge's ``version`` is a stable hash (first 12 hex chars of SHA-256) of a canonical JSON document holding
everything that can change a verdict: the judge name, prompt template text, mode, threshold, backend, model
and any option. Two processes with the same settings compute the same version; changing any of them gives
a new version, so old judgements stay in the store next to new ones (``rejudge``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ragpulse.judges.text import is_abstention
from ragpulse.model import Backend, Judgement, JudgementFlags, JudgementStatus, Trace

__all__ = ["compute_version", "error", "ok", "precheck", "skipped"]


def compute_version(name: str, backend: Backend, settings: dict[str, Any]) -> str:
    """Return the 12-hex-char version of a judge.

    Args:
        name: judge name.
        backend: ``llm`` or ``heuristic``.
        settings: JSON-able mapping of everything that can change a verdict (prompt text, mode, threshold,
            model, options). Key order does not matter.
    """
    doc = {"name": name, "backend": backend.value, "settings": settings}
    blob = json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:12]


def ok(
    *,
    judge: str,
    version: str,
    backend: Backend,
    score: float,
    threshold: float,
    reason: str = "",
    model: str | None = None,
    flags: JudgementFlags | None = None,
    **extra: Any,
) -> Judgement:
    """A decided judgement: ``passed = score >= threshold``.

    Raises:
        pydantic.ValidationError: ``score`` is not a finite number in [0, 1] (callers turn out-of-range
            model output into :func:`error` before calling this).
    """
    return Judgement(
        judge=judge,
        version=version,
        backend=backend,
        model=model,
        score=score,
        passed=score >= threshold,
        threshold=threshold,
        status=JudgementStatus.OK,
        reason=reason,
        flags=flags or JudgementFlags(),
        **extra,
    )


def skipped(
    *,
    judge: str,
    version: str,
    backend: Backend,
    reason: str,
    model: str | None = None,
    threshold: float | None = None,
    **extra: Any,
) -> Judgement:
    """A judgement the judge declined to make (``no_reference``, ``no_answer``, ``abstained``, …)."""
    return Judgement(
        judge=judge,
        version=version,
        backend=backend,
        model=model,
        threshold=threshold,
        status=JudgementStatus.SKIPPED,
        reason=reason,
        **extra,
    )


def error(
    *,
    judge: str,
    version: str,
    backend: Backend,
    reason: str,
    model: str | None = None,
    threshold: float | None = None,
    **extra: Any,
) -> Judgement:
    """A judgement that failed (``judge_unavailable``, ``unparseable``, ``out_of_range``, …)."""
    return Judgement(
        judge=judge,
        version=version,
        backend=backend,
        model=model,
        threshold=threshold,
        status=JudgementStatus.ERROR,
        reason=reason,
        **extra,
    )


def precheck(
    trace: Trace,
    *,
    judge: str,
    version: str,
    backend: Backend,
    threshold: float,
    model: str | None = None,
    needs_context: bool = False,
    needs_reference: bool = False,
) -> Judgement | None:
    """Apply the rules every judge shares before doing any work; ``None`` means "go on and judge".

    In order:

    1. no answer (missing/blank) → ``skipped`` ``no_answer``;
    2. ``needs_reference`` and neither an expected answer nor keywords → ``skipped`` ``no_reference``;
    3. the answer abstains (:func:`ragpulse.judges.text.is_abstention`) → ``skipped`` ``abstained``;
    4. ``needs_context`` and no retrieved context → ``ok``, score 0, not passed, reason ``no_context``
       (``decided_by="no_context"``), without a model call. This is ragpulse's rule; Ragas, DeepEval and
       TruLens each treat empty context differently.
    """
    common: dict[str, Any] = {"judge": judge, "version": version, "backend": backend, "model": model}
    if not trace.answer or not trace.answer.strip():
        return skipped(reason="no_answer", threshold=threshold, **common)
    if needs_reference and not ((trace.expected_answer or "").strip() or trace.keywords):
        return skipped(reason="no_reference", threshold=threshold, **common)
    if is_abstention(trace.answer):
        return skipped(reason="abstained", threshold=threshold, **common)
    if needs_context and not trace.contexts:
        return ok(
            score=0.0,
            threshold=threshold,
            reason="no_context: no retrieved context to check the answer against",
            flags=JudgementFlags(decided_by="no_context"),
            **common,
        )
    return None
