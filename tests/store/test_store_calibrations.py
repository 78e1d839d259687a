"""Calibration profiles in the store: upsert by (judge, version, name), newest profile of a version wins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ragpulse.model import CalibrationProfile
from ragpulse.store.postgres import PostgresStore


def _profile(name: str, version: str, tp: int, minutes_ago: int) -> CalibrationProfile:
    return CalibrationProfile(
        name=name,
        judge="faithfulness",
        judge_version=version,
        dataset_sha256="0" * 64,
        n=tp + 30,
        tp=tp,
        fp=10,
        tn=10,
        fn=10,
        sensitivity=tp / (tp + 10),
        sensitivity_lower=None,
        sensitivity_upper=None,
        specificity=0.5,
        specificity_lower=None,
        specificity_upper=None,
        created_at=datetime.now(UTC) - timedelta(minutes=minutes_ago),
    )


async def test_newest_profile_of_the_exact_version_wins(store: PostgresStore) -> None:
    await store.save_calibration_profile(_profile("ares", "v1", tp=40, minutes_ago=10))
    await store.save_calibration_profile(_profile("halueval", "v1", tp=90, minutes_ago=5))
    await store.save_calibration_profile(_profile("ares", "v2", tp=70, minutes_ago=1))
    latest = await store.latest_calibration_profile("faithfulness", "v1")
    assert latest is not None
    assert (latest.name, latest.tp) == ("halueval", 90)
    assert await store.latest_calibration_profile("faithfulness", "v3") is None
    assert await store.latest_calibration_profile("relevancy", "v1") is None
    # re-saving (judge, version, name) replaces the row: still three profiles, the new counts kept
    await store.save_calibration_profile(_profile("ares", "v1", tp=41, minutes_ago=0))
    listed = await store.list_calibration_profiles("faithfulness")
    assert [(p.name, p.judge_version, p.tp) for p in listed] == [
        ("ares", "v1", 41),
        ("ares", "v2", 70),
        ("halueval", "v1", 90),
    ]
