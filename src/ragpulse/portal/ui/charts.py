"""Server-rendered SVG charts (no chart script in the browser): the score histogram per judge and the pass
rate over time per judge.

Both say what they leave out of the pass rate: the histogram's caption (HTML, in the template) counts skipped
and error judgements, and the time series marks every interval that had some (a tick under the axis, the
counts in its tooltip). The histogram's x axis is the score (0–1, bars as wide as their bucket) with the
judge's threshold drawn as a dashed line; the time series has a time axis whose labels ``portal.js`` writes in
the browser's time zone (``data-time``, UTC without script).

The time series scales with its box: on a narrow screen (``portal.css``, ``max-width: 640px``) its text is drawn
larger in the view box so that it stays 10–11 px on the screen (10.7 px at 390 px), and the second and fourth
time labels (``class="time-tick minor"``) are hidden so the start, middle and end labels do not overlap. Its legend is HTML
under the SVG (``<ul class="ts-legend">``), so it wraps and keeps the page's font size at any width.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from markupsafe import Markup, escape

from ragpulse.portal.stats import JudgeScores, JudgeSeries

__all__ = ["histogram_svg", "timeseries_svg"]

_COLORS = ("#2457c5", "#b3261e", "#1e7a3b", "#8a5a00", "#6b3fa0", "#0b7a8a", "#a0527a")
_NO_LABELS: Mapping[str, str] = {}


def histogram_svg(
    s: JudgeScores, threshold: float | None = None, t: Mapping[str, str] = _NO_LABELS
) -> Markup:
    """Bars of ``s.buckets`` (count per score bucket, each as wide as its score range) on a 0–1 score axis,
    300×150 view box; a bar whose every score fails (its upper bound below ``threshold``) in red, one whose every
    score passes (its lower bound at or above it) in blue, and the bar the threshold falls in — ``(lower, upper]``
    with lower < threshold ≤ upper holds failing scores and, at the threshold itself, passing ones — in amber with
    a title saying so; the threshold a dashed line labelled with its value. ``t``: the page's labels
    (``threshold``, ``hist_mixed``)."""
    w, h, pad = 300, 150, 18
    base = h - pad - 10
    top = max((b.count for b in s.buckets), default=0) or 1
    span = w - 2 * pad
    parts = [
        f'<svg viewBox="0 0 {w} {h}" role="img" aria-label="{escape(s.judge)} score histogram" '
        f'class="hist" data-judge="{escape(s.judge)}">'
    ]
    prev = 0.0
    for b in s.buckets:
        bh = (base - pad) * b.count / top
        x0, x1 = pad + span * prev, pad + span * b.le
        note = ""
        if threshold is None or prev >= threshold:
            color = "#2457c5"  # passes
        elif b.le < threshold:
            color = "#b3261e"  # fails
        else:
            color = "#b7791f"  # the threshold's bucket: fails below it, passes at it
            note = f" ({escape(t.get('hist_mixed', 'fails below the threshold, passes at it'))})"
        parts.append(
            f'<rect x="{x0 + 0.5:.1f}" y="{base - bh:.1f}" width="{max(x1 - x0 - 1, 0.5):.1f}" height="{bh:.1f}" '
            f'fill="{color}"><title>{prev:g}–{b.le:g}: {b.count}{note}</title></rect>'
        )
        prev = b.le
    parts.append(f'<line x1="{pad}" y1="{base}" x2="{w - pad}" y2="{base}" stroke="#999"/>')
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = pad + span * tick
        parts.append(f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 3}" stroke="#999"/>')
        parts.append(f'<text x="{x:.1f}" y="{base + 13}" text-anchor="middle">{tick:g}</text>')
    if threshold is not None:
        x = pad + span * min(max(threshold, 0.0), 1.0)
        label = escape(t.get("threshold", "threshold"))
        parts.append(
            f'<line class="threshold" x1="{x:.1f}" y1="{pad - 6}" x2="{x:.1f}" y2="{base}" stroke="#1d2330" '
            f'stroke-dasharray="4 3"><title>{label} {threshold:g}</title></line>'
        )
        anchor = "end" if threshold > 0.6 else "start"
        dx = -3 if anchor == "end" else 3
        parts.append(
            f'<text class="threshold" x="{x + dx:.1f}" y="{pad - 8}" text-anchor="{anchor}">'
            f"{label} {threshold:g}</text>"
        )
    parts.append(f'<text x="2" y="{pad + 4}">{top}</text></svg>')
    return Markup("".join(parts))


def _iso(v: datetime) -> str:
    return v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def timeseries_svg(
    series: Sequence[JudgeSeries], since: datetime, until: datetime, t: Mapping[str, str] = _NO_LABELS
) -> Markup:
    """One pass-rate line per judge over [since, until], 600×200 view box: a 0–100 % y axis, a time axis with
    five labels (``<text data-time="ISO">``, UTC until ``portal.js`` rewrites them; the second and fourth are
    ``minor``, hidden on narrow screens), a tooltip per point (pass rate, judgements, errors, skipped), a tick
    under the axis at each interval with errors or skipped judgements; then, after the SVG, an HTML legend
    (``<ul class="ts-legend">``, one ``<li data-judge>`` per judge with its colour swatch and its errors and
    skipped in the window). ``t``: the page's labels (``errors``, ``skipped``, ``count``, ``pass_rate``)."""
    w, h, pad, left = 600, 200, 24, 34
    bottom = h - 40
    span = max((until - since).total_seconds(), 1.0)
    width = w - left - pad
    err_l, skip_l = escape(t.get("errors", "errors")), escape(t.get("skipped", "skipped"))
    count_l, rate_l = escape(t.get("count", "judgements")), escape(t.get("pass_rate", "pass rate"))
    parts = [f'<svg viewBox="0 0 {w} {h}" role="img" aria-label="pass rate over time" class="ts">']
    legend = ['<ul class="ts-legend">']
    for frac in (0.0, 0.5, 1.0):
        y = bottom - (bottom - pad) * frac
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - pad}" y2="{y:.1f}" stroke="#e3e6ec"/>')
        parts.append(f'<text x="2" y="{y + 3:.1f}">{int(frac * 100)}%</text>')
    parts.append(f'<line x1="{left}" y1="{bottom}" x2="{w - pad}" y2="{bottom}" stroke="#999"/>')
    for i in range(5):  # the time axis
        at = since + (until - since) * (i / 4)
        x = left + width * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        label = at.astimezone(UTC).strftime("%m-%d %H:%M") + (" UTC" if i == 4 else "")
        parts.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" stroke="#999"/>')
        minor = " minor" if i in (1, 3) else ""
        parts.append(
            f'<text class="time-tick{minor}" x="{x:.1f}" y="{bottom + 16}" text-anchor="{anchor}" '
            f'data-time="{_iso(at)}">{label}</text>'
        )
    for i, js in enumerate(series):
        color = _COLORS[i % len(_COLORS)]
        pts = []
        errors = skipped = 0
        for p in js.points:
            x = left + width * (p.start - since).total_seconds() / span
            errors += p.errors
            skipped += p.skipped
            tip = (
                f"{escape(js.judge)} {_iso(p.start)}: {rate_l} "
                f"{'–' if p.pass_rate is None else f'{p.pass_rate * 100:.1f} %'}, {count_l} {p.count}, "
                f"{err_l} {p.errors}, {skip_l} {p.skipped}"
            )
            if p.errors or p.skipped:
                parts.append(
                    f'<rect class="not-decided" x="{x - 1.5:.1f}" y="{bottom + 20 + 4 * (i % 3)}" width="3" '
                    f'height="3" fill="{color}"><title>{tip}</title></rect>'
                )
            if p.pass_rate is None:
                continue
            y = bottom - (bottom - pad) * p.pass_rate
            pts.append((x, y, tip))
        if len(pts) > 1:
            line = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in pts)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{line}"/>')
        for x, y, tip in pts:
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"><title>{tip}</title></circle>'
            )
        legend.append(
            f'<li data-judge="{escape(js.judge)}"><svg class="swatch" viewBox="0 0 10 10" aria-hidden="true">'
            f'<rect width="10" height="10" fill="{color}"/></svg>{escape(js.judge)} · '
            f"{err_l} {errors} · {skip_l} {skipped}</li>"
        )
    parts.append("</svg>")
    legend.append("</ul>")
    return Markup("".join(parts + legend))
