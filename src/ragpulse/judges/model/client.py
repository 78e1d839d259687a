"""The one shared access layer to the judge model (any OpenAI-compatible chat-completions API).

:class:`LLMClient` wraps ``openai.AsyncOpenAI`` (its aiohttp or httpx transport, ``judge_http_transport``;
requests through its documented generic ``post`` path) and adds what every judge needs; the behaviour is
described in ``docs/llm-judges.md`` ("The judge-model layer"):

- retries: the openai client's own (408/409/429/5xx, timeouts, connection errors; backoff, ``Retry-After``),
  ``judge_max_retries`` times; attempts counted by a request hook (:attr:`LLMResult.retries`);
- limits shared by all judges: an adaptive number of calls in flight (:class:`AdaptiveLimit`, AIMD between
  ``judge_min_concurrency`` and ``judge_max_concurrency``, the pool size; ``Retry-After`` of a 429/503 holds
  every new attempt until it has elapsed) and an optional ``judge_requests_per_minute`` sliding 60 s window;
- an in-process LRU cache (``judge_cache_size``) keyed by (judge version, model, messages); an identical
  request in flight is awaited; failures are not cached;
- the daily token budget per judge (UTC days), taken after the concurrency slot: the prompt's estimate
  (:func:`estimate_tokens`) is reserved and replaced by the reply's ``usage``; a reply without ``usage`` is
  charged the estimate (:attr:`LLMResult.tokens_estimated`); over budget → ``JudgeError("over_budget")``;
  with a :class:`~ragpulse.protocols.TokenLedger` (the store, in ``serve``/``replay``) the ledger table is the
  source of truth, so replicas on one database share one budget; without one the budget is per process;
- replies that are not UTF-8 JSON or not a chat completion → ``JudgeError("bad_reply")``; an HTTP 4xx that is
  not retried keeps the provider's message (first 200 characters) in the ``judge_unavailable`` reason.

Nothing here blocks the event loop. The openai client, semaphore and limiter are bound to the event loop that
first uses them; a client used from another loop (e.g. another test) builds fresh ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import json
import math
import os
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.logging import get_logger
from ragpulse.protocols import TokenLedger
from ragpulse.telemetry import JUDGE_CONCURRENCY_LIMIT

if TYPE_CHECKING:  # openai takes ~0.4 s to import: loaded when a client is built, not by every CLI command
    import openai

__all__ = ["AdaptiveLimit", "LLMClient", "LLMResult", "LLMStats", "ModelUnavailableError", "estimate_tokens"]

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
        text: ``choices[0].message.content`` ("" when the model sent none).
        finish_reason: ``stop``, ``length`` (hit ``max_tokens``: the output is truncated), … or ``None``.
        prompt_tokens / completion_tokens: from the API's ``usage``; the estimate (:func:`estimate_tokens`)
            when the reply had none; 0 when cached.
        tokens_estimated: the reply had no ``usage``: the token counts are estimates.
        retries: retries the openai client took for this call (0 for a cache hit).
        latency_s: wall time of the call including retries and waiting for the limits, seconds.
        cached: served from the in-process cache, no request made.
    """

    text: str
    finish_reason: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    latency_s: float = 0.0
    cached: bool = False
    tokens_estimated: bool = False


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


