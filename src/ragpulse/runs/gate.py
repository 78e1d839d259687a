"""Quality thresholds on a run report and the CI gate: ``replay --fail-under`` and ``gate --min`` share them.

Syntax: ``METRIC=MIN`` with ``MIN`` a number in [0, 1]; several may be given in one argument separated by
commas (``pass_rate=0.8,coverage=0.95``). Metrics:

==============================  ====================================================================
``pass_rate``                   passed cases / (all cases − abstained cases)
``coverage``                    cases with ≥ 1 scored judgement / all cases
``JUDGE`` or ``JUDGE.mean``     mean score of a judge over the cases it scored
``JUDGE.pass_rate``             passed / scored judgements of a judge
``JUDGE.coverage``              cases the judge scored / all cases
==============================  ====================================================================

Metric names are parsed from the right (:func:`~ragpulse.runs.report_model.parse_metric`), so a judge
suffix may itself contain dots. A name that is neither a run metric nor ``JUDGE[.suffix]`` of a known judge
(the judge registry, configured checklists, and the judges of the run being checked) is a typo: a
:class:`~ragpulse.errors.ConfigError` naming it (exit 2), never a silent breach.

A threshold is met when the report's value is ≥ the minimum. A known judge with no scored case, or not in the
run, has no value: its thresholds are breached (an unscored judge never passes silently). When thresholds are
given without a ``coverage`` one, ``coverage ≥ default_coverage`` (``settings.replay.coverage_threshold``, 0.95) is
added, so a run that scored too few cases fails even when its pass rate looks fine.

The gate (:func:`evaluate_gate`) checks a finished run: thresholds come from ``settings.replay.gate_min`` and the
command line (``--min``, which wins for the same metric); at least one is required. A run that did not run to
its end (status ``failed``, ``interrupted``, ``cancelled``, ``queued`` or ``running``) fails the gate whatever its
numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ragpulse.errors import ConfigError
from ragpulse.model import RunStatus
from ragpulse.runs.report_model import JUDGE_FIELDS, MetricRef, RunReport, parse_metric

__all__ = [
    "Breach",
    "GateResult",
    "Threshold",
    "ThresholdOutcome",
    "evaluate_gate",
    "evaluate_thresholds",
    "gate_thresholds",
    "parse_thresholds",
]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-.:]*$")
_EPS = 1e-9
_SYNTAX = "pass_rate, coverage, JUDGE, " + ", ".join(f"JUDGE.{f}" for f in JUDGE_FIELDS)


@dataclass(frozen=True)
class Threshold:
    """``metric >= minimum``; ``metric`` as written, without a ``.mean`` suffix (``pass_rate``,
    ``faithfulness``, ``faithfulness.pass_rate``, …)."""

    metric: str
    minimum: float

    @property
    def ref(self) -> MetricRef:
        """The parsed metric."""
        return parse_metric(self.metric)

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


def parse_thresholds(specs: Iterable[str], *, judges: Collection[str] | None = None) -> list[Threshold]:
    """Parse ``METRIC=MIN`` items (each argument may hold several, comma-separated).

    Args:
        judges: the judge names a threshold may name (``None``: any name is taken as a judge).

    Raises:
        ConfigError: an item is not ``NAME=NUMBER``, the number is not in [0, 1], or the name is not a metric
            of a known judge (the message names it and lists the known ones).
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
                raise ConfigError(f"threshold {item!r}: metric must be one of {_SYNTAX}")
            try:
                minimum = float(value)
            except ValueError as e:
                raise ConfigError(f"threshold {item!r}: {value.strip()!r} is not a number") from e
            if not math.isfinite(minimum) or not 0.0 <= minimum <= 1.0:
                raise ConfigError(f"threshold {item!r}: minimum must be in [0, 1]")
            ref = parse_metric(name)
            if judges is not None and ref.judge is not None and ref.judge not in judges:
                raise ConfigError(
                    f"threshold {item!r}: unknown metric or judge {ref.judge!r}; metrics: {_SYNTAX}; "
                    f"judges: {', '.join(sorted(judges)) or '-'}"
                )
            out[str(ref)] = Threshold(str(ref), minimum)
    return list(out.values())


def _with_coverage(thresholds: Iterable[Threshold], default_coverage: float | None) -> list[Threshold]:
    ts = list(thresholds)
    if ts and default_coverage is not None and not any(t.metric == "coverage" for t in ts):
        ts.append(Threshold("coverage", default_coverage))
    return ts


def evaluate_thresholds(
    report: RunReport, thresholds: Iterable[Threshold], *, default_coverage: float | None = None
) -> list[Breach]:
    """Return the breached thresholds (empty: all met).

    Args:
        report: a run report.
        thresholds: from :func:`parse_thresholds`.
        default_coverage: added as ``coverage`` when thresholds are given without one (``None``: not added).
    """
    breaches = []
    for t in _with_coverage(thresholds, default_coverage):
        actual = report.value(t.ref)
        if actual is None or actual + _EPS < t.minimum:
            breaches.append(Breach(t, actual))
    return breaches


@dataclass(frozen=True)
class ThresholdOutcome:
    """One gate threshold: ``metric >= minimum``; ``actual`` is ``None`` when the run has no value."""

    metric: str
    minimum: float
    actual: float | None
    met: bool
    message: str


@dataclass(frozen=True)
class GateResult:
    """Outcome of the gate: ``passed`` is True when every threshold is met and the run ran to its end
    (``run_failed``: its status is not ``completed``/``completed_with_errors``)."""

    passed: bool
    thresholds: tuple[ThresholdOutcome, ...]
    run_failed: bool = False

    @property
    def exit_code(self) -> int:
        """0 when passed, else 1."""
        return 0 if self.passed else 1


def gate_thresholds(
    config_min: Mapping[str, float],
    cli_specs: Sequence[str],
    default_coverage: float,
    *,
    judges: Collection[str] | None = None,
) -> list[Threshold]:
    """Merge config and command-line thresholds (command line wins per metric) and add the coverage default.

    Raises:
        ConfigError: no threshold at all, a malformed one, or one naming an unknown metric or judge (see
            :func:`parse_thresholds`).
    """
    specs = [f"{k}={v}" for k, v in config_min.items()] + list(cli_specs)
    ts = parse_thresholds(specs, judges=judges)
    if not ts:
        raise ConfigError(
            "no threshold to check: give --min METRIC=MIN (e.g. --min pass_rate=0.8) or set gate_min "
            f"(metrics: {_SYNTAX})"
        )
    return _with_coverage(ts, default_coverage)


#: Run statuses whose numbers the gate accepts; any other status fails the gate.
_FINISHED = frozenset({RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS})


def evaluate_gate(report: RunReport, thresholds: Sequence[Threshold]) -> GateResult:
    """Check ``report`` against ``thresholds``."""
    outcomes = []
    for t in thresholds:
        actual = report.value(t.ref)
        met = actual is not None and actual + _EPS >= t.minimum
        if met:
            assert actual is not None
            message = f"{t.metric} {actual:.3f} >= {t.minimum:g}"
        else:
            message = Breach(t, actual).message
        outcomes.append(ThresholdOutcome(t.metric, t.minimum, actual, met, message))
    # Only a run that ran to its end is gated on its numbers: a failed, interrupted (its process killed),
    # cancelled, queued or still running run covers only part of its test set, and its coverage, computed over
    # the cases it reached, would not show it.
    run_failed = report.status not in _FINISHED
    return GateResult(
        passed=all(o.met for o in outcomes) and not run_failed,
        thresholds=tuple(outcomes),
        run_failed=run_failed,
    )
