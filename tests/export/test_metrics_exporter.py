"""/metrics after known batches of judgements: exact histogram counts and sums, cardinality, redelivery."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from ragpulse import telemetry
from ragpulse.export import MetricsExporter, metrics_asgi_app, render_metrics
from ragpulse.export.otel_setup import MetricsRuntime
from ragpulse.model import (
    Backend,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)

from .helpers import samples, series, serve_asgi, value

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def ok(judge: str, score: float, *, threshold: float = 0.5, latency: float = 0.0, pt: int = 0, ct: int = 0,
       backend: Backend = Backend.LLM) -> Judgement:  # fmt: skip
    return Judgement(
        judge=judge, version="v1", backend=backend, score=score, passed=score >= threshold, threshold=threshold,
        status=JudgementStatus.OK, latency_s=latency, prompt_tokens=pt, completion_tokens=ct,
    )  # fmt: skip


def bad(judge: str, status: JudgementStatus, reason: str, latency: float = 0.0) -> Judgement:
    return Judgement(
        judge=judge, version="v1", backend=Backend.LLM, status=status, reason=reason, latency_s=latency
    )


def result(app: str | None, *judgements: Judgement, end_ago_s: float | None = None,
           source: Source = Source.KAFKA) -> TraceResult:  # fmt: skip
    trace = Trace(
        trace_id=uuid.uuid4().hex, app=app, source=source,
        end_time=None if end_ago_s is None else NOW - timedelta(seconds=end_ago_s),
    )  # fmt: skip
    return TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED, judgements=judgements)


def test_known_batch_exact_histograms_over_http(metrics_runtime: MetricsRuntime) -> None:
    judge = f"faith_{uuid.uuid4().hex[:8]}"
    app = f"app-{uuid.uuid4().hex[:8]}"
    exp = MetricsExporter(clock=lambda: NOW)
    scores = [0.0, 0.05, 0.07, 0.1, 0.15, 0.5, 0.55, 0.9, 0.93, 0.95, 0.99, 1.0]
    latencies = [0.004, 0.3, 1.5, 7.0]
    batch = [ok(judge, s, latency=latencies[i % 4], pt=100 + i, ct=10) for i, s in enumerate(scores)]
    errors = [bad(judge, JudgementStatus.ERROR, "judge_unavailable: HTTP 429 after 3 attempts", latency=12.0),
              bad(judge, JudgementStatus.ERROR, "unparseable: no verdict", latency=0.8),
              bad(judge, JudgementStatus.ERROR, "Model said something odd", latency=0.2)]  # fmt: skip
    skips = [
        bad(judge, JudgementStatus.SKIPPED, "no_reference"),
        bad(judge, JudgementStatus.SKIPPED, "abstained"),
    ]
    # one trace per judgement (the judge runs once per trace)
    for i, j in enumerate(batch + errors + skips):
        exp.on_stored(result(app, j, end_ago_s=2.0 * (i + 1)), [j])
    assert exp.failures == 0

    with serve_asgi(metrics_asgi_app()) as base:
        resp = httpx.get(f"{base}/", timeout=5)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text

    # Score histogram: cumulative le buckets, exactly.
    lbl = {"judge": judge, "app": app, "backend": "llm"}
    expected_cum = {
        "0.05": 2, "0.1": 4, "0.2": 5, "0.3": 5, "0.4": 5, "0.5": 6, "0.6": 7, "0.7": 7, "0.8": 7,
        "0.9": 8, "0.95": 10, "1.0": 12, "+Inf": 12,
    }  # fmt: skip
    for le, n in expected_cum.items():
        assert value(text, "ragpulse_judge_score_bucket", **lbl, le=le) == n, le
    assert value(text, "ragpulse_judge_score_count", **lbl) == 12
    assert value(text, "ragpulse_judge_score_sum", **lbl) == sum(scores)

    # Outcomes: threshold 0.5 → 7 pass (0.5 … 1.0), 5 fail; 3 errors; 1 skipped, 1 abstained (issue 30 item 2).
    for outcome, n in {"pass": 7, "fail": 5, "error": 3, "skipped": 1, "abstained": 1}.items():
        assert value(text, "ragpulse_judgements_total", judge=judge, app=app, outcome=outcome) == n

    # Error reasons: machine codes kept, free text folded into "other".
    assert value(text, "ragpulse_judge_errors_total", judge=judge, reason="judge_unavailable") == 1
    assert value(text, "ragpulse_judge_errors_total", judge=judge, reason="unparseable") == 1
    assert value(text, "ragpulse_judge_errors_total", judge=judge, reason="other") == 1

    # Latency: ok + error judgements (15), skips excluded.
    lat = [latencies[i % 4] for i in range(12)] + [12.0, 0.8, 0.2]
    assert value(text, "ragpulse_judge_latency_seconds_count", judge=judge) == 15
    assert value(text, "ragpulse_judge_latency_seconds_sum", judge=judge) == sum(lat)
    assert value(text, "ragpulse_judge_latency_seconds_bucket", judge=judge, le="0.005") == 3
    assert value(text, "ragpulse_judge_latency_seconds_bucket", judge=judge, le="0.25") == 4
    assert value(text, "ragpulse_judge_latency_seconds_bucket", judge=judge, le="1.0") == 8
    assert value(text, "ragpulse_judge_latency_seconds_bucket", judge=judge, le="2.5") == 11
    assert value(text, "ragpulse_judge_latency_seconds_bucket", judge=judge, le="10.0") == 14
    assert value(text, "ragpulse_judge_latency_seconds_bucket", judge=judge, le="20.0") == 15

    # Tokens.
    assert value(text, "ragpulse_judge_tokens_total", judge=judge, kind="prompt") == sum(
        100 + i for i in range(12)
    )
    assert value(text, "ragpulse_judge_tokens_total", judge=judge, kind="completion") == 120

    # Evaluation lag (shared by all judges of a source) is checked exactly in test_evaluation_lag_exact.
    assert (value(text, "ragpulse_evaluation_lag_seconds_count", source="kafka") or 0) >= 17


def test_evaluation_lag_exact(metrics_runtime: MetricsRuntime) -> None:
    # The replay source is used only here, so its lag histogram is exact.
    judge = f"kw_{uuid.uuid4().hex[:8]}"
    exp = MetricsExporter(clock=lambda: NOW)
    before = samples(render_metrics().decode())
    lags = [0.05, 0.3, 1.5, 45.0, 4000.0, -3.0]  # -3: trace end after "now" (clock skew) → 0
    for lag in lags:
        j = ok(judge, 1.0, backend=Backend.HEURISTIC)
        exp.on_stored(result("lag-app", j, end_ago_s=lag, source=Source.REPLAY), [j])
    exp.on_stored(result("lag-app", ok(judge, 1.0), end_ago_s=None, source=Source.REPLAY), [ok(judge, 1.0)])
    # A time the source replaced (implausible, e.g. epoch seconds read as ms) is kept out of the histogram.
    r = result("lag-app", ok(judge, 1.0), end_ago_s=1.79e9, source=Source.REPLAY)
    replaced = r.model_copy(update={"trace": r.trace.model_copy(update={"time_replaced": True})})
    exp.on_stored(replaced, [ok(judge, 1.0)])
    after = samples(render_metrics().decode())

    def delta(name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("ragpulse_evaluation_lag_seconds_count", source="replay") == 6
    assert delta("ragpulse_evaluation_lag_seconds_sum", source="replay") == sum(
        [0.05, 0.3, 1.5, 45.0, 4000.0]
    )
    assert delta("ragpulse_evaluation_lag_seconds_bucket", source="replay", le="0.1") == 2
    assert delta("ragpulse_evaluation_lag_seconds_bucket", source="replay", le="2.0") == 4
    assert delta("ragpulse_evaluation_lag_seconds_bucket", source="replay", le="60.0") == 5
    assert delta("ragpulse_evaluation_lag_seconds_bucket", source="replay", le="3600.0") == 5
    assert delta("ragpulse_evaluation_lag_seconds_bucket", source="replay", le="+Inf") == 6
    # heuristic backend label
    text = render_metrics().decode()
    assert value(text, "ragpulse_judge_score_count", judge=judge, app="lag-app", backend="heuristic") == 6
    assert value(text, "ragpulse_judge_score_count", judge=judge, app="lag-app", backend="llm") == 2


def test_redelivery_with_nothing_changed_records_nothing(metrics_runtime: MetricsRuntime) -> None:
    judge = f"rel_{uuid.uuid4().hex[:8]}"
    exp = MetricsExporter(clock=lambda: NOW)
    j = ok(judge, 0.8, latency=0.5, pt=50, ct=5)
    res = result("redeliver-app", j, end_ago_s=1.0)
    exp.on_stored(res, [j])  # first delivery: stored
    before = samples(render_metrics().decode())
    for _ in range(5):
        exp.on_stored(res, [])  # Kafka redelivery: the store changed nothing
    after = samples(render_metrics().decode())
    assert after == before
    text = render_metrics().decode()
    assert value(text, "ragpulse_judgements_total", judge=judge, app="redeliver-app", outcome="pass") == 1
    assert value(text, "ragpulse_judge_score_count", judge=judge, app="redeliver-app", backend="llm") == 1


def test_api_drafts_stay_out_of_quality_metrics(metrics_runtime: MetricsRuntime) -> None:
    """Traces judged by the portal's POST /evaluate (source=api) record judge latency and tokens only."""
    judge = f"draft_{uuid.uuid4().hex[:8]}"
    exp = MetricsExporter(clock=lambda: NOW)
    fail = ok(judge, 0.1, latency=0.5, pt=40, ct=4)
    err = bad(judge, JudgementStatus.ERROR, "judge_unavailable: down", latency=0.2)
    exp.on_stored(result("draft-app", fail, source=Source.API), [fail])
    exp.on_stored(result("draft-app", err, source=Source.API), [err])
    text = render_metrics().decode()
    assert series(text, "ragpulse_judgements_total", judge=judge) == []
    assert series(text, "ragpulse_judge_score_count", judge=judge) == []
    assert series(text, "ragpulse_judge_errors_total", judge=judge) == []
    assert value(text, "ragpulse_judge_latency_seconds_count", judge=judge) == 2
    assert value(text, "ragpulse_judge_tokens_total", judge=judge, kind="prompt") == 40


