"""Corrected pass rates from the store to /metrics: window counts of live traffic, the newest calibration
profile of the judge's current version, Rogan–Gladen gauges, and the stale flag for uncalibrated judges."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ragpulse.calibration.live import corrected_pass_rates, publish
from ragpulse.export.otel_setup import MetricsRuntime, render_metrics
from ragpulse.model import (
    Backend,
    Judgement,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.store.postgres import PostgresStore
from testsupport import calibration_profile

from .helpers import series, value


def trace(trace_id: str, **kw: object) -> Trace:
    return Trace.model_validate({"trace_id": trace_id, "question": "q?", "answer": "a.", **kw})


def result(t: Trace, *judgements: Judgement) -> TraceResult:
    return TraceResult(trace=t, outcome=TraceOutcome.EVALUATED, judgements=judgements)


def _judgement(passed: bool, version: str = "v1") -> Judgement:
    return Judgement(
        judge="faithfulness",
        version=version,
        backend=Backend.HEURISTIC,
        status=JudgementStatus.OK,
        score=0.9 if passed else 0.1,
        passed=passed,
        threshold=0.5,
    )


async def test_corrected_gauges_from_the_store(pg_url: str, metrics_runtime: MetricsRuntime) -> None:
    store = await PostgresStore.connect(pg_url)
    try:
        results = []
        # live traffic of app "helpdesk": 30 of 40 faithfulness v1 judgements pass
        for i in range(40):
            t = trace(f"{i:032x}", app="helpdesk", source=Source.KAFKA)
            results.append(result(t, _judgement(passed=i < 30)))
        # not counted: replay traffic, a run's traces sent through Kafka, and an older judge version
        for i in range(40, 60):
            t = trace(f"{i:032x}", app="helpdesk", source=Source.REPLAY, run_id="r1")
            results.append(result(t, _judgement(passed=False)))
        for i in range(60, 70):
            t = trace(f"{i:032x}", app="helpdesk", source=Source.KAFKA, run_id="r2")
            results.append(result(t, _judgement(passed=False)))
        results.append(
            result(
                trace("f" * 32, app="helpdesk", source=Source.KAFKA), _judgement(passed=False, version="v0")
            )
        )
        await store.write_results(results)
        await store.save_calibration_profile(calibration_profile("v1"))

        versions = {"faithfulness": "v1", "relevancy": "r1"}
        figures, stale = await corrected_pass_rates(store, versions, timedelta(hours=1))
        (fig,) = figures
        assert (fig.judge, fig.app, fig.passed, fig.scored, fig.profile) == (
            "faithfulness",
            "helpdesk",
            30,
            40,
            "ares",
        )
        assert fig.estimate is not None
        assert fig.estimate.value == pytest.approx((0.75 + 0.9 - 1) / 0.8)  # 0.8125
        assert stale == {"faithfulness": False, "relevancy": True}

        publish(figures, stale)
        text = render_metrics().decode()
        labels = {"judge": "faithfulness", "app": "helpdesk"}
        assert value(text, "ragpulse_judge_pass_rate_corrected", **labels) == pytest.approx(0.8125)
        lower = value(text, "ragpulse_judge_pass_rate_corrected_lower", **labels)
        upper = value(text, "ragpulse_judge_pass_rate_corrected_upper", **labels)
        assert lower is not None
        assert upper is not None
        assert lower < 0.8125 < upper
        assert value(text, "ragpulse_judge_calibration_stale", judge="relevancy") == 1
        assert value(text, "ragpulse_judge_calibration_stale", judge="faithfulness") == 0

        # a window with nothing in it: no corrected series at all (not a stale last value)
        figures, stale = await corrected_pass_rates(store, {"faithfulness": "v9"}, timedelta(hours=1))
        publish(figures, stale)
        text = render_metrics().decode()
        assert series(text, "ragpulse_judge_pass_rate_corrected") == []
        assert value(text, "ragpulse_judge_calibration_stale", judge="faithfulness") == 1
    finally:
        publish([], {})
        await store.close()
