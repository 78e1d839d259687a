"""The one judge frame: :class:`JudgeBase`, the base class of every built-in, checklist and plugin judge.

A judge turns one trace into one :class:`~ragpulse.model.Judgement`. The frame does everything but the
decision, in one place and the same way for every judge and backend:

1. **identity**: ``name``, ``version`` (:func:`compute_version` of :meth:`JudgeBase.version_settings`),
   ``backend`` (``llm`` when the judge holds the shared model client, else ``heuristic``), ``model``,
   ``threshold``; :meth:`JudgeBase.ok` / :meth:`JudgeBase.skipped` / :meth:`JudgeBase.error` build judgements with it;
2. **options**: ``settings.judge.options[<name>]`` validated by the judge's :attr:`JudgeBase.Options` model (unknown keys
   and bad values are a ``ConfigError`` naming the judge and option, see :mod:`ragpulse.judges.options`);
3. **precheck** (:meth:`JudgeBase.precheck`, the shared rules of :func:`precheck`) → **decide**
   (:meth:`JudgeBase.decide`, the subclass) → **error codes** mapped to a status through one table
   (:data:`STATUS_BY_CODE`) → **cost** (latency, tokens, retries, cache, raw replies) added;
   :meth:`JudgeBase.judge` never raises except ``asyncio.CancelledError``;
4. **model calls** through :meth:`JudgeBase.ask`: render a template (:mod:`ragpulse.judges.model.prompts`, fences
   neutralised), call the shared :class:`~ragpulse.judges.model.client.LLMClient` (limits, retries, cache,
   budget), read the answer apart from its reasoning (:func:`read_answer`: ``<think>`` blocks, reasoning fields,
   finish reasons), account the cost in the judgement's :class:`CallLog`.

Reason codes (the start of ``reason`` of a ``skipped``/``error`` judgement) and their statuses: the table in
``docs/llm-judges.md``. Writing a plugin judge on this class: ``docs/reference-metrics.md`` ("Plugin judges")
and ``tests/judges/test_plugin_entry_point.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragpulse.config import Settings
from ragpulse.errors import JudgeError
from ragpulse.judges.model.client import LLMClient, LLMResult, ModelUnavailableError
from ragpulse.judges.model.context import fit_context
from ragpulse.judges.model.parsing import split_reasoning
from ragpulse.judges.model.prompts import (
    CONVERSATION_PREFACE,
    HISTORY_TURN_CHARS,
    LANGUAGES,
    PromptTemplate,
    conversation_block,
    load_prompts,
)
from ragpulse.judges.model.schemas import response_format
from ragpulse.judges.options import JudgeOptions, parse_options
from ragpulse.judges.text.scripts import unreadable_script
from ragpulse.judges.text.tokens import detect_language, is_abstention
from ragpulse.logging import get_logger
from ragpulse.model import (
    RAW_OUTPUT_MAX_CHARS,
    Backend,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    Trace,
    Turn,
)

__all__ = [
    "REASONING_FLAG_CHARS",
    "STATUS_BY_CODE",
    "CallLog",
    "Decision",
    "JudgeBase",
    "compute_version",
    "error",
    "ok",
    "precheck",
    "prompt_text",
    "raw_reply",
    "read_answer",
    "skipped",
    "text_too_long",
]

_log = get_logger("ragpulse.judges")

#: Version of the reply protocol (how replies are read: standalone verdict words, refusals, graded scores,
#: passage numbers; 3: reasoning before a lone ``</think>``, finish reasons other than stop/length, lenient
#: JSON, stated scales); hashed into the version of every judge that asks the model, so a change re-judges.
REPLY_PROTOCOL = 3

#: Version of the rule that heuristic judges skip text in scripts they cannot segment (hashed into their
#: versions).
UNREADABLE_SCRIPTS = 1

#: Status of a judgement whose decision raised ``JudgeError(code)``; codes not listed give ``error``.
STATUS_BY_CODE: Mapping[str, JudgementStatus] = {
    "over_budget": JudgementStatus.SKIPPED,
    "no_claims": JudgementStatus.SKIPPED,
    "no_question": JudgementStatus.SKIPPED,
    "no_reference": JudgementStatus.SKIPPED,
    "unsupported_language": JudgementStatus.SKIPPED,
    "text_too_long": JudgementStatus.SKIPPED,
}

#: Template values that :meth:`JudgeBase.context` has cut to ``judge.context_budget_chars`` already: every other value
#: of a prompt is checked against ``judge.max_text_chars`` (:meth:`JudgeBase.ask`).
_BUDGETED_VALUES = frozenset({"context", "passages"})


def text_too_long(what: str, chars: int, limit: int) -> str:
    """The reason of a judgement skipped for a text over ``judge.max_text_chars``:
    ``text_too_long: the answer has 10,000,000 characters (limit 100,000: judge.max_text_chars)``."""
    return f"text_too_long: {_too_long(what, chars, limit)}"


def _too_long(what: str, chars: int, limit: int) -> str:
    return f"the {what} has {chars:,} characters (limit {limit:,}: judge.max_text_chars)"


def compute_version(name: str, backend: Backend, settings: dict[str, Any]) -> str:
    """Return the 12-hex-char version of a judge: the first 12 hex characters of the SHA-256 of the canonical
    JSON of ``{"name", "backend", "settings"}`` (``settings``: everything that can change a verdict — prompt
    text, mode, threshold, model, options; key order does not matter)."""
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
    """A decided judgement: ``passed = score >= threshold`` (``score`` a finite number in [0, 1])."""
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


def skipped(*, judge: str, version: str, backend: Backend, reason: str, **extra: Any) -> Judgement:
    """A judgement the judge declined to make (``no_reference``, ``no_answer``, ``abstained``, …)."""
    return Judgement(
        judge=judge, version=version, backend=backend, status=JudgementStatus.SKIPPED, reason=reason, **extra
    )


def error(*, judge: str, version: str, backend: Backend, reason: str, **extra: Any) -> Judgement:
    """A judgement that failed (``judge_unavailable``, ``unparseable``, ``out_of_range``, …)."""
    return Judgement(
        judge=judge, version=version, backend=backend, status=JudgementStatus.ERROR, reason=reason, **extra
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
    max_text_chars: int | None = None,
    **extra: Any,
) -> Judgement | None:
    """Apply the rules every judge shares before doing any work; ``None`` means "go on and judge".

    In order: no answer → ``skipped`` ``no_answer``; an answer longer than ``max_text_chars``
    (``judge.max_text_chars``; ``None``: no limit) → ``skipped`` ``text_too_long`` (:func:`text_too_long`), before
    anything reads it; ``needs_reference`` and neither an expected answer nor
    keywords → ``skipped`` ``no_reference``; an abstaining answer
    (:func:`ragpulse.judges.text.tokens.is_abstention`) → ``skipped`` ``abstained``; ``needs_context`` and
    no retrieved context → ``ok``, score 0, not passed, reason ``no_context`` (``decided_by="no_context"``),
    without a model call (ragpulse's rule; Ragas, DeepEval and TruLens each treat empty context differently).
    """
    common: dict[str, Any] = {
        "judge": judge,
        "version": version,
        "backend": backend,
        "model": model,
        "threshold": threshold,
        **extra,
    }
    if not trace.answer or not trace.answer.strip():
        return skipped(reason="no_answer", **common)
    if max_text_chars is not None and len(trace.answer) > max_text_chars:
        return skipped(reason=text_too_long("answer", len(trace.answer), max_text_chars), **common)
    if needs_reference and not ((trace.expected_answer or "").strip() or trace.keywords):
        return skipped(reason="no_reference", **common)
    if is_abstention(trace.answer):
        return skipped(reason="abstained", **common)
    if needs_context and not trace.contexts:
        return ok(
            score=0.0,
            reason="no_context: no retrieved context to check the answer against",
            flags=JudgementFlags(decided_by="no_context"),
            **common,
        )
    return None


@dataclass
class CallLog:
    """What the model calls of one judgement cost and returned (filled by :meth:`JudgeBase.ask`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    calls: int = 0
    cached_calls: int = 0
    tokens_estimated: bool = False
    outputs: list[str] = field(default_factory=list)
    context_truncated: bool = False
    reasoning_tokens: int = 0
    #: The reasoning of each reply that had some (fields, thinking blocks, ``<think>`` blocks), in call order.
    reasoning: list[str] = field(default_factory=list)
    #: The messages of each call as sent (:func:`prompt_text`), in call order.
    prompts: list[str] = field(default_factory=list)

    #: The replies, kept in the client's cache once the judgement is ``ok`` (:meth:`JudgeBase._finish`).
    replies: list[LLMResult] = field(default_factory=list)

    def add(self, r: LLMResult) -> None:
        """Record one model reply (tokens, retries, cache hit, raw text; reasoning sent beside the answer is
        kept in front of it as ``<think>…</think>``, see :func:`raw_reply`)."""
        self.replies.append(r)
        self.prompt_tokens += r.prompt_tokens
        self.completion_tokens += r.completion_tokens
        self.reasoning_tokens += r.reasoning_tokens
        self.retries += r.retries
        self.calls += 1
        self.cached_calls += int(r.cached)
        self.tokens_estimated = self.tokens_estimated or r.tokens_estimated
        self.outputs.append(raw_reply(r.text, r.reasoning))
        thought = "\n".join(t for t in (r.reasoning, split_reasoning(r.text)[0]) if t)
        if thought:
            self.reasoning.append(thought)

    @property
    def raw_output(self) -> str | None:
        """The raw replies, joined by ``\\n---\\n`` when there were several (``None``: no call made)."""
        if not self.outputs:
            return None
        return self.outputs[0] if len(self.outputs) == 1 else "\n---\n".join(self.outputs)

    @property
    def prompt(self) -> str | None:
        """The prompts sent, joined by ``\\n---\\n`` when there were several (``None``: no call made)."""
        return "\n---\n".join(self.prompts) if self.prompts else None

    def flags(self, *, redact_text: bool = False) -> dict[str, Any]:
        """Judgement flags of the calls: truncation, summed retries, ``cached`` when every call was a cache
        hit, ``tokens_estimated`` when a reply carried no ``usage``, ``reasoning_tokens`` (summed) and
        ``reasoning`` — the replies' reasoning joined by ``\n---\n``, cut in its middle to
        :data:`REASONING_FLAG_CHARS` characters; left out with ``redact_text`` (it quotes the judged texts)."""
        out: dict[str, Any] = {
            "context_truncated": self.context_truncated,
            "retries": self.retries,
            "cached": self.calls > 0 and self.cached_calls == self.calls,
        }
        if self.tokens_estimated:
            out["tokens_estimated"] = True
        if self.reasoning_tokens:
            out["reasoning_tokens"] = self.reasoning_tokens
        if self.reasoning and not redact_text:
            out["reasoning"] = _cut_middle("\n---\n".join(self.reasoning), REASONING_FLAG_CHARS)
        return out


#: Longest ``flags.reasoning`` kept (characters).
REASONING_FLAG_CHARS = 2000


def _cut_middle(text: str, limit: int) -> str:
    """``text`` with its middle replaced by ``…`` so that it has at most ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = max(limit - 1, 0) // 2
    return text[:half] + "…" + (text[len(text) - half :] if half else "")


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Chat ``messages`` as one text for people: each ``[role]`` on its own line before its content
    (``[system]\\n…\\n\\n[user]\\n…``), the way :attr:`~ragpulse.model.Judgement.prompt` keeps them."""
    return "\n\n".join(f"[{m.get('role', '')}]\n{m.get('content', '')}" for m in messages)


def raw_reply(text: str, reasoning: str) -> str:
    """A reply as kept in ``raw_output``: the reasoning sent beside the answer (``reasoning_content``,
    thinking blocks) in front of it as ``<think>…</think>``, the answer whole. The reasoning is cut in its
    middle so that the answer fits in :data:`~ragpulse.model.RAW_OUTPUT_MAX_CHARS`."""
    if not reasoning:
        return text
    room = RAW_OUTPUT_MAX_CHARS - len(text) - len("<think></think>\n")
    return f"<think>{_cut_middle(reasoning, room)}</think>\n{text}"


#: Finish reasons of a complete answer (``eos_token``: Hugging Face TGI; ``None``: servers that send none).
_COMPLETE = frozenset({"stop", "eos_token", None})


def read_answer(result: LLMResult) -> str:
    """The answer text of a reply, to be parsed for a verdict: never its reasoning (``<think>`` blocks,
    ``reasoning_content`` …), never a reply the server cut.

    Raises:
        JudgeError: ``truncated_output`` (``finish_reason == "length"``, or no answer after reasoning that
            filled the completion cap), ``content_filtered`` (any other finish reason than ``stop``, e.g.
            ``content_filter``: no score, never a pass), ``empty_output``.
    """
    if result.finish_reason == "length":
        cap = result.max_completion_tokens
        raise JudgeError("truncated_output", f"the judge model hit max_tokens ({cap or 'its cap'})")
    if result.finish_reason not in _COMPLETE:
        raise JudgeError(
            "content_filtered", f"the judge model's reply ended with finish_reason {result.finish_reason!r}"
        )
    text = split_reasoning(result.text)[1]
    if not text.strip():
        cap = result.max_completion_tokens
        if cap and result.completion_tokens >= cap and not result.tokens_estimated:
            raise JudgeError("truncated_output", f"the judge model spent max_tokens ({cap}) on reasoning")
        raise JudgeError("empty_output", "the judge model returned no text")
    return text


@dataclass(frozen=True)
class Decision:
    """What :meth:`JudgeBase.decide` found: a 0–1 score, a reason for people, the deciding rule/stage, extra
    flags (``verdicts``, ``items``, ``claims``, …) and, when it differs from the judge's, the backend that
    decided (labels decide retrieval judges without the model: ``heuristic``)."""

    score: float
    reason: str
    decided_by: str | None = None
    flags: Mapping[str, Any] = field(default_factory=dict)
    backend: Backend | None = None


class JudgeBase:
    """Base class of every judge (see the module docstring).

    Subclasses set :attr:`name` (or assign ``self.name`` before calling ``super().__init__``),
    :attr:`Options`, :attr:`DEFAULT_THRESHOLD`, the precheck needs, and implement :meth:`decide` and
    :meth:`version_settings`; :meth:`configure` reads options before the version is computed.

    Args:
        settings: process settings (judge model, language, context budget, prompts dir, redact_text).
        options: this judge's options (``settings.judge.options.get(name, {})``) or an :attr:`Options` instance.
        client: the shared judge-model client; ``None`` → the judge runs on the ``heuristic`` backend.

    Raises:
        ConfigError: a bad option or prompt template.
    """

    name: str = "judge"
    Options: ClassVar[type[JudgeOptions]] = JudgeOptions
    DEFAULT_THRESHOLD: ClassVar[float] = 0.5
    #: Precheck needs (see :func:`precheck`); ``needs_answer = False`` skips the precheck entirely.
    needs_answer: bool = True
    needs_context: bool = False
    needs_reference: bool = False
    #: Templates the judge renders (loaded in both languages, or the ``language`` option's one).
    TEMPLATES: ClassVar[Sequence[str]] = ()
    #: System message sent before each prompt (``None``: the prompt alone).
    SYSTEM: ClassVar[str | None] = None
    #: Set by heuristic-only judges: the method's name; the judge never uses the model, and its version
    #: hashes the method, the threshold and :meth:`method_settings`.
    METHOD: ClassVar[str | None] = None
    #: Set by judges that read the conversation's earlier turns with the question (relevancy, faithfulness):
    #: the last ``judge.history_turns`` of ``Trace.turns`` go into their prompts (:meth:`ask`'s ``history``) or
    #: heuristic question terms, and their version records that number.
    READS_HISTORY: ClassVar[bool] = False

    def __init__(
        self,
        settings: Settings,
        options: Mapping[str, Any] | JudgeOptions | None = None,
        *,
        client: Any = None,
    ) -> None:
        self.settings = settings
        self.options = parse_options(self.name, self.Options, options)
        self.client: LLMClient | None = client
        language = getattr(self.options, "language", None)
        self.language: str = language or settings.judge.language
        if self.METHOD is not None:
            self.client = None
        self.configure()
        self.backend: Backend = Backend.LLM if self.client is not None else Backend.HEURISTIC
        self.model: str | None = self.client.model if self.client is not None else None
        threshold = self.options.threshold
        self.threshold: float = float(threshold if threshold is not None else self.default_threshold())
        self.templates: dict[tuple[str, str], PromptTemplate] = {}
        if self.client is not None:
            langs = LANGUAGES if self.language == "auto" else (self.language,)
            self.templates = load_prompts(self.template_names(), langs, settings.judge.prompts_dir)
        self.version: str = compute_version(self.name, self.backend, self.version_settings())

    # -- subclass hooks --------------------------------------------------------------------------------
    def configure(self) -> None:
        """Read options into attributes (may set ``self.client = None`` when the model is not used)."""

    def template_names(self) -> Sequence[str]:
        """The templates this instance renders (default :attr:`TEMPLATES`)."""
        return self.TEMPLATES

    def default_threshold(self) -> float:
        """The threshold when the ``threshold`` option is not set."""
        return self.DEFAULT_THRESHOLD

    def version_settings(self) -> dict[str, Any]:
        """Everything that can change a verdict (hashed into ``version``); by default (heuristic judges)
        :attr:`METHOD`, the threshold, the unreadable-script rule, :meth:`method_settings` and, for a judge
        that reads the conversation, the number of earlier turns it reads."""
        return {
            "method": self.METHOD,
            "threshold": self.threshold,
            "unreadable_scripts": UNREADABLE_SCRIPTS,
            **self.method_settings(),
            **self._history_version(),
        }

    @property
    def history_turns(self) -> int:
        """How many earlier turns this judge reads: ``judge.history_turns`` when it reads the conversation
        (:attr:`READS_HISTORY`), else 0."""
        return self.settings.judge.history_turns if self.reads_history() else 0

    def reads_history(self) -> bool:
        """Whether this instance reads the conversation (default :attr:`READS_HISTORY`; a mode may not)."""
        return self.READS_HISTORY

    def history(self, trace: Trace) -> tuple[Turn, ...]:
        """The earlier turns of ``trace`` this judge reads (the last :attr:`history_turns`, oldest first)."""
        return trace.last_turns(self.history_turns)

    def _history_version(self) -> dict[str, Any]:
        if not self.reads_history():
            return {}
        out: dict[str, Any] = {"history_turns": self.history_turns}
        if self.client is not None and self.history_turns:
            out["conversation"] = {"preface": dict(CONVERSATION_PREFACE), "turn_chars": HISTORY_TURN_CHARS}
        return out

    def method_settings(self) -> dict[str, Any]:
        """A heuristic method's parameters besides its name and threshold (hashed into ``version``)."""
        return {}

    async def decide(self, trace: Trace, log: CallLog) -> Decision | Judgement:
        """Judge a trace that passed :meth:`precheck`: a :class:`Decision` (made an ``ok`` judgement) or a
        finished judgement; raise :class:`~ragpulse.errors.JudgeError` for an unusable model reply.
        Default: :meth:`decide_now`."""
        return self.decide_now(trace)

    def decide_now(self, trace: Trace) -> Decision | Judgement:
        """:meth:`decide` for judges that need no I/O (the heuristic ones); see :meth:`evaluate`."""
        raise NotImplementedError

    @property
    def temperature(self) -> float:
        """The temperature this judge asks for: its ``temperature`` option, else ``judge.temperature`` (a
        model that takes only its default gets none, whatever this says; the version hashes this value)."""
        own = getattr(self.options, "temperature", None)
        return float(own) if own is not None else self.settings.judge.temperature

    def model_version_settings(self, **extra: Any) -> dict[str, Any]:
        """Version settings of a judge that asks the model: ``extra`` plus threshold, model, temperature,
        max tokens, context budget, language and the text of every template used."""
        return {
            **extra,
            "reply_protocol": REPLY_PROTOCOL,
            "threshold": self.threshold,
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": getattr(self.options, "max_tokens", None) or self.settings.judge.max_tokens,
            "context_budget_chars": self.settings.judge.context_budget_chars,
            "language": self.language,
            "prompts": {f"{t}.{lang}": tpl.text for (t, lang), tpl in sorted(self.templates.items())},
            **self._history_version(),
        }

    def precheck(self, trace: Trace) -> Judgement | None:
        """The shared rules (:func:`precheck`) with this judge's needs; ``None``: go on."""
        if not self.needs_answer:
            return None
        return precheck(
            trace,
            needs_context=self.needs_context,
            needs_reference=self.needs_reference,
            max_text_chars=self.settings.judge.max_text_chars,
            **self.identity(),
        )

    @staticmethod
    def require_readable(*texts: str | None) -> None:
        """For heuristic decisions, with the texts they read: a script they cannot segment (kana, Hangul,
        Thai, …; :mod:`ragpulse.judges.text.scripts`) raises ``JudgeError("unsupported_language")``
        (``skipped``), never a confident wrong score."""
        script = unreadable_script(texts)
        if script is not None:
            raise JudgeError(
                "unsupported_language", f"the heuristic judge cannot read {script} text; use a judge model"
            )

    def require_short(self, what: str, *texts: str | None) -> None:
        """For the texts a decision reads besides the answer (:func:`precheck` checks that): one longer than
        ``judge.max_text_chars`` raises ``JudgeError("text_too_long")`` (``skipped``, :func:`text_too_long`)
        before anything reads it. ``what`` names them in the reason (``question``, ``retrieved context`` —
        numbered from 1 when there are several)."""
        limit = self.settings.judge.max_text_chars
        for i, text in enumerate(texts, 1):
            if text is not None and len(text) > limit:
                name = f"{what} {i}" if len(texts) > 1 else what
                raise JudgeError("text_too_long", _too_long(name, len(text), limit))

    def identity(self, backend: Backend | None = None) -> dict[str, Any]:
        """The fields every judgement of this judge carries (``backend`` overrides the judge's)."""
        b = backend or self.backend
        return {
            "judge": self.name,
            "version": self.version,
            "backend": b,
            "model": self.model if b is Backend.LLM else None,
            "threshold": self.threshold,
        }

    # -- judgements ------------------------------------------------------------------------------------
    def ok(self, score: float, reason: str, *, backend: Backend | None = None, **flags: Any) -> Judgement:
        """An ``ok`` judgement of this judge; ``flags`` become :class:`~ragpulse.model.JudgementFlags`."""
        return ok(score=score, reason=reason, flags=JudgementFlags(**flags), **self.identity(backend))

    def skipped(self, reason: str, **flags: Any) -> Judgement:
        """A ``skipped`` judgement of this judge (``reason`` = ``"<code>: detail"``)."""
        return skipped(reason=reason, flags=JudgementFlags(**flags), **self.identity())

    def error(self, reason: str, **flags: Any) -> Judgement:
        """An ``error`` judgement of this judge (``reason`` = ``"<code>: detail"``)."""
        return error(reason=reason, flags=JudgementFlags(**flags), **self.identity())

    # -- the judge contract ----------------------------------------------------------------------------
    @property
    def inline(self) -> bool:
        """True when this judge decides without I/O (:meth:`decide` is the default, i.e. :meth:`decide_now`,
        and :meth:`judge` is not overridden): :meth:`evaluate` then gives what :meth:`judge` gives, and the
        engine calls it directly (:func:`ragpulse.protocols.judge_inline`)."""
        cls = type(self)
        return (
            cls.decide is JudgeBase.decide
            and cls.judge is JudgeBase.judge
            and cls.evaluate is JudgeBase.evaluate
        )

    async def judge(self, trace: Trace) -> Judgement:
        """Judge one trace; never raises except ``asyncio.CancelledError`` (see the module docstring)."""
        started = time.perf_counter()
        log = CallLog()
        try:
            out = self.precheck(trace) or await self.decide(trace, log)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            out = self._failure(e, log, trace)
        return self._finish(out, log, started)

    def evaluate(self, trace: Trace) -> Judgement:
        """Synchronous :meth:`judge` of a judge that needs no I/O (implements :meth:`decide_now`)."""
        started = time.perf_counter()
        log = CallLog()
        try:
            out = self.precheck(trace) or self.decide_now(trace)
        except Exception as e:
            out = self._failure(e, log, trace)
        return self._finish(out, log, started)

    def _failure(self, e: Exception, log: CallLog, trace: Trace) -> Judgement:
        """The judgement for an exception of :meth:`decide`: its code's status (:data:`STATUS_BY_CODE`), or
        ``internal_error`` (logged with the traceback) for anything but a :class:`JudgeError`."""
        if isinstance(e, JudgeError):
            if isinstance(e, ModelUnavailableError):
                log.retries += e.retries
            status = STATUS_BY_CODE.get(e.code, JudgementStatus.ERROR)
            return (self.skipped if status is JudgementStatus.SKIPPED else self.error)(str(e) or e.code)
        _log.error("judge_internal_error", judge=self.name, trace_id=trace.trace_id, exc_info=e)
        return self.error(f"internal_error: {type(e).__name__}")

    def _finish(self, out: Decision | Judgement, log: CallLog, started: float) -> Judgement:
        if isinstance(out, Decision) and not log.calls and not log.retries:  # heuristic: built once
            return ok(
                score=out.score,
                reason=out.reason,
                flags=JudgementFlags(decided_by=out.decided_by, **out.flags),
                latency_s=time.perf_counter() - started,
                **self.identity(out.backend),
            )
        if isinstance(out, Decision):
            out = self.ok(out.score, out.reason, backend=out.backend, decided_by=out.decided_by, **out.flags)
        if out.status is JudgementStatus.OK and self.client is not None:
            for reply in log.replies:  # only replies that made a verdict are served again (never an error)
                self.client.keep(reply)
        cost: dict[str, Any] = {"latency_s": time.perf_counter() - started}
        if log.calls:
            cost.update(
                raw_output=log.raw_output,
                prompt=None if self.settings.store.redact_text else log.prompt,
                prompt_tokens=log.prompt_tokens,
                completion_tokens=log.completion_tokens,
                flags=JudgementFlags(
                    **{
                        **log.flags(redact_text=self.settings.store.redact_text),
                        **out.flags.model_dump(exclude_defaults=True),
                    }
                ),
            )
        elif log.retries:
            cost["flags"] = out.flags.model_copy(update={"retries": log.retries})
        return out.model_copy(update=cost)

    # -- model calls -----------------------------------------------------------------------------------
    def lang(self, trace: Trace) -> str:
        """The prompt language for ``trace``: the ``language`` option, or detected from the question
        (else the answer) when ``auto``."""
        if self.language != "auto":
            return self.language
        return detect_language(trace.question or trace.answer)

    def context(self, chunks: Sequence[str], log: CallLog) -> list[str]:
        """``chunks`` cut to ``settings.judge.context_budget_chars`` (top-ranked kept first), the cut flagged."""
        kept, truncated = fit_context(chunks, self.settings.judge.context_budget_chars)
        log.context_truncated = log.context_truncated or truncated
        return kept

    async def ask(
        self, log: CallLog, template: str, lang: str, history: Sequence[Turn] = (), /, **values: str
    ) -> str:
        """Render ``template`` in ``lang`` (fences in ``values`` neutralised), call the model once (with the
        template's JSON schema as structured output where the server has it, ``judge.structured_output``), record
        the cost in ``log``; return the answer text without its reasoning (``raw_output`` keeps both).

        ``history`` (positional): earlier turns of the conversation (:meth:`history`), put before the prompt as a fenced
        ``CONVERSATION`` block (:func:`~ragpulse.judges.model.prompts.conversation_block`).

        A value other than the context cut to the budget (``context``, ``passages``) that is longer than
        ``judge.max_text_chars`` is never sent: ``JudgeError("text_too_long")`` (``skipped``).

        Raises:
            JudgeError: ``text_too_long``, ``truncated_output``, ``content_filtered``, ``empty_output``
                (:func:`read_answer`), ``over_budget``, ``judge_unavailable``, ``bad_reply``.
        """
        for name, value in values.items():
            if name not in _BUDGETED_VALUES:
                self.require_short(name, value)
        prompt = self.templates[(template, lang)].render(**values)
        if history:
            prompt = conversation_block([(t.question, t.answer) for t in history], lang) + prompt
        return await self.ask_prompt(log, prompt, reply_format=response_format(template))

    async def ask_prompt(
        self, log: CallLog, prompt: str, *, reply_format: Mapping[str, Any] | None = None
    ) -> str:
        """:meth:`ask` with a prompt already rendered (judged texts in it already defused); ``reply_format``:
        the ``response_format`` to send where the server takes it (:mod:`ragpulse.judges.model.schemas`)."""
        assert self.client is not None, "ask() needs the judge model"
        messages = [{"role": "user", "content": prompt}]
        if self.SYSTEM is not None:
            messages.insert(0, {"role": "system", "content": self.SYSTEM})
        log.prompts.append(prompt_text(messages))
        result = await self.client.complete(
            judge=self.name,
            version=self.version,
            messages=messages,
            max_tokens=getattr(self.options, "max_tokens", None),
            daily_token_budget=getattr(self.options, "daily_token_budget", None),
            temperature=self.temperature,
            response_format=reply_format,
        )
        log.add(result)
        return read_answer(result)

    async def aclose(self) -> None:
        """Release what the judge holds (the shared client is closed by ``close_judges``); idempotent."""
