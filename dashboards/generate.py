"""Generate ``dashboards/ragpulse.json`` (the ragpulse Grafana dashboard) with ``grafana-foundation-sdk``.

Run ``python dashboards/generate.py`` after editing; ``tests/export/test_dashboard.py`` fails when the JSON
file is not what this script produces, and checks every expression against Prometheus.

Variables: ``datasource`` (Prometheus), ``app`` and ``judge`` (multi-value, ``All`` = ``.*``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import heatmap, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as hm
from grafana_foundation_sdk.models import prometheus as pm

OUT = Path(__file__).resolve().parent / "ragpulse.json"
DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'judge=~"$judge", app=~"$app"'
RI = "$__rate_interval"
#: Judges whose scores are continuous (claims-mode faithfulness, graded relevancy, keyword overlap); yes/no
#: judges only have 0 and 1, so their pass rate is the meaningful view.
CONTINUOUS = "faithfulness|relevancy|keyword|answer_correctness|context_precision|context_recall"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str
    fmt: pm.PromQueryFormat = pm.PromQueryFormat.TIME_SERIES


def _targets(queries: list[Query]) -> list[Any]:
    out = []
    for i, q in enumerate(queries):
        out.append(
            prometheus.Dataquery()
            .expr(q.expr)
            .legend_format(q.legend)
            .format(q.fmt)
            .ref_id(chr(ord("A") + i))
            .datasource(DS)
        )
    return out


#: The portal's Live traffic for the dashboard's time range (``portal_url`` is a dashboard variable).
PORTAL_TRAFFIC = "${portal_url}/traffic?since=${__from:date:iso}&until=${__to:date:iso}"


def _ts(title: str, desc: str, unit: str, queries: list[Query], w: int = 12, **kw: Any) -> Any:
    p = timeseries.Panel().title(title).description(desc).unit(unit).datasource(DS).height(8).span(w)
    p = p.targets(_targets(queries))
    if "data_links" in kw:
        p = p.data_links(kw["data_links"])
    if "min" in kw:
        p = p.min(kw["min"])
    if "max" in kw:
        p = p.max(kw["max"])
    return p


def build() -> dict[str, Any]:
    """The dashboard as a JSON-able dict."""
    score_heatmap = (
        heatmap.Panel()
        .title("Score distribution: $judge")
        .description(
            "Share of ok judgements per score bucket (0–1) over time, per judge. A shift down = worse."
        )
        .datasource(DS)
        .height(9)
        .span(12)
        .repeat("judge")
        .repeat_direction("h")
        .calculate(False)
        .rows_frame(heatmap.RowsHeatmapOptions().layout(common.HeatmapCellLayout.LE).value("judgements"))
        .color(
            heatmap.HeatmapColorOptions()
            .mode(hm.HeatmapColorMode.SCHEME)
            .scheme("Spectral")
            .scale(hm.HeatmapColorScale.EXPONENTIAL)
            .exponent(0.5)
            .steps(64)
            .reverse(False)
        )
        .y_axis(heatmap.YAxisConfig().unit("short").decimals(2))
        .show_legend()
        .show_tooltip()
        .targets(
            _targets(
                [
                    Query(
                        f'sum by (le) (increase(ragpulse_judge_score_bucket{{judge=~"$judge", app=~"$app"}}[{RI}]))',
                        "{{le}}",
                        pm.PromQueryFormat.HEATMAP,
                    )
                ]
            )
        )
    )
    b = (
        dash.Dashboard("ragpulse: RAG answer quality")
        .uid("ragpulse-quality")
        .description(
            "Online RAG evaluation by ragpulse: score distributions, pass rates, judge health, ingestion."
        )
        .tags(["ragpulse", "rag", "llm-evaluation"])
        .time("now-6h", "now")
        .refresh("1m")
        .timezone("browser")
        .with_variable(dash.DatasourceVariable("datasource").label("Data source").type("prometheus"))
        .with_variable(
            dash.TextBoxVariable("portal_url")
            .label("Portal URL")
            .description("The ragpulse portal as your browser reaches it (RAGPULSE_API_ADDRESS)")
            .default_value("http://127.0.0.1:9470")
        )
        .link(
            dash.DashboardLink("Live traffic in the ragpulse portal")
            .type(dm.DashboardLinkType.LINK)
            .url(PORTAL_TRAFFIC)
            .tooltip("Traces, score distributions and pass rates for this time range")
            .target_blank(True)
        )
        .with_variable(
            dash.QueryVariable("app")
            .label("App")
            .datasource(DS)
            .query("label_values(ragpulse_judgements_total, app)")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .sort(dm.VariableSort.ALPHABETICAL_ASC)
        )
        .with_variable(
            dash.QueryVariable("judge")
            .label("Judge")
            .datasource(DS)
            .query('label_values(ragpulse_judgements_total{app=~"$app"}, judge)')
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .sort(dm.VariableSort.ALPHABETICAL_ASC)
        )
        .with_row(dash.Row("Answer quality"))
        .with_panel(
            _ts(
                "Pass rate by judge and app",
                "Passed / scored judgements (errors and skips excluded). The meaningful view for yes/no judges.",
                "percentunit",
                [
                    Query(
                        f'sum by (judge, app) (rate(ragpulse_judgements_total{{{SEL}, outcome="pass"}}[{RI}]))'
                        f' / sum by (judge, app) (rate(ragpulse_judgements_total{{{SEL}, outcome=~"pass|fail"}}[{RI}]))',
                        "{{judge}} · {{app}}",
                    )
                ],
                min=0,
                max=1,
                data_links=[
                    dash.DashboardLink("Failing traces of ${__field.labels.app} in the portal")
                    .url(
                        PORTAL_TRAFFIC
                        + "&app=${__field.labels.app}&judge=${__field.labels.judge}&outcome=fail"
                    )
                    .target_blank(True)
                ],
            )
        )
        .with_panel(
            _ts(
                "Corrected pass rate with 95 % interval",
                "Live pass rate corrected for the judge's measured error (Rogan-Gladen, needs a calibration "
                "profile: ragpulse calibrate --save), with the bounds of its 95 % interval. Judges without a "
                "profile for their current version show ragpulse_judge_calibration_stale = 1 instead.",
                "percentunit",
                [
                    Query(f"ragpulse_judge_pass_rate_corrected{{{SEL}}}", "{{judge}} · {{app}}"),
                    Query(f"ragpulse_judge_pass_rate_corrected_lower{{{SEL}}}", "lower {{judge}} · {{app}}"),
                    Query(f"ragpulse_judge_pass_rate_corrected_upper{{{SEL}}}", "upper {{judge}} · {{app}}"),
                    Query('ragpulse_judge_calibration_stale{judge=~"$judge"} == 1', "uncalibrated {{judge}}"),
                ],
                min=0,
                max=1,
            )
        )
        .with_panel(
            _ts(
                "Score p10 / p50 (continuous judges)",
                "Percentiles of ok scores, interpolated inside the 0.05/0.1/…/0.95/1.0 buckets.",
                "percentunit",
                [
                    Query(
                        f"histogram_quantile(0.1, sum by (le, judge) (rate(ragpulse_judge_score_bucket"
                        f'{{judge=~"($judge)", judge=~"{CONTINUOUS}", app=~"$app"}}[{RI}])))',
                        "p10 {{judge}}",
                    ),
                    Query(
                        f"histogram_quantile(0.5, sum by (le, judge) (rate(ragpulse_judge_score_bucket"
                        f'{{judge=~"($judge)", judge=~"{CONTINUOUS}", app=~"$app"}}[{RI}])))',
                        "p50 {{judge}}",
                    ),
                ],
                min=0,
                max=1,
            )
        )
        .with_panel(score_heatmap)
        .with_row(dash.Row("Judge health"))
        .with_panel(
            _ts(
                "Error and skip share",
                "Share of judgements with outcome error / skipped / abstained (the answer declined), per judge.",
                "percentunit",
                [
                    Query(
                        f'sum by (judge, outcome) (rate(ragpulse_judgements_total{{{SEL}, outcome=~"error|skipped|abstained"}}[{RI}]))'
                        f" / ignoring (outcome) group_left sum by (judge) (rate(ragpulse_judgements_total{{{SEL}}}[{RI}]))",
                        "{{judge}} {{outcome}}",
                    )
                ],
                w=8,
                min=0,
            )
        )
        .with_panel(
            _ts(
                "Judge errors by reason",
                "Errors per second by machine reason code (judge_unavailable, unparseable, …).",
                "reqps",
                [
                    Query(
                        f'sum by (judge, reason) (rate(ragpulse_judge_errors_total{{judge=~"$judge"}}[{RI}]))',
                        "{{judge}} {{reason}}",
                    )
                ],
                w=8,
            )
        )
        .with_panel(
            _ts(
                "Judge latency p50 / p95",
                "Wall time of one judgement (ok and error), seconds.",
                "s",
                [
                    Query(
                        f"histogram_quantile(0.5, sum by (le, judge) "
                        f'(rate(ragpulse_judge_latency_seconds_bucket{{judge=~"$judge"}}[{RI}])))',
                        "p50 {{judge}}",
                    ),
                    Query(
                        f"histogram_quantile(0.95, sum by (le, judge) "
                        f'(rate(ragpulse_judge_latency_seconds_bucket{{judge=~"$judge"}}[{RI}])))',
                        "p95 {{judge}}",
                    ),
                ],
                w=8,
            )
        )
        .with_panel(
            _ts(
                "Judge tokens per minute",
                "Judge-model tokens per minute by kind (prompt / completion).",
                "short",
                [
                    Query(
                        f'sum by (judge, kind) (rate(ragpulse_judge_tokens_total{{judge=~"$judge"}}[{RI}])) * 60',
                        "{{judge}} {{kind}}",
                    )
                ],
                w=24,
            )
        )
        .with_row(dash.Row("Ingestion and pipeline"))
        .with_panel(
            _ts(
                "Traces received / not sampled",
                "Traces per second by source; traces skipped by sampling.",
                "reqps",
                [
                    Query(
                        f"sum by (source) (rate(ragpulse_traces_received_total[{RI}]))", "received {{source}}"
                    ),
                    Query(f"sum(rate(ragpulse_traces_not_sampled_total[{RI}]))", "not sampled"),
                ],
                w=8,
            )
        )
        .with_panel(
            _ts(
                "Rejected inputs",
                "Inputs dead-lettered before they became a trace, by source and reason.",
                "reqps",
                [
                    Query(
                        f"sum by (source, reason) (rate(ragpulse_traces_rejected_total[{RI}]))",
                        "{{source}} {{reason}}",
                    )
                ],
                w=8,
            )
        )
        .with_panel(
            _ts(
                "Engine queue depth",
                "Traces waiting for judges (a full queue pauses the sources).",
                "short",
                [Query("sum(ragpulse_engine_queue_depth)", "queued")],
                w=8,
            )
        )
        .with_panel(
            _ts(
                "Kafka consumer lag",
                "Messages behind the high-water mark, per topic.",
                "short",
                [Query("sum by (topic) (ragpulse_kafka_consumer_lag)", "{{topic}}")],
                w=12,
            )
        )
        .with_panel(
            _ts(
                "Evaluation lag p50 / p95",
                "Time from the end of the RAG request to its judgements being stored, seconds.",
                "s",
                [
                    Query(
                        f"histogram_quantile(0.5, sum by (le) (rate(ragpulse_evaluation_lag_seconds_bucket[{RI}])))",
                        "p50",
                    ),
                    Query(
                        f"histogram_quantile(0.95, sum by (le) (rate(ragpulse_evaluation_lag_seconds_bucket[{RI}])))",
                        "p95",
                    ),
                ],
                w=12,
            )
        )
    )
    encoded: dict[str, Any] = json.loads(json.dumps(b.build(), cls=JSONEncoder))
    for i, panel in enumerate(encoded["panels"], start=1):
        panel["id"] = i
    return encoded


def render() -> str:
    """The dashboard JSON text exactly as committed (sorted keys, 2-space indent, trailing newline)."""
    return json.dumps(build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {OUT}\n")
