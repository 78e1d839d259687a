"""Corrected pass rates of live traffic: per judge and app, over a sliding window, from the store.

Each figure uses the observed pass rate of the judge's **current version** in the last ``window`` (traces from
Kafka/OTLP outside any run) and the newest calibration profile of exactly that judge and version; the
correction and its interval are :func:`ragpulse.corrected_pass_rate.corrected_pass_rate`. Because the counts
come from PostgreSQL, every replica computes the same figures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from ragpulse.corrected_pass_rate import CalibrationCounts, CorrectedPassRate, corrected_pass_rate
from ragpulse.logging import get_logger
from ragpulse.model import CalibrationProfile
from ragpulse.services.report_model import CorrectedRate, RunReport
from ragpulse.telemetry import CORRECTED_PASS_RATES, CorrectedPassRates

__all__ = [
    "CorrectedFigure",
    "CorrectedStore",
    "ProfileStore",
    "corrected_pass_rates",
    "publish",
    "run_corrected_loop",
    "with_corrected",
]

_log = get_logger("ragpulse.services.corrected")


class ProfileStore(Protocol):
    """Where calibration profiles are read from (``PostgresStore``, ``MemoryStore``)."""

    async def latest_calibration_profile(
        self, judge: str, judge_version: str
    ) -> CalibrationProfile | None: ...


class CorrectedStore(Protocol):
    """What the corrected pass rates need from the store (``PostgresStore`` has it)."""

    async def latest_calibration_profile(
        self, judge: str, judge_version: str
    ) -> CalibrationProfile | None: ...

    async def window_pass_counts(
        self, judge_versions: Mapping[str, str], window: timedelta
    ) -> list[tuple[str, str | None, int, int]]: ...


@dataclass(frozen=True)
class CorrectedFigure:
    """One judge (and app) in the window.

    Attributes:
        judge / version / app: whose pass rate (``app`` ``None`` for traces without an app).
        passed / scored: ``ok`` judgements that passed / all ``ok`` judgements in the window.
        profile: name of the calibration profile used, ``None`` when the version has none (stale).
        estimate: the corrected rate, ``None`` when there is no profile or no trustworthy figure.
    """

    judge: str
    version: str
    app: str | None
    passed: int
    scored: int
    profile: str | None
    estimate: CorrectedPassRate | None


def counts_of(profile: CalibrationProfile) -> CalibrationCounts:
    """The confusion counts of a stored profile."""
    return CalibrationCounts(tp=profile.tp, fn=profile.fn, tn=profile.tn, fp=profile.fp)


async def corrected_pass_rates(
    store: CorrectedStore, judge_versions: Mapping[str, str], window: timedelta
) -> tuple[list[CorrectedFigure], dict[str, bool]]:
    """Figures for every (judge, app) with judgements in the window, and ``{judge: stale}`` for every judge
    in ``judge_versions`` (stale = its current version has no calibration profile)."""
    profiles = {
        judge: await store.latest_calibration_profile(judge, version)
        for judge, version in judge_versions.items()
    }
    figures = []
    for judge, app, passed, scored in await store.window_pass_counts(judge_versions, window):
        profile = profiles.get(judge)
        estimate = corrected_pass_rate(passed, scored, counts_of(profile)) if profile else None
        figures.append(
            CorrectedFigure(
                judge=judge,
                version=judge_versions[judge],
                app=app,
                passed=passed,
                scored=scored,
                profile=profile.name if profile else None,
                estimate=estimate,
            )
        )
    return figures, {judge: profile is None for judge, profile in profiles.items()}


def publish(
    figures: list[CorrectedFigure],
    stale: Mapping[str, bool],
    gauges: CorrectedPassRates = CORRECTED_PASS_RATES,
) -> None:
    """Show ``figures`` on the ``ragpulse_judge_pass_rate_corrected*`` gauges (apps through the bounded
    ``app`` label) and ``stale`` on ``ragpulse_judge_calibration_stale``."""
    from ragpulse.telemetry import app_label

    rates = {
        (f.judge, app_label(f.app)): (f.estimate.value, f.estimate.lower, f.estimate.upper)
        for f in figures
        if f.estimate is not None
    }
    gauges.publish(rates, stale)


async def run_corrected_loop(
    store: CorrectedStore, judge_versions: Mapping[str, str], window_s: float, interval_s: float = 60.0
) -> None:
    """Recompute and publish the figures every ``interval_s`` seconds until cancelled; a store error is
    logged and retried at the next tick (the gauges keep their last figures)."""
    window = timedelta(seconds=window_s)
    while True:
        try:
            figures, stale = await corrected_pass_rates(store, judge_versions, window)
            publish(figures, stale)
        except Exception as e:  # the loop must outlive a database outage
            _log.warning("corrected_pass_rates_failed", error=type(e).__name__, detail=str(e)[:200])
        await asyncio.sleep(interval_s)


async def with_corrected(store: ProfileStore, report: RunReport, versions: Mapping[str, str]) -> RunReport:
    """``report`` with ``judges.<name>.pass_rate_corrected`` for every judge whose version (from
    ``versions``, the run's ``{judge: version}``) has a calibration profile and a trustworthy figure (≥ 30
    scored cases); other judges are left as they are."""
    updated = {}
    for name, stats in report.judges.items():
        version = versions.get(name)
        profile = await store.latest_calibration_profile(name, version) if version else None
        if profile is None:
            continue
        est = corrected_pass_rate(stats.pass_, stats.scored, counts_of(profile))
        if est is not None:
            rate = CorrectedRate(value=est.value, lower=est.lower, upper=est.upper, profile=profile.name)
            updated[name] = stats.model_copy(update={"pass_rate_corrected": rate})
    if not updated:
        return report
    return report.model_copy(update={"judges": {**report.judges, **updated}})
