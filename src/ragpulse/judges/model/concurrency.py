"""The adaptive limit on judge-model calls in flight (:class:`AdaptiveLimit`; docs/llm-judges.md).

AIMD with slow start, as TCP Reno, that backs off on **congestion** only and forgets a storm:

- congestion signals (:data:`CONGESTION_SIGNALS`), acted on while they are :data:`CONGESTION_RATE` of recent
  answers (a few random ones among good answers are noise): HTTP 429 (``rate_limited``), 503 (``unavailable``),
  408/504 (``gateway_timeout``), any other 5xx answered slowly (``slow_error``: later than
  :data:`LATENCY_SIGNAL_RATIO` × the reference latency and :data:`LATENCY_SIGNAL_MIN_S` more), a call that timed out (``timeout``) or could not connect
  (``connection``), and rising latency (``latency``: the recent average of 2xx latencies above
  :data:`LATENCY_SIGNAL_RATIO` × the reference average and :data:`LATENCY_SIGNAL_MIN_S` more; between ``latency_tolerance`` and that, answers only
  stop the limit from growing). Both averages are exponential (weights
  :data:`LATENCY_RECENT_EWMA`, :data:`LATENCY_REF_EWMA`) over samples capped at :data:`LATENCY_SAMPLE_CAP` ×
  the reference, so one stalled call cannot move them, and fast bad replies sit in both alike (a minimum
  would be set by the fastest error and make every good answer look slow);
- not congestion — the model answered, quickly, with something bad: a 5xx other than 503/504 within the
  tolerance, a 4xx, and every 2xx whatever its body (HTML, no ``choices``, empty content, not UTF-8: those are
  ``bad_reply``/``empty_output`` judgements, not a reason to send fewer calls). They neither lower nor raise
  the limit (a fast 2xx raises it);
- decay: after a decrease the slow-start threshold is the new limit (the penalty); every answer without a
  congestion signal moves the threshold :data:`THRESHOLD_DECAY` of the way back to ``maximum``, so after a
  storm the limit grows by one per answer again (slow start) instead of ``1/L`` per answer for the rest of the
  day. Recovery is counted in answers, not time: from the floor of 2 to 64 takes about 100 answers.

Every change is published to the ``ragpulse_judge_concurrency_limit`` gauge and every decrease counted in
``ragpulse_judge_concurrency_decreases_total{signal}``. Bound to one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from ragpulse.telemetry import JUDGE_CONCURRENCY_DECREASES, JUDGE_CONCURRENCY_LIMIT

__all__ = ["CONGESTION_SIGNALS", "THRESHOLD_DECAY", "AdaptiveLimit", "retry_after_seconds"]

#: The signals that lower the limit (labels of the decrease counter).
CONGESTION_SIGNALS = frozenset(
    {"rate_limited", "unavailable", "gateway_timeout", "slow_error", "timeout", "connection", "latency"}
)
#: Congestion signals lower the limit only while they are at least this share of recent answers (a moving
#: average of weight :data:`CONGESTION_EWMA`): a provider that throttles answers 429 to a good part of the calls,
#: while a few random 429s or timeouts among good answers (4 % in the mixed-fault bench) are noise, not a
#: reason to halve. The ``latency`` signal is an average already and is not gated.
CONGESTION_RATE = 0.1
CONGESTION_EWMA = 0.02
#: Share of the gap between the slow-start threshold and ``maximum`` closed by each answer without congestion.
THRESHOLD_DECAY = 0.005
#: Weights of the newest 2xx latency in the reference (slow) and recent (fast) moving averages.
LATENCY_REF_EWMA = 0.01
LATENCY_RECENT_EWMA = 0.1
#: A latency sample counts at most this multiple of the reference latency in the moving averages.
LATENCY_SAMPLE_CAP = 4.0
#: 2xx answers seen before rising latency can be a signal.
LATENCY_MIN_SAMPLES = 20
#: Rising latency is a congestion signal when the recent average exceeds this multiple of the reference.
#: Above ``latency_tolerance`` (2) alone an answer only holds the limit: the client's own CPU queueing on a
#: busy host doubles measured latencies without any congestion at the model.
LATENCY_SIGNAL_RATIO = 3.0
#: ... and by at least this much, seconds: a 50 ms model must slow past 300 ms (CPU noise of a loaded client is
#: tens of milliseconds; congestion at a provider is hundreds of milliseconds to seconds).
LATENCY_SIGNAL_MIN_S = 0.25

#: HTTP statuses that are congestion whatever their latency.
_CONGESTION_STATUS = {429: "rate_limited", 503: "unavailable", 504: "gateway_timeout", 408: "gateway_timeout"}


class AdaptiveLimit:
    """The adaptive limit on judge-model calls in flight (see the module docstring).

    Control law, ``L`` = the limit (a float; ``floor(L)`` calls may be in flight), within
    ``[minimum, maximum]``, starting at ``initial``:

    - a fast 2xx answer (latency ≤ ``latency_tolerance`` × the reference latency, a slow moving average) while
      the limit is in use (calls waiting or ``floor(L)`` in flight):
      ``L += 1`` below the slow-start threshold, else ``L += 1/L``; a slower answer holds ``L``;
    - congestion (signals at least :data:`CONGESTION_RATE` of recent answers, or rising latency):
      ``L = max(minimum, L × decrease)``, the threshold becomes the new ``L``; at most once per reference
      latency (one decrease per round trip);
    - any answer without a congestion signal: threshold += (maximum − threshold) × :data:`THRESHOLD_DECAY`;
    - a ``Retry-After`` (seconds or an HTTP date, on any answer): no new attempt — first try or retry — is
      sent before it has elapsed (:meth:`wait_clear`, called from the HTTP client's request hook).

    With ``adaptive`` off the limit stays at ``maximum`` (``Retry-After`` is still honoured).

    Args:
        minimum / maximum: bounds of the limit, calls (``minimum`` is clamped to ``maximum``).
        initial: starting limit, calls (clamped to the bounds).
        adaptive: adapt; ``False`` = fixed at ``maximum``.
        decrease: multiplicative decrease factor in (0, 1).
        latency_tolerance: answers slower than this multiple of the reference latency do not raise the limit,
            (the signals use :data:`LATENCY_SIGNAL_RATIO`).
        clock: monotonic seconds (tests give a fake one).

    Attributes:
        decreases: decreases so far; ``decreases_by_signal``: the same per signal.
        holds: the latest ``Retry-After`` holds, ``(monotonic time the answer was read, held until)``, seconds.
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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.maximum = maximum
        self.minimum = min(minimum, maximum)
        self.adaptive = adaptive
        self._decrease = decrease
        self._tolerance = latency_tolerance
        self._clock = clock
        self._limit = float(min(max(initial, self.minimum), maximum) if adaptive else maximum)
        self._threshold = float(maximum)  # slow start until the first congestion
        self._in_flight = 0
        self._waiting = 0
        self._congestion = 0.0  # moving share of answers that were congestion signals
        self._ref_latency: float | None = None
        self._recent = 0.0
        self._samples = 0
        self._last_decrease = -math.inf
        self._blocked_until = 0.0
        self._cond = asyncio.Condition()
        self.decreases = 0
        self.decreases_by_signal: Counter[str] = Counter()
        self.holds: deque[tuple[float, float]] = deque(maxlen=256)
        JUDGE_CONCURRENCY_LIMIT.set(self.limit)

    @property
    def limit(self) -> int:
        """Calls allowed in flight now."""
        return max(self.minimum, int(self._limit))

    @property
    def threshold(self) -> float:
        """The slow-start threshold, calls (``maximum`` until the first congestion; decays back to it)."""
        return self._threshold

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
                    delay = self._blocked_until - self._clock()
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
            delay = self._blocked_until - self._clock()
            if delay <= 0:
                return
            await asyncio.sleep(delay)

    # -- signals ---------------------------------------------------------------------------------------
    def on_answer(self, status: int, latency_s: float, retry_after_s: float | None = None) -> str | None:
        """One HTTP answer of an attempt: ``status`` after ``latency_s`` seconds (request sent → answer
        headers), with its ``Retry-After`` in seconds. Returns the congestion signal it gave, or ``None``."""
        self._hold(retry_after_s)
        signal = _CONGESTION_STATUS.get(status)
        if signal is None and status >= 500 and self._slow(latency_s):
            signal = "slow_error"
        if signal is not None:
            self.on_congestion(signal)
            return signal
        if 200 <= status < 300:
            return self.on_success(latency_s)
        self._relax()  # the model answered (a fast 5xx, a 4xx): no reason to send fewer calls
        return None

    def on_success(self, latency_s: float) -> str | None:
        """A 2xx answer after ``latency_s`` seconds, whatever its body; returns ``"latency"`` when the recent
        latencies say the model is slowing down (a decrease), else ``None``."""
        ref = self._observe_latency(latency_s)
        if self._samples >= LATENCY_MIN_SAMPLES and self._beyond(self._recent, ref):
            self.on_congestion("latency")
            return "latency"
        self._relax()
        if not self.adaptive or latency_s > self._tolerance * ref:
            return None
        if self._waiting == 0 and self._in_flight < self.limit:
            return None  # the limit is not what holds calls back: raising it says nothing about the model
        before = self.limit
        self._limit = min(
            float(self.maximum), self._limit + (1.0 if self._limit < self._threshold else 1.0 / self._limit)
        )
        if self.limit != before:
            self._changed()
        return None

    def _observe_latency(self, latency_s: float) -> float:
        """Fold a 2xx latency into the reference (slow average) and recent (fast average) latencies, each
        sample capped at :data:`LATENCY_SAMPLE_CAP` × the reference; returns the reference before it."""
        ref = self._ref_latency
        if ref is None:
            self._ref_latency = self._recent = max(latency_s, 1e-3)
            self._samples = 1
            return self._ref_latency
        sample = max(min(latency_s, LATENCY_SAMPLE_CAP * ref), 1e-3)
        self._ref_latency = ref + (sample - ref) * LATENCY_REF_EWMA
        self._recent += (sample - self._recent) * LATENCY_RECENT_EWMA
        self._samples += 1
        return ref

    def on_congestion(self, signal: str, retry_after_s: float | None = None) -> None:
        """A congestion signal (one of :data:`CONGESTION_SIGNALS`); ``retry_after_s`` from its ``Retry-After``.
        Lowers the limit when such signals are :data:`CONGESTION_RATE` of recent answers (``latency``: always),
        at most once per reference latency."""
        self._hold(retry_after_s)
        if signal != "latency":
            self._congestion += (1.0 - self._congestion) * CONGESTION_EWMA
            if self._congestion < CONGESTION_RATE:
                return
        now = self._clock()
        if not self.adaptive or now - self._last_decrease < (self._ref_latency or 0.0):
            return
        self._last_decrease = now
        self._limit = max(float(self.minimum), self._limit * self._decrease)
        self._threshold = self._limit
        self.decreases += 1
        self.decreases_by_signal[signal] += 1
        JUDGE_CONCURRENCY_DECREASES.add(1, {"signal": signal})
        self._changed()

    def on_overload(self, retry_after_s: float | None, signal: str = "rate_limited") -> None:
        """:meth:`on_congestion` under its former name (a 429 by default)."""
        self.on_congestion(signal, retry_after_s)

    def _slow(self, latency_s: float) -> bool:
        return self._ref_latency is not None and self._beyond(latency_s, self._ref_latency)

    @staticmethod
    def _beyond(latency_s: float, ref: float) -> bool:
        """``latency_s`` is a congestion-sized rise over ``ref``: above :data:`LATENCY_SIGNAL_RATIO` × and
        :data:`LATENCY_SIGNAL_MIN_S` more."""
        return latency_s > max(LATENCY_SIGNAL_RATIO * ref, ref + LATENCY_SIGNAL_MIN_S)

    def _relax(self) -> None:
        """One answer without congestion: the penalty decays (threshold back toward ``maximum``)."""
        self._threshold += (self.maximum - self._threshold) * THRESHOLD_DECAY
        self._congestion -= self._congestion * CONGESTION_EWMA

    def _hold(self, retry_after_s: float | None) -> None:
        if retry_after_s is not None and retry_after_s > 0:
            now = self._clock()
            self._blocked_until = max(self._blocked_until, now + retry_after_s)
            self.holds.append((now, now + retry_after_s))

    def _changed(self) -> None:
        JUDGE_CONCURRENCY_LIMIT.set(self.limit)
        if self._cond.locked():
            return
        with contextlib.suppress(RuntimeError):  # no running loop (a signal fed outside one, in a test)
            task = asyncio.get_running_loop().create_task(self._notify())
            _BACKGROUND.add(task)
            task.add_done_callback(_BACKGROUND.discard)

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
