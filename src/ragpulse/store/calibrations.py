"""Calibration profiles: queries on one asyncpg connection (``PostgresStore`` maps their errors)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from ragpulse.model import CalibrationProfile
from ragpulse.store.migrate import Conn
from ragpulse.store.rows import clean

__all__ = ["latest_profile", "list_profiles", "save_profile", "window_pass_counts"]

_COLUMNS = tuple(CalibrationProfile.model_fields)

_UPSERT = f"""
INSERT INTO calibration_profiles ({", ".join(_COLUMNS)})
VALUES ({", ".join(f"${i}" for i in range(1, len(_COLUMNS) + 1))})
ON CONFLICT (judge, judge_version, name) DO UPDATE SET
  {", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c not in ("judge", "judge_version", "name"))}
"""


async def save_profile(conn: Conn, profile: CalibrationProfile) -> None:
    """Insert ``profile`` or replace the one with the same judge, version and name."""
    values = [clean(v) if isinstance(v, str) else v for v in profile.model_dump().values()]
    await conn.execute(_UPSERT, *values)


async def list_profiles(conn: Conn, judge: str | None = None) -> list[CalibrationProfile]:
    """Every profile (of ``judge`` when given), newest first."""
    rows = await conn.fetch(
        f"SELECT {', '.join(_COLUMNS)} FROM calibration_profiles WHERE $1::text IS NULL OR judge = $1 "
        "ORDER BY created_at DESC, name",
        judge,
    )
    return [CalibrationProfile(**dict(r)) for r in rows]


async def latest_profile(conn: Conn, judge: str, judge_version: str) -> CalibrationProfile | None:
    """The newest profile of exactly this judge and version, or ``None``."""
    row = await conn.fetchrow(
        f"SELECT {', '.join(_COLUMNS)} FROM calibration_profiles WHERE judge = $1 AND judge_version = $2 "
        "ORDER BY created_at DESC LIMIT 1",
        judge,
        judge_version,
    )
    return CalibrationProfile(**dict(row)) if row else None


async def window_pass_counts(
    conn: Conn, judge_versions: Mapping[str, str], window: timedelta
) -> list[tuple[str, str | None, int, int]]:
    """``(judge, app, passed, scored)`` of live traffic's ``ok`` judgements made in the last ``window``.

    Only each judge's given version counts; live traffic means traces from Kafka or OTLP that belong to no run
    (replays, and traces sent with a run id, are test traffic).
    """
    if not judge_versions:
        return []
    rows = await conn.fetch(
        """SELECT j.judge, j.app, count(*) FILTER (WHERE j.passed) AS passed, count(*) AS scored
           FROM judgements j
           JOIN unnest($1::text[], $2::text[]) AS v(judge, version)
             ON j.judge = v.judge AND j.version = v.version
           JOIN traces t ON t.trace_id = j.trace_id
           WHERE j.status = 'ok' AND j.created_at >= now() - $3::interval
             AND t.source IN ('kafka', 'otlp') AND t.run_id IS NULL
           GROUP BY j.judge, j.app
           ORDER BY j.judge, j.app""",
        list(judge_versions),
        list(judge_versions.values()),
        window,
    )
    return [(r["judge"], r["app"], int(r["passed"]), int(r["scored"])) for r in rows]
