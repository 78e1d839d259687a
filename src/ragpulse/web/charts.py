"""Server-rendered SVG charts (no chart script in the browser): the score histogram per judge and the pass
rate over time per judge."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from markupsafe import Markup, escape

from ragpulse.services.stats import JudgeScores, JudgeSeries

__all__ = ["histogram_svg", "timeseries_svg"]

_COLORS = ("#2457c5", "#b3261e", "#1e7a3b", "#8a5a00", "#6b3fa0", "#0b7a8a", "#a0527a")


def histogram_svg(s: JudgeScores, threshold: float | None = None) -> Markup:
    """Bars of ``s.buckets`` (count per score bucket), 300×140 view box; bars above the threshold in blue,
    below it in red."""
    w, h, pad = 300, 140, 18
    n = len(s.buckets)
    top = max((b.count for b in s.buckets), default=0) or 1
    bw = (w - 2 * pad) / n
    parts = [
        f'<svg viewBox="0 0 {w} {h}" role="img" aria-label="{escape(s.judge)} score histogram" '
        f'class="hist" data-judge="{escape(s.judge)}">'
    ]
    prev = 0.0
    for i, b in enumerate(s.buckets):
        bh = (h - 2 * pad) * b.count / top
        x = pad + i * bw
        y = h - pad - bh
        bad = threshold is not None and b.le <= threshold
        color = "#b3261e" if bad else "#2457c5"
        parts.append(
            f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" fill="{color}">'
            f"<title>{prev:g}–{b.le:g}: {b.count}</title></rect>"
        )
        prev = b.le
    parts.append(f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#999"/>')
    parts.append(f'<text x="{pad}" y="{h - 4}">0</text><text x="{w - pad - 6}" y="{h - 4}">1</text>')
    parts.append(f'<text x="{pad}" y="12">{top}</text></svg>')
    return Markup("".join(parts))


def timeseries_svg(series: Sequence[JudgeSeries], since: datetime, until: datetime) -> Markup:
    """One pass-rate line per judge over [since, until], 600×180 view box, with a legend."""
    w, h, pad = 600, 180, 24
    span = max((until - since).total_seconds(), 1.0)
    parts = [
        f'<svg viewBox="0 0 {w} {h + 20 * len(series)}" role="img" aria-label="pass rate over time" class="ts">'
    ]
    for frac in (0.0, 0.5, 1.0):
        y = h - pad - (h - 2 * pad) * frac
        parts.append(f'<line x1="{pad}" y1="{y:.1f}" x2="{w - pad}" y2="{y:.1f}" stroke="#e3e6ec"/>')
        parts.append(f'<text x="2" y="{y + 3:.1f}">{int(frac * 100)}%</text>')
    for i, js in enumerate(series):
        color = _COLORS[i % len(_COLORS)]
        pts = []
        for p in js.points:
            if p.pass_rate is None:
                continue
            x = pad + (w - 2 * pad) * (p.start - since).total_seconds() / span
            y = h - pad - (h - 2 * pad) * p.pass_rate
            pts.append(f"{x:.1f},{y:.1f}")
        if len(pts) == 1:
            cx, cy = pts[0].split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>')
        elif pts:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(pts)}"/>'
            )
        ly = h + 14 + 20 * i
        parts.append(f'<rect x="{pad}" y="{ly - 9}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{pad + 16}" y="{ly}">{escape(js.judge)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