def test_the_sidecar_keeps_test_traffic_out_of_quality_metrics(metrics_runtime: MetricsRuntime) -> None:
    """``live_quality_only`` (serve): a ``replay --via otlp`` trace (source otlp, a run id) and a portal run's
    case (source replay) count like drafts; a live OTLP trace counts. A replay process (default) counts its run."""
    judge = f"via_{uuid.uuid4().hex[:8]}"
    sidecar = MetricsExporter(clock=lambda: NOW, live_quality_only=True)
    via = result("via-app", ok(judge, 0.9, latency=0.3), source=Source.OTLP)
    via = via.model_copy(update={"trace": via.trace.model_copy(update={"run_id": "via-1"})})
    case = result("via-app", ok(judge, 0.2, latency=0.3), source=Source.REPLAY)
    live = result("via-app", ok(judge, 0.8, latency=0.3), source=Source.OTLP)
    for r in (via, case, live):
        sidecar.on_stored(r, r.judgements)
    text = render_metrics().decode()
    assert (
        value(text, "ragpulse_judgements_total", judge=judge, app="via-app", outcome="pass") == 1
    )  # live only
    assert series(text, "ragpulse_judgements_total", judge=judge, outcome="fail") == []
    assert value(text, "ragpulse_judge_score_count", judge=judge, app="via-app", backend="llm") == 1
    assert value(text, "ragpulse_judge_latency_seconds_count", judge=judge) == 3
    MetricsExporter(clock=lambda: NOW).on_stored(case, case.judgements)  # ragpulse replay: its own run counts
    text = render_metrics().decode()
    assert value(text, "ragpulse_judgements_total", judge=judge, app="via-app", outcome="fail") == 1


