"""Common frame of the reference-metric and checklist judges: identity, timing, never-raise contract.

A judge built on :class:`FrameJudge` implements ``_decide(trace) -> Judgement``; :meth:`FrameJudge.judge`
adds the wall-time latency (seconds) and turns any exception but ``CancelledError`` into an ``error``
judgement (a :class:`~ragpulse.errors.JudgeError` keeps its code, anything else is ``internal_error``), so the
:class:`~ragpulse.protocols.Judge` contract holds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Protocol

from ragpulse.errors import JudgeError
from ragpulse.judges.base import compute_version, error
from ragpulse.logging import get_logger
from ragpulse.model import Backend, Judgement, JudgementFlags, Trace

__all__ = ["FrameJudge", "ModelCaller", "ModelReply"]

log = get_logger(__name__)


@dataclass(frozen=True)
class ModelReply:
    """A judge model's reply: text, token usage from the API's ``usage``, retries made, cache hit."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    cached: bool = False


class ModelCaller(Protocol):
    """Asks the judge model one question (the seam to the shared LLM layer).

    ``ask`` sends ``user`` (with ``system``, default a neutral evaluator instruction) and returns the reply or
    raises :class:`~ragpulse.errors.JudgeError` with a code
    (``judge_unavailable``, ``truncated_output``, ``empty_output``, …).
    """

    @property
    def model(self) -> str: ...

    async def ask(self, *, judge: str, user: str, system: str | None = None) -> ModelReply: ...


class FrameJudge:
    """Base class: ``name``, ``version``, ``backend``, ``threshold``, ``model`` and the timing/error frame.

    Args:
        name: registered judge name.
        backend: ``llm`` or ``heuristic`` (the judge's main backend; single judgements may say ``heuristic``
            when labels decided without a model).
        threshold: 0–1.
        version_settings: everything that can change a verdict (hashed into ``version``).
        model: judge model name (``None`` for heuristic judges).
    """

    def __init__(
        self,
        *,
        name: str,
        backend: Backend,
        threshold: float,
        version_settings: dict[str, Any],
        model: str | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"{name}: threshold must be in [0, 1], got {threshold}")
        self.name = name
        self.backend = backend
        self.threshold = threshold
        self.model = model
        self.version = compute_version(
            name, backend, {**version_settings, "threshold": threshold, "model": model}
        )

    async def judge(self, trace: Trace) -> Judgement:
        """Judge one trace; never raises except ``CancelledError`` (see the module docstring)."""
        t0 = time.perf_counter()
        try:
            j = await self._decide(trace)
        except asyncio.CancelledError:
            raise
        except JudgeError as e:
            j = self._error(str(e) or e.code)
        except Exception as e:
            log.warning("judge_internal_error", judge=self.name, trace_id=trace.trace_id, error=repr(e))
            j = self._error(f"internal_error: {type(e).__name__}: {e}")
        return j.model_copy(update={"latency_s": time.perf_counter() - t0})

    async def _decide(self, trace: Trace) -> Judgement:  # pragma: no cover - abstract
        raise NotImplementedError

    def _error(self, reason: str, **extra: Any) -> Judgement:
        return error(
            judge=self.name,
            version=self.version,
            backend=self.backend,
            model=self.model,
            threshold=self.threshold,
            reason=reason,
            **extra,
        )

    def _common(self, backend: Backend | None = None) -> dict[str, Any]:
        b = backend or self.backend
        return {
            "judge": self.name,
            "version": self.version,
            "backend": b,
            "model": self.model if b is Backend.LLM else None,
            "threshold": self.threshold,
        }

    @staticmethod
    def _flags(reply: ModelReply | None = None, **kw: Any) -> JudgementFlags:
        if reply is None:
            return JudgementFlags(**kw)
        return JudgementFlags(retries=reply.retries, cached=reply.cached, **kw)
