"""The common frame of LLM judges: options, prompt loading, versioning, one model call, error mapping.

Subclasses (:class:`~ragpulse.judges.relevancy.LLMRelevancyJudge`,
:class:`~ragpulse.judges.faithfulness.LLMFaithfulnessJudge`, and other engineers' LLM judges) implement
:meth:`LLMJudge._decide` and call :meth:`LLMJudge._ask` for each model call. The frame guarantees the judge
contract: :meth:`LLMJudge.judge` never raises (except ``CancelledError``), and maps failures to statuses:

=====================================  =========  ==========================================================
failure                                status     reason
=====================================  =========  ==========================================================
model unreachable after retries        ``error``  ``judge_unavailable: HTTP 429 after 3 attempts`` (etc.)
``finish_reason == "length"``          ``error``  ``truncated_output: …``
no text / no verdict / bad score       ``error``  ``empty_output`` / ``unparseable`` / ``out_of_range``
daily token budget spent               ``skipped`` ``over_budget: …``
unexpected exception (a bug)           ``error``  ``internal_error: <type>``
=====================================  =========  ==========================================================

Every judgement carries the tokens from the API's ``usage`` (summed over calls), ``flags.retries`` (summed),
``flags.cached`` (every call came from the cache), ``flags.context_truncated`` and the raw output (bounded).

Common options (``settings.judge.options[<name>]``): ``threshold`` (0–1), ``language`` (``auto``/``en``/``zh``,
default ``settings.judge.language``), ``max_tokens`` (completion limit), ``daily_token_budget`` (tokens/day).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.base import compute_version, error, ok, precheck, skipped
from ragpulse.judges.llm import LLMClient, LLMResult, ModelUnavailableError, fit_context
from ragpulse.judges.parsing import strip_reasoning
from ragpulse.judges.prompts import LANGUAGES, PromptTemplate, load_prompt
from ragpulse.judges.text import detect_language
from ragpulse.logging import get_logger
from ragpulse.model import Backend, Judgement, JudgementFlags, Trace

__all__ = ["CallLog", "LLMJudge"]

_log = get_logger("ragpulse.judges")

COMMON_OPTIONS = frozenset({"threshold", "language", "max_tokens", "daily_token_budget"})


@dataclass
class CallLog:
    """What the model calls of one judgement cost and returned (accumulated by :meth:`LLMJudge._ask`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    calls: int = 0
    cached_calls: int = 0
    outputs: list[str] = field(default_factory=list)
    context_truncated: bool = False

    def add(self, r: LLMResult) -> None:
        """Record one model reply (tokens, retries, cache hit, raw text)."""
        self.prompt_tokens += r.prompt_tokens
        self.completion_tokens += r.completion_tokens
        self.retries += r.retries
        self.calls += 1
        self.cached_calls += int(r.cached)
        self.outputs.append(r.text)

    @property
    def raw_output(self) -> str | None:
        """The raw replies, joined by ``\\n---\\n`` when there were several (``None``: no call made)."""
        if not self.outputs:
            return None
        return self.outputs[0] if len(self.outputs) == 1 else "\n---\n".join(self.outputs)

    def flags(self, **extra: Any) -> JudgementFlags:
        """The judgement flags: truncation, summed retries, ``cached`` when every call was a cache hit."""
        return JudgementFlags(
            context_truncated=self.context_truncated,
            retries=self.retries,
            cached=self.calls > 0 and self.cached_calls == self.calls,
            **extra,
        )


@dataclass(frozen=True)
class Decision:
    """What :meth:`LLMJudge._decide` found: a 0–1 score, a reason for people, the deciding rule/stage."""

    score: float
    reason: str
    decided_by: str | None = None


class LLMJudge:
    """Base class of judges that ask the judge model.

    Subclasses set :attr:`name`, :attr:`OPTIONS`, and implement :meth:`_configure` (read options, return the
    template names used and the version-relevant settings) and :meth:`_decide`.

    Args:
        settings: process settings (judge model, language, context budget, prompts dir).
        options: this judge's options (``settings.judge.options.get(name, {})``).
        client: the shared :class:`~ragpulse.judges.llm.LLMClient`; a new one is made when omitted.

    Raises:
        ConfigError: no judge model configured, a bad option value, or a bad prompt template.
    """

    name: ClassVar[str] = "llm"
    #: Options this judge understands (besides :data:`COMMON_OPTIONS`).
    OPTIONS: ClassVar[frozenset[str]] = frozenset()
    backend: Backend = Backend.LLM
    #: True when the judge needs retrieved context (no context → ``ok``, 0, ``no_context``).
    needs_context: bool = False

    def __init__(self, settings: Settings, options: Mapping[str, Any], *, client: LLMClient | None = None):
        self.settings = settings
        self.options = dict(options)
        unknown = sorted(set(self.options) - COMMON_OPTIONS - self.OPTIONS)
        if unknown:
            _log.warning("judge_options_ignored", judge=self.name, options=unknown)
        self.client = client or LLMClient(settings)
        self.model: str = self.client.model
        language = str(self.options.get("language", settings.judge.language))
        if language not in ("auto", *LANGUAGES):
            raise ConfigError(f"judges.{self.name}.language must be auto, en or zh, not {language!r}")
        self.language = language
        self.max_tokens: int | None = self._int_option("max_tokens")
        self.daily_token_budget: int | None = self._int_option("daily_token_budget")
        template_names, version_settings = self._configure()
        self.threshold: float = self._threshold()
        langs = LANGUAGES if language == "auto" else (language,)
        self.templates: dict[tuple[str, str], PromptTemplate] = {
            (t, lang): load_prompt(t, lang, settings.judge.prompts_dir)
            for t in template_names
            for lang in langs
        }
        self.version: str = compute_version(
            self.name,
            Backend.LLM,
            {
                **version_settings,
                "threshold": self.threshold,
                "model": self.model,
                "temperature": settings.judge.temperature,
                "max_tokens": self.max_tokens or settings.judge.max_tokens,
                "context_budget_chars": settings.judge.context_budget_chars,
                "language": language,
                "prompts": {f"{t}.{lang}": tpl.text for (t, lang), tpl in sorted(self.templates.items())},
            },
        )

    # -- subclass hooks --------------------------------------------------------------------------------
    DEFAULT_THRESHOLD: ClassVar[float] = 0.5

    def _configure(self) -> tuple[Sequence[str], dict[str, Any]]:
        """Read subclass options; return (template names used, version-relevant settings)."""
        raise NotImplementedError

    def _default_threshold(self) -> float:
        return self.DEFAULT_THRESHOLD

    async def _decide(self, trace: Trace, lang: str, log: CallLog) -> Decision | Judgement:
        """Judge one trace that passed :func:`~ragpulse.judges.base.precheck`.

        Returns a :class:`Decision` (turned into an ``ok`` judgement) or a finished :class:`Judgement`.
        Raises :class:`~ragpulse.errors.JudgeError` for an unusable model reply.
        """
        raise NotImplementedError

    # -- helpers for subclasses ------------------------------------------------------------------------
    def _int_option(self, key: str) -> int | None:
        v = self.options.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ConfigError(f"judges.{self.name}.{key} must be a positive integer, not {v!r}")
        return v

    def _bool_option(self, key: str, default: bool) -> bool:
        v = self.options.get(key, default)
        if not isinstance(v, bool):
            raise ConfigError(f"judges.{self.name}.{key} must be true or false, not {v!r}")
        return v

    def _choice_option(self, key: str, choices: Sequence[str]) -> str:
        v = self.options.get(key, choices[0])
        if v not in choices:
            raise ConfigError(f"judges.{self.name}.{key} must be one of {', '.join(choices)}, not {v!r}")
        return str(v)

    def _threshold(self) -> float:
        v = self.options.get("threshold", self._default_threshold())
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= float(v) <= 1.0:
            raise ConfigError(f"judges.{self.name}.threshold must be a number in [0, 1], not {v!r}")
        return float(v)

    def _lang(self, trace: Trace) -> str:
        if self.language != "auto":
            return self.language
        return detect_language(trace.question or trace.answer)

    def _context(self, trace: Trace, log: CallLog) -> list[str]:
        """Retrieved chunks cut to ``settings.judge.context_budget_chars`` (top-ranked kept first)."""
        kept, truncated = fit_context(trace.contexts, self.settings.judge.context_budget_chars)
        log.context_truncated = log.context_truncated or truncated
        return kept

    async def _ask(self, template: str, lang: str, log: CallLog, **values: str) -> str:
        """Render ``template`` in ``lang``, call the model once, record the cost; return the reply text.

        The text has reasoning blocks (``<think>…</think>``) removed; ``raw_output`` keeps them.

        Raises:
            JudgeError: ``truncated_output`` (``finish_reason == "length"``), ``over_budget``,
                ``judge_unavailable``.
        """
        prompt = self.templates[(template, lang)].render(**values)
        result = await self.client.complete(
            judge=self.name,
            version=self.version,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=self.max_tokens,
            daily_token_budget=self.daily_token_budget,
        )
        log.add(result)
        if result.finish_reason == "length":
            raise JudgeError(
                "truncated_output",
                f"the judge model hit max_tokens ({self.max_tokens or self.settings.judge.max_tokens})",
            )
        return strip_reasoning(result.text)

    async def aclose(self) -> None:
        """Close the (possibly shared) LLM client's connection pool; idempotent."""
        await self.client.aclose()

    def _skipped(self, reason: str, **extra: Any) -> Judgement:
        """A ``skipped`` judgement of this judge for :meth:`_decide` (``reason`` = ``"<code>: detail"``)."""
        return skipped(
            judge=self.name,
            version=self.version,
            backend=self.backend,
            model=self.model,
            threshold=self.threshold,
            reason=reason,
            **extra,
        )

    # -- the judge contract ----------------------------------------------------------------------------
    async def judge(self, trace: Trace) -> Judgement:
        """Judge one trace; never raises except ``asyncio.CancelledError`` (see the module docstring)."""
        started = time.perf_counter()
        common: dict[str, Any] = {
            "judge": self.name,
            "version": self.version,
            "backend": Backend.LLM,
            "model": self.model,
        }
        pre = precheck(trace, threshold=self.threshold, needs_context=self.needs_context, **common)
        if pre is not None:
            return pre.model_copy(update={"latency_s": time.perf_counter() - started})
        log = CallLog()
        try:
            out = await self._decide(trace, self._lang(trace), log)
        except asyncio.CancelledError:
            raise
        except JudgeError as e:
            retries = log.retries + (e.retries if isinstance(e, ModelUnavailableError) else 0)
            log.retries = retries
            cost = self._cost(log, started)
            if e.code == "over_budget":
                return skipped(reason=str(e), threshold=self.threshold, flags=log.flags(), **cost, **common)
            return error(reason=str(e), threshold=self.threshold, flags=log.flags(), **cost, **common)
        except Exception as e:  # a bug, not bad model output: keep the contract, log loudly
            _log.exception("judge_internal_error", judge=self.name, trace_id=trace.trace_id)
            return error(
                reason=f"internal_error: {type(e).__name__}",
                threshold=self.threshold,
                flags=log.flags(),
                **self._cost(log, started),
                **common,
            )
        if isinstance(out, Judgement):
            return out.model_copy(update=self._cost(log, started))
        return ok(
            score=out.score,
            threshold=self.threshold,
            reason=out.reason,
            flags=log.flags(decided_by=out.decided_by),
            **self._cost(log, started),
            **common,
        )

    @staticmethod
    def _cost(log: CallLog, started: float) -> dict[str, Any]:
        return {
            "raw_output": log.raw_output,
            "latency_s": time.perf_counter() - started,
            "prompt_tokens": log.prompt_tokens,
            "completion_tokens": log.completion_tokens,
        }
