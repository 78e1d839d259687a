"""Shadow judges (``judge.options.<name>.shadow``): stored apart, never in metrics, reports, outcomes or the outbox."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.engine.engine import shadow_hit
from ragpulse.errors import ConfigError
from ragpulse.export import MetricsExporter, render_metrics
from ragpulse.export.otel_setup import MetricsRuntime
from ragpulse.judges.registry import build_judges
from ragpulse.model import TestCase, TestSet
from ragpulse.runs import case_trace_id
from ragpulse.runs.replay import run_replay
from ragpulse.runs.reports import full_report
from ragpulse.store import PostgresStore
from testsupport import pg_count

from .helpers import samples

CASES = 12
MAIN_SERIES = ("ragpulse_judgements_total", "ragpulse_judge_score_count", "ragpulse_judge_score_sum")


def _ts() -> TestSet:
    answers = ["Paris is the capital of France.", "I like turtles.", "The capital is Paris, in France."]
    return TestSet(
        name="shadow-mini",
        cases=tuple(
            TestCase(
                id=f"c{i}",
                question="What is the capital of France?",
                answer=answers[i % 3],
                keywords=("Paris", "France"),
            )
            for i in range(CASES)
        ),
    )


def _main_series() -> dict[Any, float]:
    return {k: v for k, v in samples(render_metrics().decode()).items() if k[0] in MAIN_SERIES}


def _delta(after: dict[Any, float], before: dict[Any, float]) -> dict[Any, float]:
    return {k: round(v - before.get(k, 0.0), 9) for k, v in after.items() if v != before.get(k, 0.0)}


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    cases = [(c["case_id"], c["outcome"], c["passed"], c["scored"], c["reason"]) for c in report["cases"]]
    keep: dict[str, Any] = {
        k: report[k] for k in ("counts", "pass_rate", "averages", "judges") if k in report
    }
    return {**keep, "cases": cases}


async def test_a_shadow_changes_no_metric_report_or_outcome(
    pg_url: str, metrics_runtime: MetricsRuntime
) -> None:
    plain = Settings(store_database_url=pg_url)
    shadowed = Settings(
        store_database_url=pg_url, judge_options={"relevancy": {"shadow": {"threshold": 0.95, "share": 0.5}}}
    )
    store = await PostgresStore.connect(pg_url, plain.store)
    try:
        reports = {}
        deltas = {}
        for run_id, settings in (("plain", plain), ("shadowed", shadowed)):
            judges = build_judges(settings, ["relevancy", "keyword"])
            before = _main_series()
            report = await run_replay(
                _ts(),
                judges=judges,
                store=store,
                settings=settings,
                run_id=run_id,
                exporters=[MetricsExporter(settings.export)],
                replace_test_set=True,
            )
            deltas[run_id] = _delta(_main_series(), before)
            reports[run_id] = (await full_report(store, report)).to_json()
            assert len(reports[run_id]["cases"]) == CASES
        relevancy: Any = build_judges(shadowed, ["relevancy"])["relevancy"]  # .shadow: set by the registry
        shadow_version = relevancy.shadow.judge.version
        assert _comparable(reports["shadowed"]) == _comparable(reports["plain"])
        assert deltas["shadowed"] == deltas["plain"]
        assert deltas["plain"]  # the main series did move
        expected = [
            f"c{i}" for i in range(CASES) if shadow_hit(case_trace_id("shadowed", f"c{i}"), "relevancy", 0.5)
        ]
        assert 0 < len(expected) < CASES
        stored = await pg_count(pg_url, "SELECT count(*) FROM shadow_judgements")
        assert stored == len(expected)
        assert (
            await pg_count(
                pg_url, f"SELECT count(*) FROM shadow_judgements WHERE version = '{shadow_version}'"
            )
            == stored
        )
        # nothing of the shadow's version among the judgements (results stream outbox, reports, metrics)
        assert (
            await pg_count(pg_url, f"SELECT count(*) FROM judgements WHERE version = '{shadow_version}'") == 0
        )
        assert await pg_count(pg_url, "SELECT count(*) FROM judgements") == 2 * 2 * CASES
        main_version = relevancy.version
        pairs = await store.shadow_pairs("relevancy", main_version, shadow_version)
        assert sorted(tid for tid, _, _ in pairs) == sorted(case_trace_id("shadowed", c) for c in expected)
        assert all(s["version"] == shadow_version and m["version"] == main_version for _, m, s in pairs)
    finally:
        await store.close()


def test_shadow_options_are_checked() -> None:
    with pytest.raises(
        ConfigError, match=r"^judge\.options\.relevancy\.shadow: .*share must be a number in \[0, 1\]"
    ):
        build_judges(Settings(judge_options={"relevancy": {"shadow": {"threshold": 0.9}}}), ["relevancy"])
    with pytest.raises(
        ConfigError, match=r"^judge\.options\.relevancy\.shadow: same version as the main judge"
    ):
        build_judges(Settings(judge_options={"relevancy": {"shadow": {"share": 0.5}}}), ["relevancy"])
    with pytest.raises(ConfigError, match=r"^judge\.options\.relevancy\.shadow\.treshold: unknown option"):
        build_judges(
            Settings(judge_options={"relevancy": {"shadow": {"treshold": 0.9, "share": 0.5}}}), ["relevancy"]
        )