class AdaptiveLimit:
    """The adaptive limit on judge-model calls in flight (AIMD with slow start, as TCP Reno; docs/llm-judges.md).

    Control law, ``L`` = the limit (a float; ``floor(L)`` calls may be in flight), within
    ``[minimum, maximum]``, starting at ``initial``:

    - a 2xx answer whose latency is at most ``latency_tolerance`` × the base latency (the lowest recently
      seen, drifting up by 1 % of the gap per answer so a model that slows down for everyone is followed),
      while the limit is in use (calls waiting or ``floor(L)`` in flight): ``L += 1`` below the slow-start
      threshold (doubling per round trip), else ``L += 1/L`` (+1 per window of ``L`` answers);
      a slower answer holds ``L``;
    - a 429, 5xx, timeout or connection failure: ``L = max(minimum, L × decrease)`` and the slow-start
      threshold becomes the new ``L``; at most once per base latency (one decrease per round trip);
    - a ``Retry-After`` (seconds or an HTTP date, on any answer): no new attempt — first try or retry — is
      sent before it has elapsed (:meth:`wait_clear`, called from the HTTP client's request hook).

    Every change is published to the ``ragpulse_judge_concurrency_limit`` gauge. With ``adaptive`` off the
    limit stays at ``maximum`` (``Retry-After`` is still honoured). Bound to one event loop.

    Args:
        minimum / maximum: bounds of the limit, calls (``minimum`` is clamped to ``maximum``).
        initial: starting limit, calls (clamped to the bounds).
        adaptive: adapt; ``False`` = fixed at ``maximum``.
        decrease: multiplicative decrease factor in (0, 1).
        latency_tolerance: answers slower than this multiple of the base latency do not raise the limit.
    """

    def __init__(
        self,
        minimum: int,
        maximum: int,
        initial: int = 16,
        *,
        adaptive: bool = True,
        decrease: float = 0.5,
        latency_tolerance: float = 2.0,
    ) -> None:
        self.maximum = maximum
        self.minimum = min(minimum, maximum)
        self.adaptive = adaptive
        self._decrease = decrease
        self._tolerance = latency_tolerance
        self._limit = float(min(max(initial, self.minimum), maximum) if adaptive else maximum)
        self._threshold = float(maximum)  # slow start until the first overload
        self._in_flight = 0
        self._waiting = 0
        self._base_latency: float | None = None
        self._last_decrease = -math.inf
        self._blocked_until = 0.0
        self._cond = asyncio.Condition()
        self.decreases = 0
        #: The latest ``Retry-After`` holds, ``(monotonic time the answer was read, held until)``, seconds.
        self.holds: deque[tuple[float, float]] = deque(maxlen=256)
        JUDGE_CONCURRENCY_LIMIT.set(self.limit)

    @property
    def limit(self) -> int:
        """Calls allowed in flight now."""
        return max(self.minimum, int(self._limit))

    @property
    def in_flight(self) -> int:
        """Calls holding a slot now."""
        return self._in_flight

    async def acquire(self) -> None:
        """Wait for a slot (and for any ``Retry-After`` to elapse)."""
        async with self._cond:
            self._waiting += 1
            try:
                while True:
                    delay = self._blocked_until - time.monotonic()
                    if delay > 0:
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(delay):
                                await self._cond.wait()
                        continue
                    if self._in_flight < self.limit:
                        break
                    await self._cond.wait()
            finally:
                self._waiting -= 1
            self._in_flight += 1

    async def release(self) -> None:
        """Give a slot back."""
        async with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    async def wait_clear(self) -> None:
        """Return once no ``Retry-After`` is pending (every attempt, first or retry, waits here)."""
        while True:  # the deadline may move later while we sleep (another Retry-After)
            delay = self._blocked_until - time.monotonic()
            if delay <= 0:
                return
            await asyncio.sleep(delay)

    def on_success(self, latency_s: float) -> None:
        """A 2xx answer after ``latency_s`` seconds (one attempt: request sent → answer headers)."""
        base = self._base_latency
        if base is None or latency_s < base:
            base = latency_s
        else:
            base += (latency_s - base) * 0.01
        self._base_latency = base
        if not self.adaptive or latency_s > self._tolerance * max(base, 1e-3):
            return
        if self._waiting == 0 and self._in_flight < self.limit:
            return  # the limit is not what holds calls back: raising it says nothing about the model
        before = self.limit
        self._limit = min(
            float(self.maximum), self._limit + (1.0 if self._limit < self._threshold else 1.0 / self._limit)
        )
        if self.limit != before:
            self._changed()

    def on_overload(self, retry_after_s: float | None) -> None:
        """A 429/5xx answer, a timeout or a connection failure; ``retry_after_s`` from its ``Retry-After``."""
        now = time.monotonic()
        if retry_after_s is not None and retry_after_s > 0:
            self._blocked_until = max(self._blocked_until, now + retry_after_s)
            self.holds.append((now, now + retry_after_s))
        if not self.adaptive or now - self._last_decrease < (self._base_latency or 0.0):
            return
        self._last_decrease = now
        self._limit = max(float(self.minimum), self._limit * self._decrease)
        self._threshold = self._limit
        self.decreases += 1
        self._changed()

    def _changed(self) -> None:
        JUDGE_CONCURRENCY_LIMIT.set(self.limit)
        if self._cond.locked():
            return
        loop_task = asyncio.get_running_loop().create_task(self._notify())
        _BACKGROUND.add(loop_task)
        loop_task.add_done_callback(_BACKGROUND.discard)

    async def _notify(self) -> None:
        async with self._cond:
            self._cond.notify_all()


