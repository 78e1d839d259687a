"""Corrected pass rates of live traffic: per judge and app, over a sliding window, from the store.

Each figure uses the observed pass rate of the judge's **current version** in the last ``window`` (traces from
Kafka/OTLP outside any run) and the confusion counts of exactly that judge and version: those of its newest
calibration profile (``calibrate --save``) plus those of its human review labels (the portal's review queue,
:mod:`ragpulse.store.reviews`) — both are human verdicts on the same judge version, so they add up. The
correction and its interval are :func:`ragpulse.calibration.correction.corrected_pass_rate`. Because the counts
come from PostgreSQL, every replica computes the same figures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from ragpulse.calibration.correction import CalibrationCounts, CorrectedPassRate, corrected_pass_rate
from ragpulse.logging import get_logger
from ragpulse.model import CalibrationProfile
from ragpulse.store.reviews import LabelCounts
from ragpulse.telemetry import CORRECTED_PASS_RATES, CorrectedPassRates

__all__ = [
    "CorrectedFigure",
    "CorrectedStore",
    "ProfileStore",
    "combined_counts",
    "corrected_pass_rates",
    "publish",
    "run_corrected_loop",
]

_log = get_logger("ragpulse.calibration.live")


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

    async def review_label_counts(self, judge: str, version: str) -> LabelCounts: ...


@dataclass(frozen=True)
class CorrectedFigure:
    """One judge (and app) in the window.

    Attributes:
        judge / version / app: whose pass rate (``app`` ``None`` for traces without an app).
        passed / scored: ``ok`` judgements that passed / all ``ok`` judgements in the window.
        profile: name of the calibration profile used, ``None`` when the version has none.
        labels: review labels of the version counted besides the profile.
        counts: the confusion counts used (profile plus review labels), ``None`` when there are none (stale).
        estimate: the corrected rate, ``None`` without counts or without a trustworthy figure.
    """

    judge: str
    version: str
    app: str | None
    passed: int
    scored: int
    profile: str | None
    estimate: CorrectedPassRate | None
    labels: int = 0
    counts: CalibrationCounts | None = None


def counts_of(profile: CalibrationProfile) -> CalibrationCounts:
    """The confusion counts of a stored profile."""
    return CalibrationCounts(tp=profile.tp, fn=profile.fn, tn=profile.tn, fp=profile.fp)


def combined_counts(profile: CalibrationProfile | None, labels: LabelCounts) -> CalibrationCounts | None:
    """The profile's confusion counts plus the review labels'; ``None`` when there are neither."""
    if profile is None and labels.n == 0:
        return None
    base = counts_of(profile) if profile is not None else CalibrationCounts(tp=0, fn=0, tn=0, fp=0)
    return CalibrationCounts(
        tp=base.tp + labels.tp, fn=base.fn + labels.fn, tn=base.tn + labels.tn, fp=base.fp + labels.fp
    )


async def corrected_pass_rates(
    store: CorrectedStore, judge_versions: Mapping[str, str], window: timedelta
) -> tuple[list[CorrectedFigure], dict[str, bool]]:
    """Figures for every (judge, app) with judgements in the window, and ``{judge: stale}`` for every judge
    in ``judge_versions`` (stale = its current version has neither a calibration profile nor review labels)."""
    profiles: dict[str, CalibrationProfile | None] = {}
    labels: dict[str, LabelCounts] = {}
    counts: dict[str, CalibrationCounts | None] = {}
    for judge, version in judge_versions.items():
        profiles[judge] = await store.latest_calibration_profile(judge, version)
        labels[judge] = await store.review_label_counts(judge, version)
        counts[judge] = combined_counts(profiles[judge], labels[judge])
    figures = []
    for judge, app, passed, scored in await store.window_pass_counts(judge_versions, window):
        profile = profiles.get(judge)
        c = counts.get(judge)
        figures.append(
            CorrectedFigure(
                judge=judge,
                version=judge_versions[judge],
                app=app,
                passed=passed,
                scored=scored,
                profile=profile.name if profile else None,
                estimate=corrected_pass_rate(passed, scored, c) if c is not None else None,
                labels=labels[judge].n,
                counts=c,
            )
        )
    return figures, {judge: c is None for judge, c in counts.items()}


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
