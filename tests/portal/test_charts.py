"""The score histogram's colours: red where every score of a bar fails, blue where every score passes, amber for
the bar the threshold falls in (``(lower, upper]`` holds failing scores and, at the threshold, passing ones)."""

from __future__ import annotations

import re

from ragpulse.export.otel_setup import SCORE_BUCKETS
from ragpulse.portal.stats import Bucket, JudgeScores
from ragpulse.portal.ui.charts import histogram_svg
from ragpulse.portal.ui.i18n import translator

RED, BLUE, AMBER = "#b3261e", "#2457c5", "#b7791f"


def _fills(threshold: float | None, lang: str = "en") -> dict[float, tuple[str, str]]:
    s = JudgeScores(
        judge="relevancy", count=11, passed=11, failed=0, errors=0, skipped=0, pass_rate=1.0, mean_score=0.5,
        buckets=[Bucket(le=le, count=11 if le == 0.5 else 0) for le in SCORE_BUCKETS],
    )  # fmt: skip
    svg = str(histogram_svg(s, threshold, translator(lang)))
    rects = re.findall(r'fill="(#[0-9a-f]{6})"><title>[0-9.]+–([0-9.]+): \d+([^<]*)</title>', svg)
    return {float(le): (fill, note) for fill, le, note in rects}


def test_the_thresholds_bucket_is_neither_red_nor_blue() -> None:
    """Eleven scores of exactly 0.5 at threshold 0.5 all pass: their bar (0.4, 0.5] was drawn red."""
    fills = _fills(0.5)
    assert fills[0.4] == (RED, "")  # (0.3, 0.4]: every score fails
    assert fills[0.5] == (AMBER, " (fails below the threshold, passes at it)")
    assert fills[0.6] == (BLUE, "")  # (0.5, 0.6]: every score passes
    assert _fills(0.5, "zh")[0.5] == (AMBER, " (低于阈值为不通过，等于阈值为通过)")
    assert fills[1.0] == (BLUE, "")


def test_a_threshold_on_no_bucket_bound_and_no_threshold() -> None:
    fills = _fills(0.65)
    assert (fills[0.6][0], fills[0.7][0], fills[0.8][0]) == (RED, AMBER, BLUE)
    assert {fill for fill, _ in _fills(None).values()} == {BLUE}


def test_time_series_legend_is_html_and_two_time_labels_are_minor() -> None:
    """The pass-rate chart's legend is an HTML list after the SVG (it wraps and keeps the page's font size on a
    phone) and the second and fourth of its five time labels are ``minor`` (hidden below 640 px by portal.css)."""
    from datetime import UTC, datetime, timedelta

    from ragpulse.portal.stats import JudgeSeries, SeriesPoint
    from ragpulse.portal.ui.charts import timeseries_svg

    since = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    point = SeriesPoint(start=since, count=3, errors=1, skipped=1, pass_rate=0.5, mean_score=0.6)
    html = str(
        timeseries_svg([JudgeSeries(judge="faith<x>", points=[point])], since, since + timedelta(hours=4))
    )
    svg, legend = html.split("</svg>", 1)[0], html.split('<ul class="ts-legend">', 1)[1]
    assert svg.startswith('<svg viewBox="0 0 600 200"')
    assert re.findall(r'<text class="(time-tick[^"]*)"[^>]*>([^<]+)</text>', svg) == [
        ("time-tick", "12-05 12:00"),
        ("time-tick minor", "12-05 13:00"),
        ("time-tick", "12-05 14:00"),
        ("time-tick minor", "12-05 15:00"),
        ("time-tick", "12-05 16:00 UTC"),
    ]
    assert 'class="legend"' not in svg
    assert re.sub(r"<svg.*?</svg>", "", legend) == (
        '<li data-judge="faith&lt;x&gt;">faith&lt;x&gt; · errors 1 · skipped 1</li></ul>'
    )