#: Tasks kept alive until done (asyncio holds only weak references to tasks).
_BACKGROUND: set[asyncio.Task[None]] = set()


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds of a ``retry-after-ms`` or ``Retry-After`` header (seconds or an HTTP date); ``None`` without."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


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
            ``judge_max_tokens``, ``judge_temperature``, ``judge_max_retries``, ``judge_max_concurrency``,
            ``judge_requests_per_minute``, ``judge_cache_size``, ``judge_daily_token_budget`` and
            ``judge_http_transport``.

        ledger: where the daily token budget is kept across processes (the store); ``None`` keeps it in this
            process. A ledger that cannot be reached fails the call as ``judge_unavailable``.
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
        self._spent: dict[str, tuple[str, int]] = {}  # judge -> (UTC day, tokens), as last known
        self._ledger = ledger
        self._state: _LoopState | None = None
        self._closed = False

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
        if state is not None and state.loop is asyncio.get_running_loop():
            await state.client.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- budget ----------------------------------------------------------------------------------------
    def tokens_spent_today(self, judge: str) -> int:
        """Prompt + completion tokens ``judge`` spent on the current UTC day (with a ledger: by every process,
        as of this client's last ledger update)."""
        day = datetime.now(UTC).date().isoformat()
        d, n = self._spent.get(judge, (day, 0))
        return n if d == day else 0

    def _charge(self, judge: str, tokens: int) -> None:
        day = datetime.now(UTC).date().isoformat()
        self._spent[judge] = (day, self.tokens_spent_today(judge) + tokens)

    def _refuse_over_budget(self, judge: str, budget: int | None) -> None:
        if budget is not None and self.tokens_spent_today(judge) >= budget:
            self._over_budget(judge, budget)

    def _over_budget(self, judge: str, budget: int | None) -> None:
        self.stats.over_budget[judge] = self.stats.over_budget.get(judge, 0) + 1
        raise JudgeError("over_budget", f"daily token budget of {budget} spent")

    async def _reserve(self, judge: str, tokens: int, budget: int | None) -> str:
        """Reserve ``tokens`` of today's budget (ledger or process); returns the UTC day charged.

        Raises:
            JudgeError: ``over_budget``; ``judge_unavailable`` when the ledger cannot be reached.
        """
        day = datetime.now(UTC).date().isoformat()
        if self._ledger is None:
            self._refuse_over_budget(judge, budget)
            self._charge(judge, tokens)
            return day
        try:
            total = await self._ledger.reserve_tokens(judge, day, tokens, budget)
        except Exception as e:  # the store's errors; no call without the shared budget
            _log.warning("judge_token_ledger_unavailable", judge=judge, error=f"{type(e).__name__}: {e}")
            raise ModelUnavailableError(f"token ledger unavailable: {type(e).__name__}", retries=0) from e
        if total is None:
            self._spent[judge] = (day, max(budget or 0, self.tokens_spent_today(judge)))
            self._over_budget(judge, budget)
        else:
            self._spent[judge] = (day, total)
        return day

    async def _adjust(self, judge: str, day: str, tokens: int) -> None:
        """Correct a reservation of ``day`` by ``tokens`` (usage − estimate, or −estimate for a failed call)."""
        if self._ledger is None:
            self._charge(judge, tokens)
            return
        if not tokens:
            return
        try:
            total = await self._ledger.charge_tokens(judge, day, tokens)
        except Exception as e:  # the reservation stands (the budget errs on the safe side)
            _log.warning("judge_token_ledger_unavailable", judge=judge, error=f"{type(e).__name__}: {e}")
            return
        if day == datetime.now(UTC).date().isoformat():
            self._spent[judge] = (day, total)

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
    ) -> LLMResult:
        """Send one chat-completions request (or answer it from the cache).

        Args:
            judge: judge name (budget and token accounting, logs; with :attr:`budget_suffix` appended).
            version: judge version (part of the cache key).
            messages: chat messages (``role``/``content``).
            max_tokens: completion limit, default ``settings.judge.max_tokens``.
            daily_token_budget: this judge's daily budget in tokens, default ``settings.judge.daily_token_budget``.

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
                return LLMResult(text=hit.text, finish_reason=hit.finish_reason, cached=True)
        budget = daily_token_budget or self.settings.judge.daily_token_budget
        self._refuse_over_budget(judge, budget)  # spent already: refuse without waiting for a slot
        state = self._loop_state()
        if not key:
            return await self._send(state, judge, messages, max_tokens, budget)
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
                return LLMResult(text=first.text, finish_reason=first.finish_reason, cached=True)
        fut: asyncio.Future[LLMResult] = state.loop.create_future()
        state.inflight[key] = fut
        try:
            result = await self._send(state, judge, messages, max_tokens, budget)
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
        self._cache[key] = result
        while len(self._cache) > cache_size:
            self._cache.popitem(last=False)
        return result

    async def _send(
        self,
        state: _LoopState,
        judge: str,
        messages: Sequence[Mapping[str, str]],
        max_tokens: int | None,
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
                # The documented generic-request path of the openai client: same retries, timeouts and
                # errors as ``chat.completions.create`` without its per-call TypedDict transformation
                # (≈ 0.7 ms CPU per call here).
                data = await state.client.post(
                    "/chat/completions",
                    cast_to=object,
                    body={
                        "model": self.model,
                        "messages": [dict(m) for m in messages],
                        "temperature": self.settings.judge.temperature,
                        "max_tokens": max_tokens or self.settings.judge.max_tokens,
                    },
                )
            except openai.APIError as e:
                if isinstance(e, openai.APITimeoutError | openai.APIConnectionError):
                    state.concurrency.on_overload(None)
                await self._adjust(judge, day, -reserved)
                retries = max(attempts.count - 1, 0)
                self.stats.retries += retries
                if isinstance(e, openai.APIResponseValidationError):
                    _log.warning("judge_bad_reply", judge=judge, model=self.model, error=type(e).__name__)
                    raise JudgeError("bad_reply", "the judge model's reply is not a chat completion") from e
                self.stats.failures += 1
                detail = _describe(e, retries)
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
            text, finish_reason, usage = _read_completion(data)
        except JudgeError:
            await self._adjust(judge, day, -reserved)
            raise
        pt, ct = usage or (reserved, estimate_tokens([text]))
        self.stats.prompt_tokens[judge] = self.stats.prompt_tokens.get(judge, 0) + pt
        self.stats.completion_tokens[judge] = self.stats.completion_tokens.get(judge, 0) + ct
        await self._adjust(judge, day, pt + ct - reserved)
        return LLMResult(
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=pt,
            completion_tokens=ct,
            retries=retries,
            latency_s=time.perf_counter() - started,
            tokens_estimated=usage is None,
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
    status = int(response.status_code)
    if status == 429 or status >= 500:
        holder.concurrency.on_overload(retry_after_seconds(response.headers))
    elif status < 300:
        holder.concurrency.on_success(time.monotonic() - holder.sent_at)


def _read_completion(data: object) -> tuple[str, str | None, tuple[int, int] | None]:
    """``(text, finish_reason, (prompt_tokens, completion_tokens) or None without usage)`` of a body.

    Raises:
        JudgeError: ``bad_reply``: the body is not a chat completion.
    """
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise JudgeError("bad_reply", "the reply is not a chat completion")
    choices = data["choices"]
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    text = content if isinstance(content, str) else ""
    finish = choice.get("finish_reason")
    usage = data.get("usage")
    counts = (
        (_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int)
        else None
    )
    return text, finish if isinstance(finish, str) else None, counts


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0


def _describe(e: openai.APIError, retries: int) -> str:
    import openai

    attempts = f"after {retries + 1} attempt{'s' if retries else ''}"
    if isinstance(e, openai.APIStatusError):
        message = _provider_message(e) if 400 <= e.status_code < 500 and e.status_code not in _RETRIED else ""
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


def _provider_message(e: openai.APIStatusError) -> str:
    """The provider's error message of an HTTP error (``error.message`` of the body), first 200 characters."""
    body = e.body
    msg = body.get("message") if isinstance(body, dict) else None
    if not isinstance(msg, str):
        msg = e.message or ""
    return " ".join(msg.split())[:200]
