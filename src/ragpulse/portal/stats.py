"""Score statistics of stored judgements: histogram per judge (and app) with the Prometheus histogram's
buckets, pass rate and counts for a time window, and pass rate / mean score per judge per interval.

Shared by ``GET /api/v1/stats/scores``, ``GET /api/v1/stats/timeseries`` and the portal's Live traffic charts.
Long windows read whole hours from an hourly rollup (migration 121) that :class:`RollupRefresher` keeps up to
date inside ``serve``; the edges of the window and the last hours come from the judgements themselves, so the
numbers are the same either way. By default only live traffic counts (``source=live``: Kafka and OTLP traces,
:func:`ragpulse.query.source_scope`); replays and drafts judged by ``POST /evaluate`` (``source=api``) are counted
when asked for (``source=replay|api|all``).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from pydantic import BaseModel

from ragpulse.aio import cancel_and_wait
from ragpulse.errors import BadRequest
from ragpulse.export.otel_setup import SCORE_BUCKETS
from ragpulse.logging import get_logger
from ragpulse.query import source_scope
from ragpulse.store import PostgresStore

__all__ = [
    "Bucket",
    "JudgeScores",
    "JudgeSeries",
    "RollupRefresher",
    "SeriesPoint",
    "auto_interval",
    "refresh_rollup",
    "score_stats",
    "timeseries",
]

_log = get_logger("ragpulse.stats")

#: Intervals the time series snaps to (seconds), smallest first.
_NICE_S = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)


class Bucket(BaseModel):
    """Judgements with ``prev le < score <= le`` (not cumulative, unlike Prometheus' ``_bucket``)."""

    le: float
    count: int


class JudgeScores(BaseModel):
    """Scores of one judge (and app when grouped by app) in the window.

    ``pass_rate`` = passed / (passed + failed) (``None`` without decided judgements); ``abstained``: skipped
    judgements whose answer abstained, not in ``skipped``; ``mean_score`` over ``ok`` judgements; ``buckets``
    follow :data:`SCORE_BUCKETS`."""

    judge: str
    app: str | None = None
    count: int
    passed: int
    failed: int
    errors: int
    skipped: int
    abstained: int = 0
    pass_rate: float | None
    mean_score: float | None
    buckets: list[Bucket]


class SeriesPoint(BaseModel):
    """One interval starting at ``start``: judgements ``count`` (of which ``errors`` and ``skipped``, neither
    in the pass rate), ``pass_rate`` and ``mean_score``."""

    start: datetime
    count: int
    errors: int = 0
    skipped: int = 0
    pass_rate: float | None
    mean_score: float | None


class JudgeSeries(BaseModel):
    """The time series of one judge."""

    judge: str
    points: list[SeriesPoint]


async def score_stats(
    store: PostgresStore,
    *,
    since: datetime,
    until: datetime,
    judge: str | None = None,
    app: str | None = None,
    source: str | None = None,
    include_api: bool = False,
    by_app: bool = False,
) -> list[JudgeScores]:
    """Histogram, pass rate and counts per judge (per judge and app when ``by_app``), judges by name."""
    scope = source_scope(source, include_api=include_api)
    rows = await store.score_counts(
        since=since,
        until=until,
        bounds=SCORE_BUCKETS,
        judge=judge,
        app=app,
        source=scope.only,
        exclude_sources=scope.excluded,
        by_app=by_app,
    )
    n_b = len(SCORE_BUCKETS)
    acc: dict[tuple[str, str | None], dict[str, float]] = {}
    hist: dict[tuple[str, str | None], list[int]] = {}
    for r in rows:
        key = (str(r["judge"]), r["app"])
        a = acc.setdefault(
            key, {"count": 0, "passed": 0, "failed": 0, "errors": 0, "abstained": 0, "skipped": 0, "sum": 0.0}
        )
        h = hist.setdefault(key, [0] * n_b)
        n = int(r["n"])
        a["count"] += n
        if r["status"] == "ok":
            a["passed" if r["passed"] else "failed"] += n
            a["sum"] += float(r["score_sum"] or 0.0)
            k = int(r["k"] or 0)  # bounds >= score; the bucket is the smallest of them
            h[min(max(n_b - k, 0), n_b - 1)] += n
        elif r["status"] == "error":
            a["errors"] += n
        elif r["status"] == "abstained":
            a["abstained"] += n
        else:
            a["skipped"] += n
    out = []
    for key in sorted(acc, key=lambda k: (k[0], k[1] or "")):
        a = acc[key]
        decided = int(a["passed"] + a["failed"])
        out.append(
            JudgeScores(
                judge=key[0],
                app=key[1],
                count=int(a["count"]),
                passed=int(a["passed"]),
                failed=int(a["failed"]),
                errors=int(a["errors"]),
                skipped=int(a["skipped"]),
                abstained=int(a["abstained"]),
                pass_rate=a["passed"] / decided if decided else None,
                mean_score=round(a["sum"] / decided, 6) if decided else None,
                buckets=[Bucket(le=b, count=c) for b, c in zip(SCORE_BUCKETS, hist[key], strict=True)],
            )
        )
    return out


def auto_interval(since: datetime, until: datetime, points: int = 48) -> timedelta:
    """The smallest of 1m, 5m, 15m, 30m, 1h, 3h, 6h, 12h, 1d, 7d giving at most ``points`` intervals."""
    span = (until - since).total_seconds()
    for s in _NICE_S:
        if span / s <= points:
            return timedelta(seconds=s)
    return timedelta(seconds=_NICE_S[-1])


async def timeseries(
    store: PostgresStore,
    *,
    since: datetime,
    until: datetime,
    interval: timedelta | None = None,
    judge: str | None = None,
    app: str | None = None,
    source: str | None = None,
    include_api: bool = False,
) -> list[JudgeSeries]:
    """Pass rate and mean score per judge per ``interval`` (default :func:`auto_interval`); intervals
    without judgements are absent.

    Raises:
        BadRequest: more than 2,000 intervals in the window.
    """
    step = interval or auto_interval(since, until)
    if step.total_seconds() <= 0 or (until - since) / step > 2000:
        raise BadRequest("interval too small for the window (at most 2,000 intervals)")
    scope = source_scope(source, include_api=include_api)
    rows = await store.score_timeseries(
        since=since,
        until=until,
        interval=step,
        judge=judge,
        app=app,
        source=scope.only,
        exclude_sources=scope.excluded,
    )
    series: dict[str, list[SeriesPoint]] = {}
    for r in rows:
        ok, errors = int(r["ok"]), int(r["errors"])
        series.setdefault(str(r["judge"]), []).append(
            SeriesPoint(
                start=r["bucket"],
                count=int(r["total"]),
                errors=errors,
                skipped=int(r["total"]) - ok - errors,
                pass_rate=int(r["passed"]) / ok if ok else None,
                mean_score=float(r["mean_score"]) if r["mean_score"] is not None else None,
            )
        )
    return [JudgeSeries(judge=j, points=p) for j, p in sorted(series.items())]


#: Seconds between two refreshes of the hourly score rollup by :class:`RollupRefresher`.
ROLLUP_REFRESH_S = 60.0


async def refresh_rollup(store: PostgresStore) -> datetime | None:
    """Bring the hourly rollup that long windows of :func:`score_stats` read up to date (whole hours that ended
    at least 5 minutes ago); returns how far it is complete (``None``: no judgements yet)."""
    return await store.refresh_score_rollup(SCORE_BUCKETS)


class RollupRefresher:
    """Refreshes the score rollup every :data:`ROLLUP_REFRESH_S` seconds while ``serve`` runs (an async context
    manager; a failed refresh is logged and retried at the next interval)."""

    def __init__(self, store: PostgresStore, interval_s: float = ROLLUP_REFRESH_S) -> None:
        self.store = store
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            try:
                await refresh_rollup(self.store)
            except Exception as e:
                _log.warning("score_rollup_refresh_failed", error=str(e))
            await asyncio.sleep(self.interval_s)

    async def __aenter__(self) -> RollupRefresher:
        self._task = asyncio.create_task(self._loop(), name="ragpulse-score-rollup")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