@pytest.mark.integration  # slow check (10,000 apps through the exporter, ~1.3 s CPU): the integration lane, docs/dev/testing.md
def test_ten_thousand_apps_stay_under_the_label_limit(metrics_runtime: MetricsRuntime) -> None:
    telemetry.configure_app_label_limit(50)
    judge = f"card_{uuid.uuid4().hex[:8]}"
    exp = MetricsExporter(clock=lambda: NOW)
    folded_before = value(render_metrics().decode(), "ragpulse_app_labels_folded_total") or 0.0
    j = ok(judge, 0.7)
    for i in range(10_000):
        exp.on_stored(result(f"tenant-{i}", j), [j])
    text = render_metrics().decode()
    apps = {s["app"] for s in series(text, "ragpulse_judgements_total", judge=judge)}
    assert len(apps) == 51  # 50 kept + "other"
    assert "other" in apps
    assert "tenant-0" in apps
    assert "tenant-49" in apps
    assert "tenant-50" not in apps
    assert value(text, "ragpulse_judgements_total", judge=judge, app="other", outcome="pass") == 9950
    assert len(series(text, "ragpulse_judge_score_count", judge=judge)) == 51
    assert value(text, "ragpulse_app_labels_folded_total") == folded_before + 9950
    # A missing app is "unknown", not folded.
    exp.on_stored(result(None, j), [j])
    assert (
        value(
            render_metrics().decode(), "ragpulse_judgements_total", judge=judge, app="unknown", outcome="pass"
        )
        == 1
    )


def test_exporter_never_raises(metrics_runtime: MetricsRuntime) -> None:
    exp = MetricsExporter(clock=lambda: 1 / 0)  # type: ignore[arg-type,return-value]
    j = ok("x", 0.5)
    exp.on_stored(result("a", j, end_ago_s=1.0), [j])
    assert exp.failures == 1


