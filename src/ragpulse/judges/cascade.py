"""A judge cascade (``judge.options.<name>.cascade: {first: heuristic | <options>, band: [low, high]}``).

A cheap first stage judges every trace; the main (LLM) judge runs only when the first stage is uncertain.
The deciding stage is recorded in ``flags.stage``:

- ``first``: the first stage decided — an ``ok`` score outside ``band``, or a ``skipped`` judgement other than
  ``unsupported_language`` (``no_answer``, ``abstained``, ``no_reference``, …: the main judge would skip too);
- ``main``: escalated — a first-stage score inside ``band`` (``low <= score <= high``), a first stage that
  cannot read the language (``skipped``/``unsupported_language``) or that failed (``error``); the main
  judge's judgement is the result, whatever its status;
- ``first_fallback``: escalated, but the main judge was refused by the daily token budget
  (``skipped``/``over_budget``) and the first stage had a score: the first stage's verdict is the result
  instead of a skip.

``decided_by`` keeps the deciding stage's own meaning. ``flags.cascade`` holds both stages' cost,
``{"first": {...}, "main": {...} | None}`` with ``version``, ``backend``, ``model``, ``status``, ``score``,
``latency_s``, ``prompt_tokens``, ``completion_tokens`` each; the judgement's tokens and latency are the sum
over the stages that ran. The cascade has its own version (hash of both stages' versions and the band), so a
cascade's judgements never mix with those of its main judge alone. ``ragpulse_cascade_escalations_total``
counts stored judgements whose stage is not ``first`` (:mod:`ragpulse.export.metrics_exporter`).
"""

from __future__ import annotations

import time
from typing import Any

from ragpulse.judges.frame import compute_version
from ragpulse.model import Judgement, JudgementFlags, JudgementStatus, Trace
from ragpulse.protocols import Judge, judge_needs_answer

__all__ = ["STAGES", "CascadeJudge", "escalates"]

#: Values of ``flags.stage``.
STAGES = ("first", "main", "first_fallback")


def escalates(first: Judgement, band: tuple[float, float]) -> bool:
    """Whether the main judge must decide after the first stage's judgement ``first`` (see module doc)."""
    if first.status is JudgementStatus.OK:
        return first.score is not None and band[0] <= first.score <= band[1]
    if first.status is JudgementStatus.ERROR:
        return True
    return first.reason_code == "unsupported_language"


def _cost(j: Judgement | None) -> dict[str, Any] | None:
    if j is None:
        return None
    return {
        "version": j.version,
        "backend": j.backend.value,
        "model": j.model,
        "status": j.status.value,
        "score": j.score,
        "latency_s": j.latency_s,
        "prompt_tokens": j.prompt_tokens,
        "completion_tokens": j.completion_tokens,
    }


class CascadeJudge:
    """Runs ``first``, then ``main`` when :func:`escalates`; implements :class:`ragpulse.protocols.Judge`.

    Args:
        name: the judge name (both stages are built for it).
        first: the cheap stage (the offline judge or a cheaper LLM configuration).
        main: the main LLM judge.
        band: ``(low, high)``, inclusive.
    """

    def __init__(self, name: str, first: Judge, main: Judge, band: tuple[float, float]) -> None:
        self.name = name
        self.first = first
        self.main = main
        self.band = (float(band[0]), float(band[1]))
        self.backend = main.backend
        self.threshold = main.threshold
        self.model: str | None = getattr(main, "model", None)
        self.client = getattr(main, "client", None)  # closed once by close_judges
        self.needs_answer = judge_needs_answer(first) or judge_needs_answer(main)
        self.version = compute_version(
            name,
            main.backend,
            {
                "cascade": {"first": first.version, "first_backend": first.backend.value, "band": self.band},
                "main": main.version,
            },
        )

    async def judge(self, trace: Trace) -> Judgement:
        """Judge ``trace`` through the stages; never raises except ``asyncio.CancelledError``."""
        started = time.perf_counter()
        a = await self.first.judge(trace)
        if not escalates(a, self.band):
            return self._result(a, "first", a, None, started)
        b = await self.main.judge(trace)
        if (
            b.status is JudgementStatus.SKIPPED
            and b.reason_code == "over_budget"
            and a.status is JudgementStatus.OK
        ):
            return self._result(a, "first_fallback", a, b, started)
        return self._result(b, "main", a, b, started)

    def _result(
        self, d: Judgement, stage: str, a: Judgement, b: Judgement | None, started: float
    ) -> Judgement:
        flags = {
            **d.flags.model_dump(),
            "stage": stage,
            "cascade": {"first": _cost(a), "main": _cost(b)},
        }
        ran = [a] if b is None else [a, b]
        return d.model_copy(
            update={
                "version": self.version,
                "flags": JudgementFlags(**flags),
                "latency_s": max(d.latency_s, time.perf_counter() - started),
                "prompt_tokens": sum(j.prompt_tokens for j in ran),
                "completion_tokens": sum(j.completion_tokens for j in ran),
            }
        )

    async def aclose(self) -> None:
        """Close what the stages hold beside the shared client (idempotent)."""
        for j in (self.first, self.main):
            closer = getattr(j, "aclose", None)
            if closer is not None:
                await closer()
