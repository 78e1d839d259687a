"""Compare two run reports: summary metrics and per-judge averages side by side, and flipped cases.

Cases are matched by case id. A case flips ``pass → fail`` when it passed in run A and did not pass in run B
(an unscored case is not a pass), and ``fail → pass`` the other way round.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ragpulse.services.report_model import RunReport

__all__ = ["FlippedCase", "MetricDelta", "RunComparison", "compare_reports"]


class MetricDelta(BaseModel):
    """One metric in both runs (0–1, ``None`` when a run has no value) and ``delta`` = b − a."""

    model_config = ConfigDict(frozen=True)

    a: float | None = None
    b: float | None = None
    delta: float | None = None


class FlippedCase(BaseModel):
    """A case whose pass/fail differs between the runs, with its reason in each."""

    model_config = ConfigDict(frozen=True)

    case_id: str
    reason_a: str | None = None
    reason_b: str | None = None


class RunComparison(BaseModel):
    """Run A (baseline) against run B (candidate).

    Attributes:
        metrics: ``pass_rate``, ``coverage`` and one entry per judge mean (the judge's name), over the union of
            both runs' judges.
        pass_to_fail / fail_to_pass: flipped cases, in run B's case order.
    """

    model_config = ConfigDict(frozen=True)

    run_a: str
    run_b: str
    metrics: dict[str, MetricDelta] = Field(default_factory=dict)
    pass_to_fail: list[FlippedCase] = Field(default_factory=list)
    fail_to_pass: list[FlippedCase] = Field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The JSON form (``runs compare --json``)."""
        return self.model_dump(mode="json")


def _delta(a: float | None, b: float | None) -> MetricDelta:
    return MetricDelta(a=a, b=b, delta=None if a is None or b is None else round(b - a, 6))


def compare_reports(a: RunReport, b: RunReport) -> RunComparison:
    """Compare run ``a`` (baseline) with run ``b`` (candidate)."""
    metrics = {
        "pass_rate": _delta(a.pass_rate, b.pass_rate),
        "coverage": _delta(a.coverage, b.coverage),
    }
    for name in dict.fromkeys([*a.averages, *b.averages]):
        metrics[name] = _delta(a.averages.get(name), b.averages.get(name))
    cases_a = {c.case_id: c for c in a.cases}
    p2f: list[FlippedCase] = []
    f2p: list[FlippedCase] = []
    for cb in b.cases:
        ca = cases_a.get(cb.case_id)
        if ca is None:
            continue
        row = FlippedCase(case_id=cb.case_id, reason_a=ca.reason, reason_b=cb.reason)
        if ca.passed and not cb.passed:
            p2f.append(row)
        elif not ca.passed and cb.passed:
            f2p.append(row)
    return RunComparison(run_a=a.run_id, run_b=b.run_id, metrics=metrics, pass_to_fail=p2f, fail_to_pass=f2p)
