"""The CI gate: check a finished run's report against minimum thresholds.

Thresholds use the syntax of ``replay --fail-under`` (:mod:`ragpulse.replay.thresholds`): ``NAME=x`` is a
judge's mean score, ``NAME.pass_rate=x`` its pass rate, ``NAME.coverage=x`` its coverage, plus the run's
``pass_rate`` and ``coverage``. They come from ``settings.replay.gate_min`` (config file / environment) and the
command line (``--min``, which wins for the same metric). A ``coverage`` threshold is always checked: when
none is given, ``coverage >= settings.replay.coverage_threshold`` (default 0.95) is added, so a run that scored too
few cases fails. A run whose status is ``failed`` fails the gate whatever its numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragpulse.replay.junit import ThresholdOutcome
from ragpulse.replay.thresholds import Threshold, evaluate_thresholds, parse_thresholds

__all__ = ["GateResult", "evaluate_gate", "gate_thresholds"]


@dataclass(frozen=True)
class GateResult:
    """Outcome of the gate: ``passed`` is True when every threshold is met and the run did not fail."""

    passed: bool
    thresholds: tuple[ThresholdOutcome, ...]
    run_failed: bool = False

    @property
    def exit_code(self) -> int:
        """0 when passed, else 1."""
        return 0 if self.passed else 1


def gate_thresholds(
    config_min: Mapping[str, float], cli_specs: Sequence[str], default_coverage: float
) -> list[Threshold]:
    """Merge config and command-line thresholds (command line wins per metric) and add the coverage default.

    Raises:
        ConfigError: a malformed threshold (see :func:`ragpulse.replay.thresholds.parse_thresholds`).
    """
    specs = [f"{k}={v}" for k, v in config_min.items()] + list(cli_specs)
    ts = parse_thresholds(specs)
    if not any(t.metric == "coverage" for t in ts):
        ts.append(Threshold("coverage", default_coverage))
    return ts


def _actual(report: Mapping[str, Any], metric: str) -> float | None:
    # A threshold above any possible value is always breached, and the breach carries the report's value.
    breach = evaluate_thresholds(report, [Threshold(metric, math.inf)])
    return breach[0].actual if breach else None


def evaluate_gate(report: Mapping[str, Any], thresholds: Sequence[Threshold]) -> GateResult:
    """Check ``report`` (a run report, see :mod:`ragpulse.replay.report`) against ``thresholds``."""
    breaches = {b.threshold.metric: b for b in evaluate_thresholds(report, thresholds)}
    outcomes = []
    for t in thresholds:
        b = breaches.get(t.metric)
        if b is not None:
            outcomes.append(ThresholdOutcome(t.metric, t.minimum, b.actual, False, b.message))
        else:
            actual = _actual(report, t.metric)
            shown = "?" if actual is None else f"{actual:.3f}"
            outcomes.append(
                ThresholdOutcome(t.metric, t.minimum, actual, True, f"{t.metric} {shown} >= {t.minimum:g}")
            )
    run_failed = report.get("status") == "failed"
    return GateResult(
        passed=not breaches and not run_failed, thresholds=tuple(outcomes), run_failed=run_failed
    )
