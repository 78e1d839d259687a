"""Compare two run reports: summary metrics and per-judge averages side by side, and flipped cases.

Cases are matched by case id. A case flips ``pass → fail`` when it passed in run A and did not pass in run B
(an unscored case is not a pass), and ``fail → pass`` the other way round. A case that failed in both runs is a
regression too when a judge's score dropped by at least ``score_drop`` (:data:`DEFAULT_SCORE_DROP`, 0.1) from run
A to run B (both scored ``ok`` by that judge): it is listed in ``score_drops`` with each such judge's scores. A
case id that several rows of run A
share (traces sent twice with one run id) is matched to the last of them; each row of run B is matched.

Runs of different test sets (or of the same set whose cases changed) are compared on their shared cases only:
``warning`` says so, and pass rate, coverage and judge means are recomputed over those cases from the case rows.
With no shared case every figure is ``None`` (n/a) and ``warning`` starts with "no shared cases".

Runs that ran different judges (``--judges``) are compared on the judges both ran (``judges_compared``): each
case's verdict in each run is decided again from those judges' judgements alone
(:func:`~ragpulse.runs.reports.shared_judges_row`: passed = every shared judge passed), so a case that failed
only on a judge the other run never ran does not flip; flips, score drops, pass rate and coverage are over the
shared judges, while each judge's mean stays its own (``n/a`` in the run that did not run it). ``judges_only_a``
/ ``judges_only_b`` name the others and ``warning`` says so ("judges differ: relevancy only in r1; compared on
faithfulness, keyword"). With no shared judge every figure but the judge means is ``None``, no case is listed,
and ``warning`` starts with "no shared judges".

:class:`ComparisonFold` is the one computation, fed one case row at a time: by :func:`compare_reports` from
two reports' in-memory rows, and by :func:`compare_stored` from two stored runs a page at a time (each run's
rows in run order, the other run's rows looked up by case id page by page), so memory does not grow with the
runs; the flipped cases can go to a :class:`FlippedSpool` (temporary files) instead of lists.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from typing import IO, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field

from ragpulse.model import JudgementStatus
from ragpulse.protocols import RunStore
from ragpulse.runs.report_model import CaseRow, RunReport
from ragpulse.runs.reports import shared_judges_row, stored_case_row_pages, stored_case_rows

__all__ = [
    "DEFAULT_SCORE_DROP",
    "FLIP_KINDS",
    "ComparisonFold",
    "FlipKind",
    "FlippedCase",
    "FlippedSpool",
    "MetricDelta",
    "RunComparison",
    "ScoreDrop",
    "compare_reports",
    "compare_stored",
    "dropped_scores",
    "run_judges",
    "write_comparison_json",
]

#: The lists of regressed or improved cases, in the order of :class:`RunComparison`'s fields: the two flips and
#: the score drops within cases that failed in both runs.
FlipKind = Literal["pass_to_fail", "fail_to_pass", "score_drops"]
FLIP_KINDS: tuple[FlipKind, FlipKind, FlipKind] = ("pass_to_fail", "fail_to_pass", "score_drops")

#: Smallest drop of a judge's score (0–1, run A − run B) within a case that failed in both runs that
#: ``runs compare`` lists as a regression (``--score-drop``).
DEFAULT_SCORE_DROP = 0.1

#: Case rows a page of :func:`compare_stored` holds (and case ids one look-up asks for).
PAGE = 500


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


class ScoreDrop(FlippedCase):
    """A case that failed in both runs whose score by one judge or more dropped by at least the comparison's
    ``score_drop``: ``judges`` maps each such judge to its score in run A (``a``), run B (``b``) and ``delta`` =
    b − a (negative)."""

    judges: dict[str, MetricDelta] = Field(default_factory=dict)


class RunComparison(BaseModel):
    """Run A (baseline) against run B (candidate).

    Attributes:
        test_set_a / test_set_b: the runs' test sets.
        shared_cases: cases (by id) in both runs.
        cases_differ / cases_only_a / cases_only_b: whether the runs replayed different cases (another test set,
            or cases added/removed), and how many cases only run A / only run B has (the portal shows them).
        warning: set when the runs' cases differ (another test set, or cases added/removed): the metrics are then
            over the shared cases only; and when the runs ran different judges (sentences joined by "; ").
        judges_compared: the judges both runs ran (run A's order): the cases' verdicts, flips, score drops,
            pass rate and coverage are over these.
        judges_only_a / judges_only_b: judges only run A / only run B ran (empty when the runs ran the same).
        metrics: ``pass_rate``, ``coverage`` and one entry per judge mean (the judge's name), over the union of
            both runs' judges.
        pass_to_fail / fail_to_pass: flipped cases, in run B's case order.
        score_drop: the smallest per-judge score drop listed in ``score_drops`` (0–1).
        score_drops: cases that failed in both runs with a judge's score down by ``score_drop`` or more, in run
            B's case order (regressions a pass/fail flip does not show).
    """

    model_config = ConfigDict(frozen=True)

    run_a: str
    run_b: str
    test_set_a: str = ""
    test_set_b: str = ""
    shared_cases: int = 0
    cases_differ: bool = False
    cases_only_a: int = 0
    cases_only_b: int = 0
    warning: str | None = None
    judges_compared: list[str] = Field(default_factory=list)
    judges_only_a: list[str] = Field(default_factory=list)
    judges_only_b: list[str] = Field(default_factory=list)
    metrics: dict[str, MetricDelta] = Field(default_factory=dict)
    score_drop: float = DEFAULT_SCORE_DROP
    pass_to_fail: list[FlippedCase] = Field(default_factory=list)
    fail_to_pass: list[FlippedCase] = Field(default_factory=list)
    score_drops: list[ScoreDrop] = Field(default_factory=list)

    @property
    def judges_differ(self) -> bool:
        """Whether one run ran a judge the other did not."""
        return bool(self.judges_only_a or self.judges_only_b)

    @property
    def comparable(self) -> bool:
        """Whether the runs share a case and a judge (else every pass/fail figure is ``None``)."""
        return self.shared_cases > 0 and not (self.judges_differ and not self.judges_compared)

    def to_json(self) -> dict[str, object]:
        """The JSON form (``runs compare --json``)."""
        return self.model_dump(mode="json")


def run_judges(report: RunReport) -> list[str]:
    """The judges a run ran, in its display order: ``judges`` (configured judges and any that judged a case),
    or ``averages``' judges for a report without them."""
    return list(report.judges or report.averages)


def _judges_warning(a: str, b: str, shared: list[str], only_a: list[str], only_b: list[str]) -> str:
    """``judges differ: relevancy only in r1; compared on faithfulness, keyword`` (or ``no shared judges: …``)."""
    only = [f"{', '.join(names)} only in {run}" for names, run in ((only_a, a), (only_b, b)) if names]
    if not shared:
        return f"no shared judges: runs {a} and {b} ran no judge in common ({'; '.join(only)}): nothing to compare"
    return f"judges differ: {'; '.join(only)}; compared on {', '.join(shared)}"


def _delta(a: float | None, b: float | None) -> MetricDelta:
    return MetricDelta(a=a, b=b, delta=None if a is None or b is None else round(b - a, 6))


#: ``sum()`` of floats is Neumaier's compensated sum since Python 3.12 (plain addition before).
_COMPENSATED = sys.version_info >= (3, 12)


class _Sum:
    """``sum(xs)`` and ``len(xs)`` of floats added one at a time, with the built-in ``sum``'s own algorithm
    (so a mean folded row by row is the mean of the list, to the last bit)."""

    def __init__(self, *, compensated: bool = _COMPENSATED) -> None:
        self.n = 0
        self._total = 0.0
        self._c = 0.0
        self._compensated = compensated

    def add(self, x: float) -> None:
        self.n += 1
        if not self._compensated:
            self._total += x
            return
        t = self._total + x
        if abs(self._total) >= abs(x):
            self._c += (self._total - t) + x
        else:
            self._c += (x - t) + self._total
        self._total = t

    @property
    def total(self) -> float:
        if self._compensated and self._c and math.isfinite(self._c):
            return self._total + self._c
        return self._total


class _Figures:
    """Pass rate, coverage and judge means (0–1, 6 decimals) of the rows added (the report's definitions);
    ``None`` for a figure over no rows."""

    def __init__(self) -> None:
        self.n = self.passed = self.covered = self.abstained = 0
        self.scores: dict[str, _Sum] = {}

    def add(self, row: CaseRow, verdict: CaseRow | None = None) -> None:
        """Count ``row``: its pass/fail from ``verdict`` (the row cut to the compared judges; default ``row``),
        its judges' scores from ``row``."""
        v = row if verdict is None else verdict
        self.n += 1
        self.passed += v.passed
        self.abstained += v.abstained
        self.covered += v.scored > 0
        for name, j in row.judgements.items():
            got = self.scores.setdefault(name, _Sum())
            if j.status is JudgementStatus.OK and j.score is not None:
                got.add(j.score)

    def figures(self) -> tuple[float | None, float | None, dict[str, float | None]]:
        means = {k: round(v.total / v.n, 6) if v.n else None for k, v in self.scores.items()}
        if not self.n:
            return None, None, means
        decided = self.n - self.abstained  # abstained cases are left out of the pass rate
        return round(self.passed / decided, 6) if decided else 0.0, round(self.covered / self.n, 6), means


class ComparisonFold:
    """Run ``a`` (baseline) against run ``b`` (candidate), fed one case row at a time: every row of run A in run
    order (:meth:`add_a`), then every row of run B in run order (:meth:`add_b`); :meth:`result` is the
    comparison. Flipped cases go to ``flipped(kind, case)`` as they are found (in run B's order); memory holds
    counts and sums only. When the runs ran different judges (:func:`run_judges`) each row's verdict is taken
    over the judges both ran (:func:`~ragpulse.runs.reports.shared_judges_row`)."""

    def __init__(
        self,
        a: RunReport,
        b: RunReport,
        flipped: Callable[[FlipKind, FlippedCase], None],
        *,
        score_drop: float = DEFAULT_SCORE_DROP,
    ) -> None:
        self.a, self.b = a, b
        self._flipped = flipped
        self.score_drop = score_drop
        self._over_a, self._over_b = _Figures(), _Figures()
        self.ids_a = 0  # distinct case ids of run A
        self.rows_b = 0
        self.shared = 0  # rows of run B whose case id is in run A
        self._a_only = False  # a case id of run A is not in run B
        judges_a, judges_b = run_judges(a), run_judges(b)
        self.judges = [n for n in judges_a if n in judges_b]  # compared on these
        self.only_a = [n for n in judges_a if n not in judges_b]
        self.only_b = [n for n in judges_b if n not in judges_a]
        self.judges_differ = bool(self.only_a or self.only_b)

    def _verdict(self, row: CaseRow) -> CaseRow:
        """``row`` cut to the compared judges when the runs' judges differ."""
        return shared_judges_row(row, self.judges) if self.judges_differ else row

    def add_a(self, row: CaseRow, *, in_b: bool, first: bool) -> None:
        """A row of run A: whether run B has its case id, and whether it is the first row of its case id in
        run A."""
        self.ids_a += first
        if in_b:
            self._over_a.add(row, self._verdict(row))
        else:
            self._a_only = True

    def add_b(self, row: CaseRow, a_row: CaseRow | None) -> None:
        """A row of run B and the row of run A with its case id (the last one), ``None`` when run A has none."""
        self.rows_b += 1
        if a_row is None:
            return
        self.shared += 1
        self._over_b.add(row, vb := self._verdict(row))
        if self.judges_differ and not self.judges:
            return  # no shared judge: no verdict to compare
        va, row = self._verdict(a_row), vb
        if va.passed != row.passed:
            case = FlippedCase(case_id=row.case_id, reason_a=va.reason, reason_b=row.reason)
            self._flipped("pass_to_fail" if va.passed else "fail_to_pass", case)
        elif not row.passed and (drops := dropped_scores(va, row, self.score_drop)):
            drop = ScoreDrop(case_id=row.case_id, reason_a=va.reason, reason_b=row.reason, judges=drops)
            self._flipped("score_drops", drop)

    def result(
        self,
        pass_to_fail: list[FlippedCase] | None = None,
        fail_to_pass: list[FlippedCase] | None = None,
        score_drops: list[ScoreDrop] | None = None,
    ) -> RunComparison:
        """The comparison of the rows added, with these flipped-case lists (empty when the cases went
        elsewhere)."""
        a, b = self.a, self.b
        shared = self.shared
        same_cases = a.test_set == b.test_set and not self._a_only and shared == self.rows_b
        pa: float | None
        pb: float | None
        ca: float | None
        cb: float | None
        warnings: list[str] = []
        if same_cases and not self.judges_differ:
            pa, ca, ma = a.pass_rate, a.coverage, dict(a.averages)
            pb, cb, mb = b.pass_rate, b.coverage, dict(b.averages)
        elif same_cases:
            pa, ca, ma = self._over_a.figures()
            pb, cb, mb = self._over_b.figures()
        else:
            what = (
                f"different test sets ({a.test_set} and {b.test_set})"
                if a.test_set != b.test_set
                else f"different cases of test set {a.test_set}"
            )
            warnings.append(
                ("no shared cases: " if not shared else "")
                + f"runs {a.run_id} and {b.run_id} replayed {what}: comparing the {shared} shared case(s) only "
                f"({self.ids_a - shared} only in {a.run_id}, {self.rows_b - shared} only in {b.run_id})"
            )
            pa, ca, ma = self._over_a.figures()
            pb, cb, mb = self._over_b.figures()
        if self.judges_differ:
            warnings.append(_judges_warning(a.run_id, b.run_id, self.judges, self.only_a, self.only_b))
            if not self.judges:
                pa = pb = ca = cb = None
        warning = "; ".join(warnings) or None
        metrics = {"pass_rate": _delta(pa, pb), "coverage": _delta(ca, cb)}
        for name in dict.fromkeys([*ma, *mb]):
            metrics[name] = _delta(ma.get(name), mb.get(name))
        return RunComparison(
            run_a=a.run_id,
            run_b=b.run_id,
            test_set_a=a.test_set,
            test_set_b=b.test_set,
            shared_cases=shared,
            cases_differ=not same_cases,
            cases_only_a=0 if same_cases else self.ids_a - shared,
            cases_only_b=0 if same_cases else self.rows_b - shared,
            warning=warning,
            judges_compared=self.judges,
            judges_only_a=self.only_a,
            judges_only_b=self.only_b,
            metrics=metrics,
            pass_to_fail=pass_to_fail or [],
            fail_to_pass=fail_to_pass or [],
            score_drop=self.score_drop,
            score_drops=score_drops or [],
        )


def dropped_scores(a: CaseRow, b: CaseRow, at_least: float) -> dict[str, MetricDelta]:
    """Judge → scores of the judges that scored the case (``ok``) in both rows and whose score in ``b`` is
    ``at_least`` or more below the one in ``a`` (scores rounded to 6 decimals first, as the report's figures)."""
    out: dict[str, MetricDelta] = {}
    for name, jb in b.judgements.items():
        ja = a.judgements.get(name)
        if ja is None or ja.status is not JudgementStatus.OK or jb.status is not JudgementStatus.OK:
            continue
        if ja.score is None or jb.score is None:
            continue
        got = _delta(round(ja.score, 6), round(jb.score, 6))
        if got.delta is not None and -got.delta >= at_least:
            out[name] = got
    return out


class _Lists:
    """Flipped cases collected in two lists."""

    def __init__(self) -> None:
        self.pass_to_fail: list[FlippedCase] = []
        self.fail_to_pass: list[FlippedCase] = []
        self.score_drops: list[ScoreDrop] = []

    def __call__(self, kind: FlipKind, case: FlippedCase) -> None:
        if isinstance(case, ScoreDrop):
            self.score_drops.append(case)
        else:
            (self.pass_to_fail if kind == "pass_to_fail" else self.fail_to_pass).append(case)

    def result(self, fold: ComparisonFold) -> RunComparison:
        return fold.result(self.pass_to_fail, self.fail_to_pass, self.score_drops)


def compare_reports(a: RunReport, b: RunReport, *, score_drop: float = DEFAULT_SCORE_DROP) -> RunComparison:
    """Compare run ``a`` (baseline) with run ``b`` (candidate) from their in-memory rows (``cases``); a case
    that failed in both is listed when a judge's score dropped by ``score_drop`` or more."""
    flips = _Lists()
    fold = ComparisonFold(a, b, flips, score_drop=score_drop)
    ids_b = {c.case_id for c in b.cases}
    cases_a: dict[str, CaseRow] = {}
    for row in a.cases:
        fold.add_a(row, in_b=row.case_id in ids_b, first=row.case_id not in cases_a)
        cases_a[row.case_id] = row
    for row in b.cases:
        fold.add_b(row, cases_a.get(row.case_id))
    return flips.result(fold)


class _RunRows:
    """One run's case rows for :func:`compare_stored`: pages in run order (the stored rows, then the report's
    own ``cases``: all of them for ``case_source="report"``, else those of cases not in the store) and look-ups
    by case id."""

    def __init__(self, store: RunStore, report: RunReport, page: int, cursor: bool) -> None:
        self.store, self.report, self.page, self.cursor = store, report, page, cursor
        self.stored = report.case_source == "store"
        self._at: dict[str, list[int]] = {}  # case id → indexes in report.cases (rows already in memory)
        for i, row in enumerate(report.cases):
            self._at.setdefault(row.case_id, []).append(i)

    async def pages(self) -> AsyncIterator[tuple[list[CaseRow], int]]:
        """Every row in run order, a page at a time (the stored ones through one cursor), with the index of the
        page's first row in ``report.cases`` (−1: stored rows)."""
        if self.stored:
            pages = stored_case_row_pages(self.store, self.report.run_id, size=self.page, cursor=self.cursor)
            async for rows in pages:
                yield rows, -1
                del rows  # not held while the next page is read
        cases = self.report.cases
        for start in range(0, len(cases), self.page):
            yield cases[start : start + self.page], start

    async def _keys(self, ids: Collection[str]) -> list[tuple[str, str]]:
        """``(case id, trace id)`` of the stored rows of ``ids``, in run order."""
        if not self.stored or not ids:
            return []
        return await self.store.run_case_keys(self.report.run_id, sorted(ids))

    async def present(self, ids: Collection[str]) -> set[str]:
        """Which of ``ids`` the run has."""
        got = {case_id for case_id, _ in await self._keys(ids)}
        return got | {i for i in ids if i in self._at}

    async def firsts(self, ids: Collection[str]) -> dict[str, str]:
        """Case id → trace id of the first stored row of that case id, for ``ids`` the store has."""
        out: dict[str, str] = {}
        for case_id, trace_id in await self._keys(ids):
            out.setdefault(case_id, trace_id)
        return out

    def is_first(self, row: CaseRow, index: int, firsts: dict[str, str]) -> bool:
        """Whether ``row`` (a stored row when ``index`` < 0, else ``report.cases[index]``) is the first row of
        its case id in the run; ``firsts``: :meth:`firsts` of its page."""
        if index < 0:
            return firsts.get(row.case_id) == (row.trace_id or "")
        return row.case_id not in firsts and self._at[row.case_id][0] == index

    async def last_rows(self, ids: Collection[str]) -> dict[str, CaseRow]:
        """Case id → the last row of that case id in the run, for ``ids`` the run has."""
        stored = await stored_case_rows(self.store, self.report.run_id, ids) if self.stored else []
        out = {row.case_id: row for row in stored}
        for i in ids:
            at = self._at.get(i)
            if at:
                out[i] = self.report.cases[at[-1]]
        return out


async def compare_stored(
    store: RunStore,
    a: RunReport,
    b: RunReport,
    flipped: Callable[[FlipKind, FlippedCase], None] | None = None,
    *,
    page: int = PAGE,
    cursor: bool = True,
    score_drop: float = DEFAULT_SCORE_DROP,
) -> RunComparison:
    """Compare run ``a`` (baseline) with run ``b`` (candidate) reading their case rows from the store ``page``
    at a time: one pass over run A's rows (which of their case ids run B has, by key) and one over run B's
    (run A's row of each case id, by key), so memory holds about two pages whatever the runs' sizes. Each pass
    reads through one cursor while the look-ups use a second pooled connection; not ``cursor`` (a pool of one
    connection), through keyset pages (:func:`~ragpulse.runs.reports.stored_case_row_pages`). With
    ``flipped``, the flipped cases go there as they are found (the result's lists stay empty); without, into
    the result's lists (the score drops, :class:`ScoreDrop`, as kind ``score_drops``). Same result as
    :func:`compare_reports` of the full reports.

    Raises:
        StoreError: the store failed.
    """
    lists = _Lists()
    fold = ComparisonFold(a, b, flipped or lists, score_drop=score_drop)
    rows_a, rows_b = _RunRows(store, a, page, cursor), _RunRows(store, b, page, cursor)
    async for rows, start in rows_a.pages():
        ids = {row.case_id for row in rows}
        in_b = await rows_b.present(ids)
        firsts = await rows_a.firsts(ids)
        for k, row in enumerate(rows):
            first = rows_a.is_first(row, start + k if start >= 0 else -1, firsts)
            fold.add_a(row, in_b=row.case_id in in_b, first=first)
        del rows  # not held while the next page is read
    async for rows, _ in rows_b.pages():
        last_a = await rows_a.last_rows({row.case_id for row in rows})
        for row in rows:
            fold.add_b(row, last_a.get(row.case_id))
        del rows, last_a
    return lists.result(fold)


class FlippedSpool:
    """Flipped cases written to temporary files (one JSON line each) as a comparison finds them: ``counts`` per
    kind, read back in order with :meth:`read` / :meth:`json_lines`. A context manager (closes the files)."""

    def __init__(self) -> None:
        self._files: dict[FlipKind, IO[str]] = {
            kind: tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")  # noqa: SIM115 (closed by close)
            for kind in FLIP_KINDS
        }
        self.counts: dict[FlipKind, int] = dict.fromkeys(FLIP_KINDS, 0)

    def __call__(self, kind: FlipKind, case: FlippedCase) -> None:
        self._files[kind].write(json.dumps(case.model_dump(mode="json"), ensure_ascii=False) + "\n")
        self.counts[kind] += 1

    def json_lines(self, kind: FlipKind) -> Iterator[str]:
        """The JSON form of each spooled case of ``kind``, in order."""
        f = self._files[kind]
        f.flush()
        f.seek(0)
        for line in f:
            yield line.rstrip("\n")

    def read(self, kind: FlipKind) -> Iterator[FlippedCase]:
        """The spooled cases of ``kind``, in order (:class:`ScoreDrop` for ``score_drops``)."""
        model = ScoreDrop if kind == "score_drops" else FlippedCase
        for line in self.json_lines(kind):
            yield model.model_validate_json(line)

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    def __enter__(self) -> FlippedSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_comparison_json(cmp: RunComparison, spool: FlippedSpool, out: TextIO) -> None:
    """Write the JSON form of ``cmp`` (:meth:`RunComparison.to_json`, one line) with the flipped cases read from
    ``spool`` as they are written: the same document as ``json.dumps(cmp.to_json())`` of a comparison holding
    them."""
    doc = cmp.to_json()
    for kind in FLIP_KINDS:
        doc.pop(kind, None)
    out.write(json.dumps(doc, ensure_ascii=False, default=str)[:-1])
    for kind in FLIP_KINDS:
        out.write(f', "{kind}": [')
        sep = ""
        for line in spool.json_lines(kind):
            out.write(sep + line)
            sep = ", "
        out.write("]")
    out.write("}\n")
