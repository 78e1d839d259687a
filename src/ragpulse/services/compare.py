"""Compare two run reports: summary metrics and per-judge averages side by side, and flipped cases.

Cases are matched by case id. A case flips ``pass → fail`` when it passed in run A and did not pass in run B
(an unscored case is not a pass), and ``fail → pass`` the other way round.

Runs of different test sets (or of the same set whose cases changed) are compared on their shared cases only:
``warning`` says so, and pass rate, coverage and judge means are recomputed over those cases from the case rows.
With no shared case every figure is ``None`` (n/a) and ``warning`` starts with "no shared cases".
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ragpulse.model import JudgementStatus
from ragpulse.services.report_model import CaseRow, RunReport

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
        test_set_a / test_set_b: the runs' test sets.
        shared_cases: cases (by id) in both runs.
        warning: set when the runs' cases differ (another test set, or cases added/removed): the metrics are then
            over the shared cases only.
        metrics: ``pass_rate``, ``coverage`` and one entry per judge mean (the judge's name), over the union of
            both runs' judges.
        pass_to_fail / fail_to_pass: flipped cases, in run B's case order.
    """

    model_config = ConfigDict(frozen=True)

    run_a: str
    run_b: str
    test_set_a: str = ""
    test_set_b: str = ""
    shared_cases: int = 0
    warning: str | None = None
    metrics: dict[str, MetricDelta] = Field(default_factory=dict)
    pass_to_fail: list[FlippedCase] = Field(default_factory=list)
    fail_to_pass: list[FlippedCase] = Field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The JSON form (``runs compare --json``)."""
        return self.model_dump(mode="json")


def _delta(a: float | None, b: float | None) -> MetricDelta:
    return MetricDelta(a=a, b=b, delta=None if a is None or b is None else round(b - a, 6))


def _over(rows: list[CaseRow]) -> tuple[float | None, float | None, dict[str, float | None]]:
    """Pass rate, coverage and judge means (0–1, 6 decimals) of ``rows`` (the report's definitions); ``None``
    for a figure over no rows."""
    n = len(rows)
    scores: dict[str, list[float]] = {}
    for r in rows:
        for name, j in r.judgements.items():
            got = scores.setdefault(name, [])
            if j.status is JudgementStatus.OK and j.score is not None:
                got.append(j.score)
    means = {k: round(sum(v) / len(v), 6) if v else None for k, v in scores.items()}
    if not n:
        return None, None, means
    return round(sum(r.passed for r in rows) / n, 6), round(sum(r.scored > 0 for r in rows) / n, 6), means


def compare_reports(a: RunReport, b: RunReport) -> RunComparison:
    """Compare run ``a`` (baseline) with run ``b`` (candidate)."""
    cases_a = {c.case_id: c for c in a.cases}
    ids_b = [c.case_id for c in b.cases]
    shared = [i for i in ids_b if i in cases_a]
    same_cases = a.test_set == b.test_set and set(cases_a) == set(ids_b)
    warning = None
    pa: float | None
    pb: float | None
    ca: float | None
    cb: float | None
    if same_cases:
        pa, ca, ma = a.pass_rate, a.coverage, dict(a.averages)
        pb, cb, mb = b.pass_rate, b.coverage, dict(b.averages)
    else:
        what = (
            f"different test sets ({a.test_set} and {b.test_set})"
            if a.test_set != b.test_set
            else f"different cases of test set {a.test_set}"
        )
        warning = (
            ("no shared cases: " if not shared else "")
            + f"runs {a.run_id} and {b.run_id} replayed {what}: comparing the {len(shared)} shared case(s) only "
            f"({len(cases_a) - len(shared)} only in {a.run_id}, {len(ids_b) - len(shared)} only in {b.run_id})"
        )
        keep = set(shared)
        pa, ca, ma = _over([c for c in a.cases if c.case_id in keep])
        pb, cb, mb = _over([c for c in b.cases if c.case_id in keep])
    metrics = {"pass_rate": _delta(pa, pb), "coverage": _delta(ca, cb)}
    for name in dict.fromkeys([*ma, *mb]):
        metrics[name] = _delta(ma.get(name), mb.get(name))
    p2f: list[FlippedCase] = []
    f2p: list[FlippedCase] = []
    for cb_row in b.cases:
        ca_row = cases_a.get(cb_row.case_id)
        if ca_row is None:
            continue
        row = FlippedCase(case_id=cb_row.case_id, reason_a=ca_row.reason, reason_b=cb_row.reason)
        if ca_row.passed and not cb_row.passed:
            p2f.append(row)
        elif not ca_row.passed and cb_row.passed:
            f2p.append(row)
    return RunComparison(
        run_a=a.run_id,
        run_b=b.run_id,
        test_set_a=a.test_set,
        test_set_b=b.test_set,
        shared_cases=len(shared),
        warning=warning,
        metrics=metrics,
        pass_to_fail=p2f,
        fail_to_pass=f2p,
    )
