"""The daily token accounting of one :class:`~ragpulse.judges.model.client.LLMClient` (per judge, UTC days).

What a judge-model call costs in round trips to the :class:`~ragpulse.protocols.TokenLedger` (the store):

- **no budget** (the default, ``judge_daily_token_budget`` unset): none on the call path. Tokens are counted in
  this process and written to the ledger in the background, at most once per :data:`FLUSH_INTERVAL_S` for all
  judges together (one ``charge_tokens`` per judge and day), and when the client closes; a failed flush is
  retried with the next one. Before, every call made two transactions on one hot row per judge (reserve, then
  correct), which capped the calls in flight and turned good answers into ``judge_unavailable`` when the
  database was slow.
- **a budget**: tokens are reserved from the ledger in blocks (:func:`block_tokens`: a twentieth of the budget,
  at most :data:`MAX_BLOCK_TOKENS`, at least the call's estimate), so replicas on one database still share one
  budget, but a process goes to the database once per block, not per call; calls in between spend the block
  locally (one reservation in flight per judge: the others wait for it). A reply's real usage corrects the
  block; what is left of it is given back when the client closes. The ledger total is thus at most one block
  per process above what was spent, and a replica may be refused while another still holds an unused block.
- **the ledger fails** (an error, or no answer within :data:`LEDGER_TIMEOUT_S`): the call goes on, counted
  against this process's view of the budget (the day's total as last known), and so do the calls of the next
  :data:`LEDGER_RETRY_S` without asking the ledger (a slow database does not slow every call); the counted
  tokens are charged with the next block. The failure is logged (``judge_token_ledger_unavailable``), never
  turned into an error of a model answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ragpulse.errors import JudgeError
from ragpulse.logging import get_logger
from ragpulse.protocols import TokenLedger

__all__ = ["FLUSH_INTERVAL_S", "MAX_BLOCK_TOKENS", "TokenAccounts", "block_tokens"]

_log = get_logger("ragpulse.judges.model.ledger")

#: Longest time tokens counted without a budget wait before they are written to the ledger, seconds.
FLUSH_INTERVAL_S = 5.0
#: Largest block of a budget reserved from the ledger at once, tokens.
MAX_BLOCK_TOKENS = 20_000
#: Longest wait for the ledger when the client closes (final flush, unused blocks given back), seconds.
CLOSE_TIMEOUT_S = 5.0
#: Longest wait for a block reservation; after a failed one the ledger is left alone this long, seconds.
LEDGER_TIMEOUT_S = 5.0
LEDGER_RETRY_S = 30.0


class _LedgerDown(Exception):
    """The ledger failed less than :data:`LEDGER_RETRY_S` ago: count locally without asking it."""


def block_tokens(budget: int, estimate: int) -> int:
    """Tokens reserved per ledger round trip under ``budget``: ``budget / 20`` within ``[1, MAX_BLOCK_TOKENS]``,
    and at least ``estimate`` (the call's own reservation)."""
    return max(estimate, min(MAX_BLOCK_TOKENS, max(1, budget // 20)))


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


@dataclass
class _Account:
    """One judge's tokens of one UTC day as this process knows them.

    ``total``: the day's total (ledger total as last seen + what this process counted since), tokens;
    ``left``: reserved from the ledger and not yet spent (negative: spent beyond the reservation, settled by the
    next block); ``unflushed``: counted without a budget and not yet written to the ledger.
    """

    day: str
    total: int = 0
    left: int = 0
    unflushed: int = 0
    blocks: bool = False  # tokens are reserved from the ledger in blocks (a budget and a ledger)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TokenAccounts:
    """Per-judge daily token accounts of one client (see the module docstring).

    Args:
        ledger: the shared ledger (the store), or ``None``: the budget is per process.
        flush_interval_s: longest wait before counted tokens are written to the ledger without a budget, s
            (default :data:`FLUSH_INTERVAL_S`).

    Attributes:
        ledger_calls: ledger round trips made (reservations and charges), for tests and benchmarks.
    """

    def __init__(self, ledger: TokenLedger | None, *, flush_interval_s: float | None = None) -> None:
        self._ledger = ledger
        self._accounts: dict[str, _Account] = {}
        self._flush_interval = FLUSH_INTERVAL_S if flush_interval_s is None else flush_interval_s
        self._last_flush = time.monotonic()
        self._flushing: asyncio.Task[None] | None = None
        self._ledger_down_until = 0.0  # after a failure, budget calls count locally until then (monotonic s)
        self.ledger_calls = 0

    @property
    def ledger(self) -> TokenLedger | None:
        return self._ledger

    def _account(self, judge: str, day: str) -> _Account:
        acct = self._accounts.get(judge)
        if acct is None or acct.day != day:
            if acct is not None and (acct.unflushed or acct.left > 0):
                self._spawn(self._settle(judge, acct))  # yesterday's counts and unused block
            acct = self._accounts[judge] = _Account(day)
        return acct

    def spent_today(self, judge: str) -> int:
        """Tokens ``judge`` spent today: the ledger total as last seen (every process) minus this process's
        unused reservation (plus what it spent beyond it), plus what it counted since."""
        acct = self._accounts.get(judge)
        if acct is None or acct.day != _today():
            return 0
        return acct.total - acct.left

    def refuse_over_budget(self, judge: str, budget: int | None) -> None:
        """Raise ``over_budget`` when the day's known total already reached ``budget`` and no reserved tokens
        are left (checked before waiting for a concurrency slot)."""
        acct = self._accounts.get(judge)
        if budget is None or acct is None or acct.day != _today() or acct.left > 0:
            return
        if acct.total >= budget:
            raise JudgeError("over_budget", f"daily token budget of {budget} spent")

    async def reserve(self, judge: str, tokens: int, budget: int | None) -> str:
        """Reserve ``tokens`` (the call's estimate) of today's budget; returns the UTC day charged.

        Raises:
            JudgeError: ``over_budget`` — the day's total reached ``budget`` (nothing reserved).
        """
        day = _today()
        acct = self._account(judge, day)
        if budget is None:
            acct.total += tokens
            if self._ledger is not None:
                acct.unflushed += tokens
                self._maybe_flush()
            return day
        if self._ledger is None:
            if acct.total >= budget:
                raise JudgeError("over_budget", f"daily token budget of {budget} spent")
            acct.total += tokens
            return day
        async with acct.lock:  # one reservation in flight per judge; the others then spend its block
            if acct.left < tokens:
                want = block_tokens(budget, tokens) - acct.left  # a negative ``left`` is settled here too
                try:
                    if time.monotonic() < self._ledger_down_until:
                        raise _LedgerDown
                    self.ledger_calls += 1
                    async with asyncio.timeout(LEDGER_TIMEOUT_S):
                        total = await self._ledger.reserve_tokens(judge, day, want + acct.unflushed, budget)
                except Exception as e:  # the call goes on, against this process's view of the budget
                    if not isinstance(e, _LedgerDown):
                        self._ledger_down_until = time.monotonic() + LEDGER_RETRY_S
                        _log.warning(
                            "judge_token_ledger_unavailable", judge=judge, error=f"{type(e).__name__}: {e}"
                        )
                    if acct.total >= budget:
                        raise JudgeError("over_budget", f"daily token budget of {budget} spent") from e
                    acct.total += tokens
                    acct.unflushed += tokens
                    return day
                if total is None:
                    acct.total = max(acct.total, budget)
                    raise JudgeError("over_budget", f"daily token budget of {budget} spent")
                acct.unflushed = 0
                acct.total = total
                acct.left += want
                acct.blocks = True
            acct.left -= tokens
        return day

    def adjust(self, judge: str, day: str, tokens: int) -> None:
        """Correct a reservation of ``day`` by ``tokens`` (usage − estimate, or −estimate for a failed call);
        never waits for the ledger."""
        if not tokens:
            return
        acct = self._accounts.get(judge)
        if acct is None or acct.day != day:
            if self._ledger is not None:  # a call that crossed midnight: settle the old day in the background
                self._spawn(self._charge(judge, day, tokens))
            return
        if acct.blocks:
            acct.left -= tokens
        else:
            acct.total += tokens
            if self._ledger is not None:
                acct.unflushed += tokens
                self._maybe_flush()

    # -- background writes -------------------------------------------------------------------------------
    def _maybe_flush(self) -> None:
        if self._flushing is not None and not self._flushing.done():
            return
        if time.monotonic() - self._last_flush < self._flush_interval:
            return
        self._last_flush = time.monotonic()
        self._flushing = self._spawn(self.flush())

    async def flush(self) -> None:
        """Write the tokens counted without a budget to the ledger (one ``charge_tokens`` per judge)."""
        if self._ledger is None or time.monotonic() < self._ledger_down_until:
            return
        for judge, acct in list(self._accounts.items()):
            n, acct.unflushed = acct.unflushed, 0
            if not n:
                continue
            try:
                self.ledger_calls += 1
                async with asyncio.timeout(LEDGER_TIMEOUT_S):
                    total = await self._ledger.charge_tokens(judge, acct.day, n)
            except Exception as e:  # kept for the next flush
                acct.unflushed += n
                self._ledger_down_until = time.monotonic() + LEDGER_RETRY_S
                _log.warning("judge_token_ledger_unavailable", judge=judge, error=f"{type(e).__name__}: {e}")
                return
            if self._accounts.get(judge) is acct:
                acct.total = max(acct.total, total + acct.unflushed)

    async def _charge(self, judge: str, day: str, tokens: int) -> None:
        assert self._ledger is not None
        try:
            self.ledger_calls += 1
            await self._ledger.charge_tokens(judge, day, tokens)
        except Exception as e:
            _log.warning("judge_token_ledger_unavailable", judge=judge, error=f"{type(e).__name__}: {e}")

    async def _settle(self, judge: str, acct: _Account) -> None:
        """Write ``acct``'s unflushed tokens and give back its unused block (one charge)."""
        n = acct.unflushed - acct.left  # an unused block is given back, spending beyond it charged
        acct.unflushed = 0
        acct.left = 0
        if n and self._ledger is not None:
            await self._charge(judge, acct.day, n)

    async def aclose(self) -> None:
        """Flush counted tokens and give back unused reservations (bounded by :data:`CLOSE_TIMEOUT_S`)."""
        if self._ledger is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                if self._flushing is not None:
                    with contextlib.suppress(Exception):
                        await self._flushing
                for judge, acct in list(self._accounts.items()):
                    await self._settle(judge, acct)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)
        return task


#: Tasks kept alive until done (asyncio holds only weak references to tasks).
_BACKGROUND: set[asyncio.Task[None]] = set()
