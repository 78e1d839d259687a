"""Quality thresholds on a run report: ``replay --fail-under`` and ``gate --min`` share this syntax.

Syntax: ``METRIC=MIN`` with ``MIN`` a number in [0, 1]; several may be given in one argument separated by
commas (``pass_rate=0.8,coverage=0.95``). Metrics:

==============================  ====================================================================
``pass_rate``                   passed cases / all cases
``coverage``                    cases with ≥ 1 scored judgement / all cases
``JUDGE`` or ``JUDGE.mean``     mean score of a judge over the cases it scored
``JUDGE.pass_rate``             passed / scored judgements of a judge
``JUDGE.coverage``              cases the judge scored / all cases
==============================  ====================================================================

A threshold is met when the report's value is ≥ the minimum. A judge with no scored case has no mean: its
thresholds are breached (an unscored judge never passes silently), as is a judge missing from the report.
When thresholds are given without a ``coverage`` one, ``coverage ≥ default_coverage``
(``settings.replay.coverage_threshold``, 0.95) is added, so a run that scored too few cases fails even when its pass
rate looks fine.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ragpulse.errors import ConfigError

__all__ = ["Breach", "Threshold", "evaluate_thresholds", "parse_thresholds"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-.:]*$")
_FIELDS = ("pass_rate", "coverage")
_EPS = 1e-9


@dataclass(frozen=True)
class Threshold:
    """``metric >= minimum``; ``metric`` as written (``pass_rate``, ``faithfulness.pass_rate``, …)."""

    metric: str
    minimum: float

    def __str__(self) -> str:
        return f"{self.metric}={self.minimum:g}"


@dataclass(frozen=True)
class Breach:
    """A threshold the report did not meet; ``actual`` is ``None`` when the report has no value."""

    threshold: Threshold
    actual: float | None

    @property
    def message(self) -> str:
        """One line for people, e.g. ``pass_rate 0.750 < 0.8``."""
        t = self.threshold
        if self.actual is None:
            return f"{t.metric}: no value in the run (no scored judgements) < {t.minimum:g}"
        return f"{t.metric} {self.actual:.3f} < {t.minimum:g}"


def parse_thresholds(specs: Iterable[str]) -> list[Threshold]:
    """Parse ``METRIC=MIN`` items (each argument may hold several, comma-separated).

    Raises:
        ConfigError: an item is not ``NAME=NUMBER``, the name is malformed, or the number is not in [0, 1].
    """
    out: dict[str, Threshold] = {}
    for spec in specs:
        for item in spec.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep or not name:
                raise ConfigError(f"threshold {item!r}: expected METRIC=MIN, e.g. pass_rate=0.8")
            if not _NAME_RE.match(name):
                raise ConfigError(
                    f"threshold {item!r}: metric must be pass_rate, coverage, JUDGE, JUDGE.mean, "
                    "JUDGE.pass_rate or JUDGE.coverage"
                )
            try:
                minimum = float(value)
            except ValueError as e:
                raise ConfigError(f"threshold {item!r}: {value.strip()!r} is not a number") from e
            if not math.isfinite(minimum) or not 0.0 <= minimum <= 1.0:
                raise ConfigError(f"threshold {item!r}: minimum must be in [0, 1]")
            if name.endswith(".mean"):
                name = name[: -len(".mean")]
            out[name] = Threshold(name, minimum)
    return list(out.values())


def _value(report: Mapping[str, Any], metric: str) -> float | None:
    if metric in ("pass_rate", "coverage"):
        v = report.get(metric)
    elif metric.rpartition(".")[2] in _FIELDS and "." in metric:
        judge, _, field = metric.rpartition(".")
        v = ((report.get("judges") or {}).get(judge) or {}).get(field)
    else:
        v = (report.get("averages") or {}).get(metric)
    return float(v) if isinstance(v, int | float) else None


def evaluate_thresholds(
    report: Mapping[str, Any], thresholds: Iterable[Threshold], *, default_coverage: float | None = None
) -> list[Breach]:
    """Return the breached thresholds (empty: all met).

    Args:
        report: a run report (:func:`ragpulse.replay.report.build_report`).
        thresholds: from :func:`parse_thresholds`.
        default_coverage: added as ``coverage`` when thresholds are given without one (``None``: not added).
    """
    ts = list(thresholds)
    if ts and default_coverage is not None and not any(t.metric == "coverage" for t in ts):
        ts.append(Threshold("coverage", default_coverage))
    breaches = []
    for t in ts:
        actual = _value(report, t.metric)
        if actual is None or actual + _EPS < t.minimum:
            breaches.append(Breach(t, actual))
    return breaches
