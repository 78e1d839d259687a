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

from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.base import compute_version, error
from ragpulse.logging import get_logger
from ragpulse.model import Backend, Judgement, JudgementFlags, Trace

__all__ = ["FrameJudge", "ModelCaller", "ModelReply", "check_options"]

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

    ``ask`` sends ``user`` on behalf of judge ``judge`` at version ``version`` (cache key and accounting) (with ``system``, default a neutral evaluator instruction) and returns the reply or
    raises :class:`~ragpulse.errors.JudgeError` with a code
    (``judge_unavailable``, ``truncated_output``, ``empty_output``, …).
    """

    @property
    def model(self) -> str: ...

    async def ask(self, *, judge: str, version: str, user: str, system: str | None = None) -> ModelReply: ...


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
            raise ConfigError(f"{name}: threshold must be in [0, 1], got {threshold}")
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


class SharedClientCaller:
    """:class:`ModelCaller` over the shared LLM layer (``ragpulse.judges.llm.LLMClient``).

    The client's ``complete(judge=, version=, messages=)`` does retries, limits, the cache and token
    accounting; this adapter turns its result into a :class:`ModelReply`: ``finish_reason == "length"`` →
    ``JudgeError("truncated_output")``, empty text → ``JudgeError("empty_output")``.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    @property
    def model(self) -> str:
        """The judge model's name (the client's ``model``)."""
        return str(self._client.model)

    async def ask(self, *, judge: str, version: str, user: str, system: str | None = None) -> ModelReply:
        """One chat request through the shared client (see the class docstring for errors)."""
        from ragpulse.judges.refprompt import SYSTEM

        res = await self._client.complete(
            judge=judge,
            version=version,
            messages=[{"role": "system", "content": system or SYSTEM}, {"role": "user", "content": user}],
        )
        if res.finish_reason == "length":
            raise JudgeError("truncated_output", "the judge reply hit max_tokens")
        if not (res.text or "").strip():
            raise JudgeError("empty_output", "the judge model returned nothing")
        return ModelReply(
            text=res.text,
            prompt_tokens=res.prompt_tokens,
            completion_tokens=res.completion_tokens,
            retries=res.retries,
            cached=res.cached,
        )


def resolve_caller(settings: Any, client: object | None) -> ModelCaller | None:
    """The model caller for a judge: over ``client`` when given (the registry's shared LLM client), else
    ``None`` (heuristic). ``settings`` is accepted for symmetry with the judge constructors."""
    del settings
    return SharedClientCaller(client) if client is not None else None


def check_options(judge: str, options: Any, allowed: set[str]) -> dict[str, Any]:
    """Validate a judge's options mapping (``settings.judge.options[judge]``): known keys only, 0–1 numbers.

    Raises:
        ConfigError: not a mapping, an unknown key (typos such as ``treshold``), or ``threshold`` /
            ``min_coverage`` that is not a number in [0, 1].
    """
    if not isinstance(options, dict):
        raise ConfigError(f"{judge}: options must be a mapping, got {type(options).__name__}")
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigError(
            f"{judge}: unknown option(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )
    for key in ("threshold", "min_coverage"):
        if key in options:
            v = options[key]
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= float(v) <= 1.0:
                raise ConfigError(f"{judge}: {key} must be a number in [0, 1], got {v!r}")
    return dict(options)
