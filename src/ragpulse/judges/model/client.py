"""The one shared access layer to the judge model (any OpenAI-compatible chat-completions API).

:class:`LLMClient` wraps ``openai.AsyncOpenAI`` (its aiohttp or httpx transport, ``judge_http_transport``;
requests through its documented generic ``post`` path) and adds what every judge needs; the behaviour is
described in ``docs/llm-judges.md`` ("The judge-model layer"):

- retries: the openai client's own (408/409/429/5xx, timeouts, connection errors; backoff, ``Retry-After``),
  ``judge_max_retries`` times; attempts counted by a request hook (:attr:`LLMResult.retries`);
- limits shared by all judges: an adaptive number of calls in flight
  (:class:`~ragpulse.judges.model.concurrency.AdaptiveLimit`, AIMD between ``judge_min_concurrency`` and
  ``judge_max_concurrency``, the pool size, lowered on congestion only — 429, 503, timeouts, refused
  connections, rising latency — never on a fast bad answer; ``Retry-After`` holds every new attempt until it
  has elapsed) and an optional ``judge_requests_per_minute`` sliding 60 s window;
- an in-process LRU cache (``judge_cache_size``) keyed by (judge version, model, messages); an identical
  request in flight is awaited. Only replies the caller accepted are cached (:meth:`LLMClient.keep`: the judges
  keep the replies of an ``ok`` judgement): a failed call, and a reply that became an ``error`` (empty output,
  unparseable, truncated) or ``skipped`` judgement, is never served again — the next identical call asks the
  model;
- the daily token budget per judge (UTC days), taken after the concurrency slot: the prompt's estimate
  (:func:`estimate_tokens`) is reserved and replaced by the reply's ``usage``; a reply without ``usage`` is
  charged the estimate (:attr:`LLMResult.tokens_estimated`); over budget → ``JudgeError("over_budget")``;
  with a :class:`~ragpulse.protocols.TokenLedger` (the store, in ``serve``/``replay``) replicas on one database
  share one budget, reserved in blocks — no ledger round trip per call, none at all on the call path without a
  budget, and a ledger failure never fails a call (:mod:`ragpulse.judges.model.ledger`); without a ledger the
  budget is per process;
- replies that are not UTF-8 JSON or not a chat completion → ``JudgeError("bad_reply")``; an HTTP 4xx that is
  not retried keeps the provider's message (first 200 characters) in the ``judge_unavailable`` reason;
- request parameters servers disagree on (:mod:`ragpulse.judges.model.params`): ``max_completion_tokens`` or
  ``max_tokens`` (plus ``judge_reasoning_tokens`` of room for a reasoning model), a temperature or none, the
  judge's JSON schema as ``response_format`` (``judge_structured_output``) — by model family, else learnt from
  the server's 400 (one retry per parameter, remembered per base URL and model);
- reply shapes (:mod:`ragpulse.judges.model.reply`): content blocks, reasoning beside the content, reasoning
  tokens counted in the completion tokens (and so in the budget).

Nothing here blocks the event loop. The openai client, semaphore and limiter are bound to the event loop that
first uses them; a client used from another loop (e.g. another test) builds fresh ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import math
import os
import re
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.model.concurrency import AdaptiveLimit, retry_after_seconds
from ragpulse.judges.model.ledger import TokenAccounts
from ragpulse.judges.model.params import PARAMETERS, EndpointParams, TokenParam, refused_parameter
from ragpulse.judges.model.reply import Usage, read_completion
from ragpulse.logging import get_logger
from ragpulse.protocols import TokenLedger

if TYPE_CHECKING:  # openai takes ~0.4 s to import: loaded when a client is built, not by every CLI command
    import openai

__all__ = [
    "AdaptiveLimit",
    "LLMClient",
    "LLMResult",
    "LLMStats",
    "ModelUnavailableError",
    "estimate_tokens",
    "retry_after_seconds",
]

_log = get_logger("ragpulse.judges.model.client")


def estimate_tokens(texts: Sequence[str]) -> int:
    """The documented token estimate: ⌈total characters / 4⌉ (about right for English; high for Chinese)."""
    return math.ceil(sum(len(t) for t in texts) / 4)


class ModelUnavailableError(JudgeError):
    """The judge model could not be reached or kept failing (code ``judge_unavailable``).

    Attributes:
        retries: retries the openai client took before giving up.
    """

    def __init__(self, message: str, *, retries: int) -> None:
        super().__init__("judge_unavailable", message, retriable=True)
        self.retries = retries


@dataclass(frozen=True)
class LLMResult:
    """One judge-model reply.

    Attributes:
        text: the answer text: ``choices[0].message.content``, or its text blocks joined by newlines ("" when
            the model sent none; reasoning inside it, ``<think>…</think>``, is split off by the judge frame).
        reasoning: reasoning the model sent beside the answer (``reasoning_content``/``reasoning`` fields,
            thinking blocks; "" when none), never read as a verdict (:mod:`ragpulse.judges.model.reply`).
        finish_reason: ``stop``, ``length`` (hit the completion cap: the output is truncated),
            ``content_filter`` … or ``None``.
        prompt_tokens / completion_tokens: from the API's ``usage``, completion tokens including reasoning
            tokens; the estimate (:func:`estimate_tokens`) when the reply had none; 0 when cached.
        reasoning_tokens: ``usage.completion_tokens_details.reasoning_tokens`` (part of ``completion_tokens``).
        max_completion_tokens: the completion cap the request sent (tokens; the judge's cap plus
            ``judge.reasoning_tokens`` for a reasoning model), 0 when cached.
        tokens_estimated: the reply had no ``usage``: the token counts are estimates.
        retries: retries the openai client took for this call (0 for a cache hit).
        latency_s: wall time of the call including retries and waiting for the limits, seconds.
        cached: served from the in-process cache, no request made.
        cache_key: the cache key of a reply the model sent (``""`` for a cache hit or with the cache off);
            :meth:`LLMClient.keep` caches the reply under it.
    """

    text: str
    finish_reason: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    latency_s: float = 0.0
    cached: bool = False
    tokens_estimated: bool = False
    reasoning: str = ""
    reasoning_tokens: int = 0
    max_completion_tokens: int = 0
    cache_key: str = field(default="", repr=False, compare=False)


@dataclass
class LLMStats:
    """Counters of an :class:`LLMClient` since it was built (all integers, monotonic).

    Attributes:
        requests: calls sent to the model (each may include retries).
        retries: retries taken by those calls (429/5xx/timeouts/connection errors).
        failures: calls that failed for good (``judge_unavailable``).
        cache_hits: calls answered from the cache.
        over_budget: calls refused by the daily token budget, per judge name.
        prompt_tokens / completion_tokens: tokens spent, per judge name.
    """

    requests: int = 0
    retries: int = 0
    failures: int = 0
    cache_hits: int = 0
    over_budget: dict[str, int] = field(default_factory=dict)
    prompt_tokens: dict[str, int] = field(default_factory=dict)
    completion_tokens: dict[str, int] = field(default_factory=dict)


class _RateLimiter:
    """At most ``per_minute`` call starts in any sliding window of ``window_s`` seconds (waits, never rejects)."""

    def __init__(self, per_minute: int, window_s: float = 60.0) -> None:
        self._per_minute = per_minute
        self._window = window_s
        self._starts: deque[float] = deque()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            while True:
                now = time.monotonic()
                while self._starts and now - self._starts[0] >= self._window:
                    self._starts.popleft()
                if len(self._starts) < self._per_minute:
                    self._starts.append(now)
                    return
                await asyncio.sleep(self._window - (now - self._starts[0]))


@dataclass
class _LoopState:
    """Everything bound to one event loop."""

    loop: asyncio.AbstractEventLoop
    client: openai.AsyncOpenAI
    concurrency: AdaptiveLimit
    limiter: _RateLimiter | None
    #: cache key → the reply of the identical request in flight
    inflight: dict[str, asyncio.Future[LLMResult]] = field(default_factory=dict)


class LLMClient:
    """Shared judge-model client: one per process and model endpoint (``build_judges`` makes one for the judge
    section's model and gives it to every judge, plus one per distinct ``(base_url, model, key)`` of the
    judges' own ``model`` options, :class:`ragpulse.judges.registry.ModelClients`).

    Args:
        settings: reads ``judge_base_url``, ``judge_model``, ``judge_api_key``, ``judge_timeout_s``,
            ``judge_max_tokens``, ``judge_reasoning_tokens``, ``judge_temperature``, ``judge_structured_output``,
            ``judge_max_retries``, ``judge_max_concurrency``, ``judge_requests_per_minute``,
            ``judge_cache_size``, ``judge_daily_token_budget`` and ``judge_http_transport``.

        ledger: where the daily token budget is kept across processes (the store); ``None`` keeps it in this
            process. A ledger that cannot be reached is logged; the call goes on against this process's view
            of the budget.
        budget_suffix: appended to the judge name for the budget, the ledger and token statistics (``""`` for
            the judge section's model; ``"@<model>"`` for a judge's own model, so that a cheap stage's tokens
            neither spend nor are refused by the main model's budget).

    Raises:
        ConfigError: ``settings.judge.model`` is not set.
    """

    def __init__(
        self, settings: Settings, ledger: TokenLedger | None = None, *, budget_suffix: str = ""
    ) -> None:
        if not settings.judge.model:
            raise ConfigError("the LLM judge backend needs RAGPULSE_JUDGE_MODEL (judge_model)")
        self.settings = settings
        self.model: str = settings.judge.model
        self.budget_suffix = budget_suffix
        self.stats = LLMStats()
        self._cache: OrderedDict[str, LLMResult] = OrderedDict()
        self._accounts = TokenAccounts(ledger)
        self._ledger = ledger
        self._state: _LoopState | None = None
        self._closed = False

    def _secrets(self) -> tuple[str, ...]:
        """The configured secret values (judge key, model keys, store/bus passwords …), kept out of the
        provider's messages (:func:`scrub_secrets`)."""
        return configured_secrets(self.settings)

    # -- lifecycle -------------------------------------------------------------------------------------
    def _build_state(self, loop: asyncio.AbstractEventLoop) -> _LoopState:
        import openai

        s = self.settings
        n = s.judge.max_concurrency
        # The Limits class of whichever HTTP library this openai release is built on (httpx or httpx2).
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=n, max_keepalive_connections=n)
        concurrency = AdaptiveLimit(s.judge.min_concurrency, n, adaptive=s.judge.adaptive_concurrency)
        hooks: dict[str, list[Callable[..., Any]]] = {
            "request": [_count_attempt],
            "response": [_observe_answer],
        }
        if s.judge.http_transport == "aiohttp":
            http_client = openai.DefaultAioHttpClient(
                limits=limits, timeout=s.judge.timeout_s, event_hooks=hooks
            )
        else:
            http_client = openai.DefaultAsyncHttpxClient(
                limits=limits, timeout=s.judge.timeout_s, event_hooks=hooks
            )
        client = openai.AsyncOpenAI(
            api_key=s.judge.api_key.get_secret_value() if s.judge.api_key else "not-set",
            base_url=s.judge.base_url,
            timeout=s.judge.timeout_s,
            max_retries=s.judge.max_retries,
            http_client=http_client,
        )
        limiter = _RateLimiter(s.judge.requests_per_minute) if s.judge.requests_per_minute else None
        return _LoopState(loop=loop, client=client, concurrency=concurrency, limiter=limiter)

    @property
    def ledger(self) -> TokenLedger | None:
        """Where the daily token budget is kept (``None``: in this process)."""
        return self._ledger

    @property
    def concurrency(self) -> AdaptiveLimit | None:
        """The adaptive limit of the current event loop's state (``None`` before the first call)."""
        return self._state.concurrency if self._state is not None else None

    def _loop_state(self) -> _LoopState:
        if self._closed:
            raise RuntimeError("LLMClient is closed")
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            self._state = self._build_state(loop)
        return self._state

    async def aclose(self) -> None:
        """Close the HTTP connection pool (idempotent). The client cannot be used afterwards."""
        self._closed = True
        state, self._state = self._state, None
        await self._accounts.aclose()
        if state is not None and state.loop is asyncio.get_running_loop():
            await state.client.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- budget (ragpulse.judges.model.ledger) ---------------------------------------------------------
    def tokens_spent_today(self, judge: str) -> int:
        """Prompt + completion tokens ``judge`` spent on the current UTC day (with a ledger: by every process,
        as of this client's last ledger round trip, plus what it counted since)."""
        return self._accounts.spent_today(judge)

    @property
    def ledger_calls(self) -> int:
        """Round trips made to the token ledger (reservations of budget blocks, background flushes)."""
        return self._accounts.ledger_calls

    def _refuse_over_budget(self, judge: str, budget: int | None) -> None:
        try:
            self._accounts.refuse_over_budget(judge, budget)
        except JudgeError:
            self.stats.over_budget[judge] = self.stats.over_budget.get(judge, 0) + 1
            raise

    async def _reserve(self, judge: str, tokens: int, budget: int | None) -> str:
        """Reserve ``tokens`` of today's budget (:class:`TokenAccounts`); returns the UTC day charged.

        Raises:
            JudgeError: ``over_budget``.
        """
        try:
            return await self._accounts.reserve(judge, tokens, budget)
        except JudgeError:
            self.stats.over_budget[judge] = self.stats.over_budget.get(judge, 0) + 1
            raise

    async def _adjust(self, judge: str, day: str, tokens: int) -> None:
        """Correct a reservation of ``day`` by ``tokens`` (usage − estimate, or −estimate for a failed call)."""
        self._accounts.adjust(judge, day, tokens)

    # -- calls -----------------------------------------------------------------------------------------
    @staticmethod
    def _cache_key(version: str, model: str, messages: Sequence[Mapping[str, str]]) -> str:
        blob = json.dumps([version, model, list(messages)], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    async def complete(
        self,
        *,
        judge: str,
        version: str,
        messages: Sequence[Mapping[str, str]],
        max_tokens: int | None = None,
        daily_token_budget: int | None = None,
        temperature: float | None = None,
        response_format: Mapping[str, Any] | None = None,
    ) -> LLMResult:
        """Send one chat-completions request (or answer it from the cache).

        Args:
            judge: judge name (budget and token accounting, logs; with :attr:`budget_suffix` appended).
            version: judge version (part of the cache key).
            messages: chat messages (``role``/``content``).
            max_tokens: completion limit (tokens), default ``settings.judge.max_tokens``; a reasoning model
                gets ``settings.judge.reasoning_tokens`` more (:attr:`LLMResult.max_completion_tokens`).
            daily_token_budget: this judge's daily budget in tokens, default ``settings.judge.daily_token_budget``.
            temperature: sampling temperature, default ``settings.judge.temperature``; not sent to a model that
                takes only its default (:mod:`ragpulse.judges.model.params`).
            response_format: the ``response_format`` to send where the server takes it
                (``settings.judge.structured_output``), e.g. ``{"type": "json_schema", "json_schema": …}``.

        Returns:
            The reply; a ``finish_reason`` of ``length`` is returned as is (callers report
            ``truncated_output``).

        Raises:
            JudgeError: code ``over_budget``: the judge's daily token budget is spent (no request made).
            ModelUnavailableError: code ``judge_unavailable``: HTTP error after retries, timeout or connection
                failure; ``retries`` says how many retries were taken.
        """
        judge += self.budget_suffix
        cache_size = self.settings.judge.cache_size
        key = self._cache_key(version, self.model, messages) if cache_size else ""
        if cache_size:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.stats.cache_hits += 1
                return LLMResult(
                    text=hit.text, finish_reason=hit.finish_reason, cached=True, reasoning=hit.reasoning
                )
        budget = daily_token_budget or self.settings.judge.daily_token_budget
        request = _Request(
            max_tokens=max_tokens or self.settings.judge.max_tokens,
            temperature=self.settings.judge.temperature if temperature is None else temperature,
            response_format=response_format if self.settings.judge.structured_output != "off" else None,
        )
        self._refuse_over_budget(judge, budget)  # spent already: refuse without waiting for a slot
        state = self._loop_state()
        if not key:
            return await self._send(state, judge, messages, request, budget)
        # The same request already in flight (a trace redelivered while it is being judged): wait for it.
        pending = state.inflight.get(key)
        if pending is not None:
            try:
                first = await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # this caller was cancelled
                # the first caller was cancelled: make the call ourselves (below)
            else:
                self.stats.cache_hits += 1
                return LLMResult(
                    text=first.text, finish_reason=first.finish_reason, cached=True, reasoning=first.reasoning
                )
        fut: asyncio.Future[LLMResult] = state.loop.create_future()
        state.inflight[key] = fut
        try:
            result = await self._send(state, judge, messages, request, budget)
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved here, so an unwatched failure is not reported as "never retrieved"
            raise
        finally:
            if state.inflight.get(key) is fut:
                del state.inflight[key]
        fut.set_result(result)
        return dataclasses.replace(result, cache_key=key)

    def keep(self, result: LLMResult) -> None:
        """Cache ``result`` (a reply :meth:`complete` returned) for identical later calls: called once the reply
        proved good (the judges: for the replies of an ``ok`` judgement). Cache hits and replies made with the
        cache off are ignored."""
        cache_size = self.settings.judge.cache_size
        if not result.cache_key or result.cached or not cache_size:
            return
        self._cache[result.cache_key] = dataclasses.replace(result, cache_key="")
        self._cache.move_to_end(result.cache_key)
        while len(self._cache) > cache_size:
            self._cache.popitem(last=False)

    async def _send(
        self,
        state: _LoopState,
        judge: str,
        messages: Sequence[Mapping[str, str]],
        request: _Request,
        budget: int | None,
    ) -> LLMResult:
        """One request under the concurrency and rate limits and the budget; accounts tokens and retries."""
        import openai  # already loaded by _build_state; a dictionary lookup here

        started = time.perf_counter()
        reserved = estimate_tokens([m.get("content") or "" for m in messages])
        await state.concurrency.acquire()
        attempts = _Attempts(state.concurrency)
        token = _ATTEMPTS.set(attempts)
        try:
            # the concurrency slot is held for the whole call, retries included
            if state.limiter is not None:
                await state.limiter.acquire()
            day = await self._reserve(judge, reserved, budget)
            self.stats.requests += 1
            try:
                data, cap = await self._post(state, messages, request)
            except openai.APIError as e:
                if isinstance(e, openai.APITimeoutError | openai.APIConnectionError):
                    timeout = isinstance(e, openai.APITimeoutError) and _socket_error(e) is None
                    state.concurrency.on_congestion("timeout" if timeout else "connection")
                await self._adjust(judge, day, -reserved)
                retries = max(attempts.count - 1, 0)
                self.stats.retries += retries
                if isinstance(e, openai.APIResponseValidationError):
                    _log.warning("judge_bad_reply", judge=judge, model=self.model, error=type(e).__name__)
                    raise JudgeError("bad_reply", "the judge model's reply is not a chat completion") from e
                self.stats.failures += 1
                detail = _describe(e, retries, self._secrets())
                _log.warning("judge_model_unavailable", judge=judge, model=self.model, detail=detail)
                raise ModelUnavailableError(detail, retries=retries) from e
            except (UnicodeDecodeError, ValueError) as e:  # a body the transport could not decode
                await self._adjust(judge, day, -reserved)
                _log.warning("judge_bad_reply", judge=judge, model=self.model, error=type(e).__name__)
                raise JudgeError("bad_reply", "the judge model's reply is not UTF-8 JSON") from e
        finally:
            await state.concurrency.release()
            _ATTEMPTS.reset(token)
        retries = max(attempts.count - 1, 0)
        self.stats.retries += retries
        try:
            reply = read_completion(data)
        except JudgeError:
            await self._adjust(judge, day, -reserved)
            raise
        usage = reply.usage
        if usage is None:
            usage = Usage(reserved, estimate_tokens([reply.text, reply.reasoning]))
        pt, ct = usage.prompt_tokens, usage.completion_tokens
        self.stats.prompt_tokens[judge] = self.stats.prompt_tokens.get(judge, 0) + pt
        self.stats.completion_tokens[judge] = self.stats.completion_tokens.get(judge, 0) + ct
        await self._adjust(judge, day, pt + ct - reserved)
        if reply.reasoning or usage.reasoning_tokens:
            self._learn_reasoning()
        return LLMResult(
            text=reply.text,
            finish_reason=reply.finish_reason,
            prompt_tokens=pt,
            completion_tokens=ct,
            retries=retries,
            latency_s=time.perf_counter() - started,
            tokens_estimated=reply.usage is None,
            reasoning=reply.reasoning,
            reasoning_tokens=usage.reasoning_tokens,
            max_completion_tokens=cap,
        )

    # -- request parameters ----------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The base URL the parameter memory is keyed by (OpenAI's default when ``judge.base_url`` is unset)."""
        return (self.settings.judge.base_url or _OPENAI_BASE_URL).rstrip("/")

    @property
    def params(self) -> EndpointParams:
        """What this client's requests send now (:data:`~ragpulse.judges.model.params.PARAMETERS`)."""
        return PARAMETERS.get(
            self.endpoint, self.model, structured_output=self.settings.judge.structured_output
        )

    def _learn_reasoning(self) -> None:
        params = self.params
        if not params.reasoning:
            PARAMETERS.learn(self.endpoint, self.model, replace(params, reasoning=True))

    async def _post(
        self, state: _LoopState, messages: Sequence[Mapping[str, str]], request: _Request
    ) -> tuple[object, int]:
        """POST one chat completion with the parameters this endpoint and model take; returns ``(body, cap)``.

        ``cap`` is the completion-token limit sent: ``request.max_tokens`` plus ``judge.reasoning_tokens`` for a
        reasoning model; a 400 saying the prompt and that cap exceed the context window is retried once with
        ``request.max_tokens`` alone (not remembered: it depends on the prompt). A 400 that refuses the token parameter, the temperature or (with
        ``judge.structured_output: auto``) the response format is retried at once with the other token
        parameter, or without the refused one; the answer is remembered per (base URL, model) for the life of
        the process (:mod:`ragpulse.judges.model.params`), so the next call sends the right request first.

        Raises:
            openai.APIError: any other failure (as the openai client raises it).
        """
        import openai

        s = self.settings.judge
        params = self.params
        room = s.reasoning_tokens
        while True:
            cap = request.max_tokens + (room if params.reasoning else 0)
            body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
            body[params.token_param] = cap
            if params.temperature:
                body["temperature"] = request.temperature
            if request.response_format is not None and params.response_format:
                body["response_format"] = request.response_format
            try:
                # The documented generic-request path of the openai client: same retries, timeouts and
                # errors as ``chat.completions.create`` without its per-call TypedDict transformation
                # (≈ 0.7 ms CPU per call here).
                return await state.client.post("/chat/completions", cast_to=object, body=body), cap
            except openai.APIStatusError as e:
                adjustable = {
                    k: v
                    for k, v in body.items()
                    if k in _ADJUSTABLE
                    and k not in params.learnt
                    and not (k == "response_format" and s.structured_output == "json_schema")
                }
                refused = refused_parameter(e.status_code, e.body, adjustable)
                if refused is None:
                    if room and params.reasoning and _context_exceeded(e.status_code, e.body):
                        room = 0  # the room for reasoning does not fit this prompt: once without it
                        _log.info("judge_reasoning_room_dropped", model=self.model, status=e.status_code)
                        continue
                    raise
                params = _without(params, refused)
                PARAMETERS.learn(self.endpoint, self.model, params)
                _log.info(
                    "judge_parameter_refused", model=self.model, parameter=refused, status=e.status_code
                )


@dataclass
class _Attempts:
    """The attempts of the current call: how many were sent, when the last one was, the limit they report to."""

    concurrency: AdaptiveLimit
    count: int = 0
    sent_at: float = 0.0


#: Attempts of the current call, counted by the HTTP client's request hook (each retry is one more request).
_ATTEMPTS: ContextVar[_Attempts | None] = ContextVar("ragpulse_llm_attempts", default=None)


async def _count_attempt(request: Any) -> None:
    """HTTP client ``request`` event hook: wait out any ``Retry-After``, then count one attempt of the call
    running in this task."""
    holder = _ATTEMPTS.get()
    if holder is not None:
        await holder.concurrency.wait_clear()
        holder.count += 1
        holder.sent_at = time.monotonic()


async def _observe_answer(response: Any) -> None:
    """HTTP client ``response`` event hook: report the attempt's status and latency to the adaptive limit."""
    holder = _ATTEMPTS.get()
    if holder is None:
        return
    # congestion (429, 503, 504, slow 5xx, rising latency) lowers the limit; a fast bad answer does not
    latency = time.monotonic() - holder.sent_at
    holder.concurrency.on_answer(int(response.status_code), latency, retry_after_seconds(response.headers))


#: OpenAI's API, the openai client's base URL when ``judge.base_url`` is unset.
_OPENAI_BASE_URL = "https://api.openai.com/v1"

#: Request parameters a refusal may change (:func:`~ragpulse.judges.model.params.refused_parameter`).
_ADJUSTABLE = frozenset({"max_tokens", "max_completion_tokens", "temperature", "response_format"})


@dataclass(frozen=True)
class _Request:
    """What one call asks for besides the messages: completion cap (tokens, before any reasoning room),
    temperature, and the ``response_format`` to send where the server takes it (``None``: none)."""

    max_tokens: int
    temperature: float
    response_format: Mapping[str, Any] | None = None


def _context_exceeded(status: int, body: object) -> bool:
    """Whether an HTTP error says the prompt plus the completion cap exceed the model's context window
    (OpenAI's ``context_length_exceeded``, vLLM's "maximum context length is … you requested …")."""
    if status not in (400, 422) or not isinstance(body, dict):
        return False
    message = body.get("message")
    return body.get("code") == "context_length_exceeded" or (
        isinstance(message, str) and "maximum context length" in message.lower()
    )


def _without(params: EndpointParams, refused: str) -> EndpointParams:
    """``params`` after the server refused parameter ``refused`` (each is learnt once, never flipped back)."""
    learnt = params.learnt | {refused}
    if refused in ("max_tokens", "max_completion_tokens"):
        other: TokenParam = "max_tokens" if refused == "max_completion_tokens" else "max_completion_tokens"
        return replace(params, token_param=other, learnt=learnt | {other})
    if refused == "temperature":
        return replace(params, temperature=False, learnt=learnt)
    return replace(params, response_format=False, learnt=learnt)


def _describe(e: openai.APIError, retries: int, secrets: tuple[str, ...] = ()) -> str:
    import openai

    attempts = f"after {retries + 1} attempt{'s' if retries else ''}"
    if isinstance(e, openai.APIStatusError):
        message = (
            _provider_message(e, secrets)
            if 400 <= e.status_code < 500 and e.status_code not in _RETRIED
            else ""
        )
        return f"HTTP {e.status_code} {attempts}" + (f": {message}" if message else "")
    refused = _socket_error(e)
    if (
        refused is not None
    ):  # checked before the timeout: the aiohttp transport reports a refused connect as one
        why = os.strerror(refused.errno) if refused.errno else str(refused)
        return f"connection failed {attempts}: {why}"
    if isinstance(e, openai.APITimeoutError):
        return f"timeout {attempts}"
    if isinstance(e, openai.APIConnectionError):
        return f"connection failed {attempts}"
    return f"{type(e).__name__} {attempts}"


def _socket_error(e: BaseException) -> OSError | None:
    """The first socket error (refused, unreachable, unknown host …) in ``e``'s chain; timeouts excluded."""
    found: list[OSError] = []
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and not isinstance(cur, TimeoutError):
            found.append(cur)
        cur = cur.__cause__ or cur.__context__
    with_errno = [x for x in found if x.errno]  # the innermost cause names it best ("Connection refused")
    return with_errno[0] if with_errno else (found[0] if found else None)


#: HTTP statuses the openai client retries; their bodies say "slow down", not what was wrong with the request.
_RETRIED = frozenset({408, 409, 429})


def _provider_message(e: openai.APIStatusError, secrets: tuple[str, ...] = ()) -> str:
    """The provider's error message of an HTTP error (``error.message`` of the body), first 200 characters,
    with the configured ``secrets`` (and anything shaped like an API key) replaced by ``***``: providers echo
    the key they refused ("Incorrect API key provided: sk-…"), and this text is logged, stored as the
    judgement's reason and printed by the CLI."""
    body = e.body
    msg = body.get("message") if isinstance(body, dict) else None
    if not isinstance(msg, str):
        msg = e.message or ""
    return scrub_secrets(" ".join(msg.split()), secrets)[:200]


#: Tokens shaped like an API key ("sk-…", "sk_live_…", "Bearer …"), scrubbed even when not configured here.
_KEY_SHAPED = re.compile(r"(?i)\b(?:sk|rk)[-_][A-Za-z0-9_*.\-]{6,}|(?<=Bearer )\S+")


def scrub_secrets(text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """``text`` with every one of ``secrets`` (longest first; empty ones skipped) and every key-shaped token
    replaced by ``***``."""
    for secret in sorted({x for x in secrets if x}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _KEY_SHAPED.sub("***", text)


def configured_secrets(settings: Settings) -> tuple[str, ...]:
    """The values of every secret field (``SecretStr``, also inside dicts and lists) of ``settings``."""
    from pydantic import BaseModel, SecretStr

    found: list[str] = []
    seen: set[int] = set()

    def walk(v: object) -> None:
        if isinstance(v, SecretStr):
            value = v.get_secret_value()
            if value:
                found.append(value)
        elif isinstance(v, BaseModel):
            if id(v) in seen:
                return
            seen.add(id(v))
            for name in type(v).model_fields:
                walk(getattr(v, name, None))
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list | tuple | set | frozenset):
            for x in v:
                walk(x)

    walk(settings)
    return tuple(found)