def test_exposed_names_types_and_labels_match_issue_5(metrics_runtime: MetricsRuntime) -> None:
    j = ok("names_judge", 0.5, latency=0.1, pt=3, ct=1)
    MetricsExporter(clock=lambda: NOW).on_stored(result("names-app", j, end_ago_s=1.0), [j])
    e = bad("names_judge", JudgementStatus.ERROR, "judge_unavailable: down")
    MetricsExporter().on_stored(result("names-app", e), [e])
    telemetry.TRACES_RECEIVED.add(0, {"source": "otlp"})
    telemetry.TRACES_REJECTED.add(0, {"source": "otlp", "reason": "schema"})
    telemetry.TRACES_NOT_SAMPLED.add(0)
    text = render_metrics().decode()
    types = dict(
        line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE ")
    )  # {family: type}
    expected = {
        "ragpulse_judge_score": "histogram",
        "ragpulse_judgements_total": "counter",
        "ragpulse_judge_errors_total": "counter",
        "ragpulse_judge_latency_seconds": "histogram",
        "ragpulse_judge_tokens_total": "counter",
        "ragpulse_traces_received_total": "counter",
        "ragpulse_traces_rejected_total": "counter",
        "ragpulse_traces_not_sampled_total": "counter",
        "ragpulse_evaluation_lag_seconds": "histogram",
        "target_info": "gauge",
    }
    assert {k: types.get(k) for k in expected} == expected
    labels = {
        "ragpulse_judge_score_bucket": {"judge", "app", "backend", "le"},
        "ragpulse_judgements_total": {"judge", "app", "outcome"},
        "ragpulse_judge_errors_total": {"judge", "reason"},
        "ragpulse_judge_latency_seconds_bucket": {"judge", "le"},
        "ragpulse_judge_tokens_total": {"judge", "kind"},
        "ragpulse_traces_received_total": {"source"},
        "ragpulse_traces_rejected_total": {"source", "reason"},
        "ragpulse_evaluation_lag_seconds_bucket": {"source", "le"},
    }
    for name, keys in labels.items():
        found = series(text, name)
        assert found, name
        assert all(set(s) == keys for s in found), name
    assert "otel_scope_name" not in text
    les = [s["le"] for s in series(text, "ragpulse_judge_score_bucket", judge="names_judge")]
    assert les == [
        "0.05",
        "0.1",
        "0.2",
        "0.3",
        "0.4",
        "0.5",
        "0.6",
        "0.7",
        "0.8",
        "0.9",
        "0.95",
        "1.0",
        "+Inf",
    ]


def test_cascade_escalations_counted_once_per_stored_judgement(metrics_runtime: MetricsRuntime) -> None:
    """``ragpulse_cascade_escalations_total{judge,stage}``: stored judgements the first stage did not decide."""
    judge = f"casc_{uuid.uuid4().hex[:8]}"
    exp = MetricsExporter(clock=lambda: NOW)

    def staged(stage: str) -> Judgement:
        return ok(judge, 0.9).model_copy(update={"flags": JudgementFlags(stage=stage)})

    stored = [staged("first"), staged("first"), staged("main"), staged("main"), staged("first_fallback")]
    for j in stored:
        exp.on_stored(result("casc-app", j), [j])
    exp.on_stored(result("casc-app", stored[2]), [])  # a redelivery that changed nothing
    text = render_metrics().decode()
    assert value(text, "ragpulse_cascade_escalations_total", judge=judge, stage="main") == 2
    assert value(text, "ragpulse_cascade_escalations_total", judge=judge, stage="first_fallback") == 1
    assert series(text, "ragpulse_cascade_escalations_total", judge=judge, stage="first") == []


def test_a_reused_shadow_judgement_counts_as_a_judgement_but_not_as_a_call(
    metrics_runtime: MetricsRuntime,
) -> None:
    """A copy of a stored shadow judgement (a promoted shadow, ``flags.reused_from``) is a main judgement —
    counted and scored — but no judge ran now: no latency, no tokens, no escalation."""
    judge = f"reuse_{uuid.uuid4().hex[:8]}"
    exp = MetricsExporter(clock=lambda: NOW)
    flags = JudgementFlags(stage="main", reused_from="shadow", shadow_cost={"prompt_tokens": 40})
    copy = ok(judge, 0.2).model_copy(update={"flags": flags})
    exp.on_stored(result("reuse-app", copy), [copy])
    text = render_metrics().decode()
    assert value(text, "ragpulse_judgements_total", judge=judge, app="reuse-app", outcome="fail") == 1
    assert value(text, "ragpulse_judge_score_count", judge=judge, app="reuse-app", backend="llm") == 1
    assert series(text, "ragpulse_judge_latency_seconds_count", judge=judge) == []
    assert series(text, "ragpulse_judge_tokens_total", judge=judge) == []
    assert series(text, "ragpulse_cascade_escalations_total", judge=judge) == []
