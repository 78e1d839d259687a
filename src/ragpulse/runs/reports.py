"""The run report of a replay: pass rate, coverage, per-judge averages, counts, tokens, per-case rows.

Definitions (issue 3):

- A judgement is **scored** when its status is ``ok`` (it has a 0–1 score and ``passed``).
- A **case passes** when it has at least one scored judgement, every scored judgement passed, no judgement
  is an ``error`` (a judge that could not answer leaves the case undecided: with the judge model down, a run
  must not pass on the judges that need no model) and no judgement was skipped for want of an answer
  (``no_answer``: the RAG system gave none, so the case never passes on the retrieval judges alone) or
  because the answer abstained (``abstained``).
- A case's **verdict** (``CaseRow.verdict``): ``pass``; ``fail`` when a scored judgement failed and the answer
  did not abstain; else ``not_judged`` (abstained, only error/skipped judgements besides passing ones, or not
  evaluable): skipped and error judgements are never failures. ``cases_not_judged`` counts the last; the
  failing cases are ``cases_total − cases_passed − cases_not_judged``.
- A case is **abstained** when a judge skipped it because the answer declined to answer ("I don't know",
  reason ``abstained``): not a pass, not a fail, left out of the pass rate (``cases_abstained``).
- ``pass_rate`` = passed cases / (all cases − abstained cases); ``coverage`` = cases with ≥ 1 scored judgement /
  all cases. Both are 0.0 when there is no case to divide by. Any other unscored case is never a pass and is
  never dropped from the totals.
- ``averages[judge]`` = mean score of the judge over the cases it scored (``None`` when it scored none).
- ``counts`` = ``pass`` / ``fail`` / ``error`` / ``abstained`` / ``skipped`` over judgements (``abstained``:
  skipped because the answer abstained; not in ``skipped``). A case that was not evaluable
  (no question, no answer) ran no judge; it counts as ``skipped`` once for every judge that would have run.
  A case without an answer that the retrieval judges (``needs_answer = False``) could judge is ``evaluated``:
  its answer-needing judges have ``skipped``/``no_answer`` judgements, counted like any other; the case is
  scored on the retrieval judges alone but never passes (the answer judges' ``no_answer``), and those answer
  judges' ``coverage`` shows the gap; a run of retrieval judges only has no such skip and its cases can pass.
- ``tokens`` = judge-model tokens (``prompt``, ``completion``) summed over all judgements.
- ``judges_added`` = judges added to ``enabled_judges`` for this test set because it can measure retrieval
  (:mod:`ragpulse.judges.selection`; empty when the user chose the judges or none were added).
- ``judges[judge]`` = per-judge detail: ``mean``, ``pass_rate`` (passed / scored), ``coverage`` (scored / all
  cases), ``scored`` and the four counts.
- ``cases`` = one row per case: ``case_id``, ``trace_id``, ``outcome``, ``passed``, ``scored``, ``reason``
  (why it failed or was not scored: failed and errored judgements first, then skipped ones) and ``judgements`` (judge → ``score``, ``passed``, ``status``, ``reason``).
- ``retrieval_misses`` / ``generation_errors`` = unsupported claims of failing faithfulness judgements that a
  reference context the retrieval missed supports / that no reference context supports, summed from the
  stored ``flags.attribution`` (:mod:`ragpulse.judges.answer.attribution`); per judge in ``judges[judge]``
  for judges that check claims (``None`` for the others), and over all judges at the top.
- ``diagnosis`` = which side is weak, retrieval or generation, per case and overall
  (:func:`ragpulse.runs.diagnosis.diagnose` of the case rows).

The report is a :class:`~ragpulse.runs.report_model.RunReport` (pydantic), computed by
:class:`ReportBuilder` one case at a time. A replay's report leaves its per-case rows in the store
(``case_source="store"``: the runs table stores :meth:`~ragpulse.runs.report_model.RunReport.to_json`
without them); :func:`iter_case_rows` / :func:`case_rows_page` read them back (the same :func:`case_row` of each
stored result) and :func:`write_report_json` writes the ``--json`` document with every row and case diagnosis.

Scores and rates are rounded to 6 decimals, ``wall_seconds`` to 3.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from typing import Protocol, TextIO

from ragpulse.calibration.correction import corrected_pass_rate
from ragpulse.calibration.live import ProfileStore, counts_of
from ragpulse.model import (
    ABSTAINED,
    NO_ANSWER,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    RunStatus,
    TraceOutcome,
    TraceResult,
)
from ragpulse.protocols import RunStore
from ragpulse.runs.diagnosis import DiagnosisTally, diagnose_case
from ragpulse.runs.report_model import (
    CaseJudgement,
    CaseRow,
    ClaimCauses,
    CorrectedRate,
    Counts,
    JudgeStats,
    RunReport,
    Tokens,
)
from ragpulse.runs.runner import CaseResult

__all__ = [
    "CAUSE_KEYS",
    "COUNT_KEYS",
    "REPORT_KEYS",
    "ReportBuilder",
    "RowKey",
    "build_report",
    "case_row",
    "case_rows_page",
    "full_report",
    "iter_case_rows",
    "run_status",
    "shared_judges_row",
    "stored_case",
    "stored_case_row_pages",
    "stored_case_rows",
    "with_corrected",
    "write_report_json",
]

#: Keys every report's JSON form has (the ``--json`` interface of ``ragpulse replay``).
REPORT_KEYS = (
    "run_id",
    "test_set",
    "cases_total",
    "pass_rate",
    "coverage",
    "averages",
    "counts",
    "tokens",
    "wall_seconds",
)
COUNT_KEYS = ("pass", "fail", "error", "abstained", "skipped")
#: Claim-cause counts of the report (run level and per claim-checking judge).
CAUSE_KEYS = ("retrieval_misses", "generation_errors")


def _r(x: float) -> float:
    return round(x, 6)


class _Verdict(Protocol):
    """What a case's verdict reads of one judgement (a :class:`~ragpulse.model.Judgement` or a
    :class:`~ragpulse.runs.report_model.CaseJudgement`)."""

    @property
    def status(self) -> JudgementStatus: ...
    @property
    def passed(self) -> bool | None: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def reason_code(self) -> str: ...
    @property
    def outcome(self) -> str: ...


def _case_verdict(js: Sequence[tuple[str, _Verdict]]) -> tuple[bool, int, bool, str | None]:
    """``(passed, scored, abstained, reason)`` of a case judged by ``js`` (judge name, judgement), by the
    module docstring's rules; ``reason`` is ``None`` for a pass."""
    scored = [j for _, j in js if j.status is JudgementStatus.OK]
    errored = any(j.status is JudgementStatus.ERROR for _, j in js)
    skips = {j.reason_code for _, j in js if j.status is JudgementStatus.SKIPPED}
    abstained = ABSTAINED in skips
    # A judge that could not answer leaves the case undecided: it never passes on the other judges alone; nor
    # does a case without an answer (the retrieval judges alone) or whose answer abstained.
    passed = (
        bool(scored)
        and all(j.passed for j in scored)
        and not errored
        and not (skips & {ABSTAINED, NO_ANSWER})
    )
    if passed:
        return passed, len(scored), abstained, None
    bad = [(name, j) for name, j in js if j.status is not JudgementStatus.OK or not j.passed]
    if not abstained and any(not j.passed for j in scored):
        # a failing case: failures and errors first, skipped judgements (e.g. no_answer) last
        bad.sort(key=lambda nj: nj[1].status is JudgementStatus.SKIPPED)
    else:  # a case not judged: why first (abstained, errors, other skips), failures of an abstained answer last
        order = {JudgementStatus.ERROR: 1, JudgementStatus.SKIPPED: 2, JudgementStatus.OK: 4}
        bad.sort(key=lambda nj: order[nj[1].status] - 2 * (nj[1].reason_code == ABSTAINED))
    reason = "; ".join(f"{name}: {j.reason or j.outcome}" for name, j in bad) or "no_judgements"
    return passed, len(scored), abstained, reason


def shared_judges_row(row: CaseRow, judges: Collection[str]) -> CaseRow:
    """``row`` as if the case had been judged by ``judges`` only (for comparing runs that ran different
    judges): ``judgements`` cut to those judges and ``passed``, ``scored``, ``abstained``, ``reason`` decided
    again from them (:func:`case_row`'s rules). A row with no judgement outside ``judges``, or of a case that
    was not evaluated (no judgements; its reason is the outcome's), is returned as it is."""
    if row.outcome is not TraceOutcome.EVALUATED or row.judgements.keys() <= set(judges):
        return row
    kept = {name: j for name, j in row.judgements.items() if name in judges}
    passed, scored, abstained, reason = _case_verdict(list(kept.items()))
    return row.model_copy(
        update={
            "judgements": kept,
            "passed": passed,
            "scored": scored,
            "abstained": abstained,
            "reason": reason,
        }
    )


def case_row(c: CaseResult) -> CaseRow:
    """The report row of one case (see the module docstring: ``passed``, ``scored``, ``reason`` …)."""
    js = c.result.judgements
    passed, n_scored, abstained, reason = _case_verdict([(j.judge, j) for j in js])
    scored = [j for j in js if j.status is JudgementStatus.OK]
    if c.result.outcome in (TraceOutcome.NOT_EVALUABLE, TraceOutcome.NOT_SAMPLED):
        reason = c.note or c.result.outcome_reason or c.result.outcome.value
    if not c.stored:  # the runner's note names the case's file:line when known ("store_failed: f.jsonl:2")
        head = c.note if c.note and c.note.startswith("store_failed") else "store_failed"
        reason = f"{head}; {reason}" if reason and reason != head else head
    return CaseRow(
        case_id=c.case_id,
        trace_id=c.result.trace.trace_id,
        outcome=c.result.outcome,
        passed=passed,
        scored=n_scored,
        reason=reason,
        claim_causes=_claim_causes(scored),
        abstained=abstained,
        judgements={
            j.judge: CaseJudgement(
                score=None if j.score is None else _r(j.score),
                passed=j.passed,
                status=j.status,
                reason=j.reason,
            )
            for j in js
        },
    )


def _cause_counts(flags: JudgementFlags) -> dict[str, int]:
    """The claim-cause counts of one judgement's ``flags.attribution`` (:data:`CAUSE_KEYS` that hold an
    integer; empty without attribution)."""
    causes = (flags.model_extra or {}).get("attribution")
    if not isinstance(causes, dict):
        return {}
    return {key: n for key in CAUSE_KEYS if isinstance(n := causes.get(key), int) and not isinstance(n, bool)}


def _claim_causes(scored: Sequence[Judgement]) -> ClaimCauses | None:
    """The claim causes of the failing judgements among ``scored``, summed; ``None`` when none of them
    decided a cause."""
    misses = errors = 0
    for j in scored:
        if not j.passed:
            counts = _cause_counts(j.flags)
            misses += counts.get("retrieval_misses", 0)
            errors += counts.get("generation_errors", 0)
    return ClaimCauses(retrieval_misses=misses, generation_errors=errors) if misses or errors else None


class _Tally:
    def __init__(self) -> None:
        self.sum = 0.0
        self.counts = dict.fromkeys(COUNT_KEYS, 0)
        self.claims = False  # the judge checks claims (``flags.claims``)
        self.causes = dict.fromkeys(CAUSE_KEYS, 0)

    def add_causes(self, flags: JudgementFlags) -> None:
        """Count the claim causes of one judgement (``flags.attribution``)."""
        self.claims = self.claims or isinstance((flags.model_extra or {}).get("claims"), list)
        for key, n in _cause_counts(flags).items():
            self.causes[key] += n


class ReportBuilder:
    """Folds a run's cases into its :class:`RunReport` one case at a time (see the module docstring for every
    number): the one computation behind a live replay, a ``--via`` replay and a report computed from stored
    results.

    With ``keep_rows=False`` (a replay, or stored results) memory stays constant: a case's row is not kept
    unless the case is not in the store (``stored=False``); the report then says ``case_source="store"`` and
    its rows are read back page by page (:func:`iter_case_rows`, :func:`case_rows_page`). ``keep_rows=True``
    keeps every row in ``cases`` (``case_source="report"``).

    Adding an aggregate: a field on :class:`~ragpulse.runs.report_model.RunReport` and one line in
    :meth:`add` (its per-case value) and :meth:`report` (the field's value).
    """

    def __init__(self, judges: Sequence[str], *, keep_rows: bool = True) -> None:
        self.names = list(dict.fromkeys(judges))
        self.keep_rows = keep_rows
        self._per = {n: _Tally() for n in self.names}
        self._counts = dict.fromkeys(COUNT_KEYS, 0)
        self._prompt = self._completion = 0
        self.total = self.passed = self.not_judged = self._covered = self.abstained = 0
        self.with_errors = False
        self._rows: list[CaseRow] = []
        self._diagnosis = DiagnosisTally(keep_cases=keep_rows)

    def add(self, c: CaseResult) -> CaseRow:
        """Count case ``c`` (cases in test-set order) and return its row."""
        row = case_row(c)
        if self.keep_rows or not c.stored:
            self._rows.append(row)
        self._diagnosis.add(row)
        self.total += 1
        self.passed += row.passed
        self.not_judged += row.verdict == "not_judged"
        self.abstained += row.abstained
        self._covered += row.scored > 0
        js = c.result.judgements
        if not c.stored or c.note or c.result.outcome is TraceOutcome.NOT_SAMPLED:
            self.with_errors = True
        if c.result.outcome is TraceOutcome.NOT_EVALUABLE and not js:
            for name in c.judges:
                self._tally(name).counts["skipped"] += 1
                self._counts["skipped"] += 1
            return row
        for j in js:
            p = self._tally(j.judge)
            p.counts[j.outcome] += 1
            self._counts[j.outcome] += 1
            if j.status is JudgementStatus.OK and j.score is not None:
                p.sum += j.score
            elif j.status is JudgementStatus.ERROR:
                self.with_errors = True
            p.add_causes(j.flags)
            self._prompt += j.prompt_tokens
            self._completion += j.completion_tokens
        return row

    def _tally(self, name: str) -> _Tally:
        p = self._per.get(name)
        if p is None:
            p = self._per[name] = _Tally()
            self.names.append(name)
        return p

    def report(
        self,
        *,
        run_id: str,
        test_set: str,
        wall_seconds: float,
        status: RunStatus | None = None,
        judges_added: Sequence[str] = (),
        via: str | None = None,
    ) -> RunReport:
        """The report of the cases added so far (``status`` ``None``: :func:`run_status` of them)."""
        total = self.total
        detail: dict[str, JudgeStats] = {}
        for name, p in self._per.items():
            scored = p.counts["pass"] + p.counts["fail"]
            detail[name] = JudgeStats(
                mean=_r(p.sum / scored) if scored else None,
                pass_rate=_r(p.counts["pass"] / scored) if scored else None,
                coverage=_r(scored / total) if total else 0.0,
                scored=scored,
                **p.counts,
                **(p.causes if p.claims else {}),
            )
        if status is None:
            status = RunStatus.COMPLETED_WITH_ERRORS if self.with_errors else RunStatus.COMPLETED
        return RunReport(
            run_id=run_id,
            test_set=test_set,
            status=status,
            cases_total=total,
            cases_passed=self.passed,
            cases_not_judged=self.not_judged,
            cases_abstained=self.abstained,
            pass_rate=_r(self.passed / decided) if (decided := total - self.abstained) else 0.0,
            coverage=_r(self._covered / total) if total else 0.0,
            averages={name: d.mean for name, d in detail.items()},
            counts=Counts(**self._counts),
            tokens=Tokens(prompt=self._prompt, completion=self._completion),
            **{k: sum(p.causes[k] for p in self._per.values()) for k in CAUSE_KEYS},
            wall_seconds=round(wall_seconds, 3),
            judges=detail,
            judges_added=list(judges_added),
            cases=list(self._rows),
            case_source="report" if self.keep_rows else "store",
            diagnosis=self._diagnosis.diagnosis(),
            via=via,
        )


def build_report(
    *,
    run_id: str,
    test_set: str,
    cases: Iterable[CaseResult],
    judges: Sequence[str],
    wall_seconds: float,
    status: RunStatus | None = None,
    judges_added: Sequence[str] = (),
    via: str | None = None,
) -> RunReport:
    """Compute the run report with every case row in it (:class:`ReportBuilder` with ``keep_rows=True``).

    Args:
        run_id / test_set: identity of the run.
        cases: one entry per test case, in test-set order.
        judges: judge names of the run, in display order (judges met only in results are appended).
        wall_seconds: wall time of the run, seconds.
        status: the run status; ``None`` → :func:`run_status` of ``cases``.
        judges_added: judges added to the default list for this test set.
        via: ``kafka``/``otlp`` for a run sent through a running ``serve``.
    """
    b = ReportBuilder(judges)
    for c in cases:
        b.add(c)
    return b.report(
        run_id=run_id,
        test_set=test_set,
        wall_seconds=wall_seconds,
        status=status,
        judges_added=judges_added,
        via=via,
    )


def run_status(cases: Sequence[CaseResult]) -> RunStatus:
    """``completed_with_errors`` when any case failed to store, had a pre-judging problem (``note``), was not
    judged because it was not sampled (a replay must judge every case) or has an ``error`` judgement; else
    ``completed``."""
    for c in cases:
        if not c.stored or c.note or c.result.outcome is TraceOutcome.NOT_SAMPLED:
            return RunStatus.COMPLETED_WITH_ERRORS
        if any(j.status is JudgementStatus.ERROR for j in c.result.judgements):
            return RunStatus.COMPLETED_WITH_ERRORS
    return RunStatus.COMPLETED


def stored_case(result: TraceResult, judges: Iterable[str]) -> CaseResult:
    """The :class:`CaseResult` of a result judged by another process (``serve`` for ``--via``, or read back
    from the store): its judges are those that judged it, or ``judges`` (the run's) when none did."""
    return CaseResult(
        case_id=result.trace.test_case_id or result.trace.trace_id,
        result=result,
        judges=tuple(j.judge for j in result.judgements) or tuple(judges),
    )


#: ``(position, trace_id)``: a case row's place in its run (the store's keyset key).
RowKey = tuple[int, str]


async def iter_case_rows(store: RunStore, report: RunReport, *, chunk: int = 1000) -> AsyncIterator[CaseRow]:
    """Every case row of ``report`` in run order: its own ``cases`` (``case_source="report"``), or the run's
    stored results read through the store's cursor (``chunk`` rows at a time) followed by the rows of cases that
    are not in the store (``case_source="store"``). Memory stays bounded by the store's chunk.

    Raises:
        StoreError: the store failed.
    """
    if report.case_source == "store":
        async with contextlib.aclosing(store.iter_run_results(report.run_id, chunk=chunk)) as results:
            async for r in results:
                yield case_row(stored_case(r, ()))
    for row in report.cases:
        yield row


async def stored_case_row_pages(
    store: RunStore, run_id: str, *, size: int = 500, cursor: bool = True
) -> AsyncIterator[list[CaseRow]]:
    """The rows of run ``run_id``'s stored results in run order, ``size`` at a time: read through one cursor
    (:meth:`~ragpulse.protocols.RunStore.iter_run_results`, ``size`` rows a fetch, one query whatever the run's
    size, like :func:`iter_case_rows`), which holds a pooled connection until the last page, so queries made
    meanwhile (look-ups between pages) use another one; or, not ``cursor``, one keyset query a page
    (:meth:`~ragpulse.protocols.RunStore.run_results_page`: no connection held between pages, for a pool of one
    connection; each page is an index walk while the table statistics are current, a pass over the run's cases
    when they are stale).

    Raises:
        StoreError: the store failed.
    """
    if not cursor:
        after: RowKey | None = None
        while True:
            got = await store.run_results_page(run_id, after=after, limit=size)
            last = len(got) < size
            after = got[-1][0] if got else None
            page = [case_row(stored_case(r, ())) for _, r in got]
            del got  # a page's results and rows are not held while the next one is read
            if page:
                yield page
            del page
            if last:
                return
    rows: list[CaseRow] = []
    async with contextlib.aclosing(store.iter_run_results(run_id, chunk=size)) as results:
        async for r in results:
            rows.append(case_row(stored_case(r, ())))
            if len(rows) == size:
                yield rows
                rows = []  # a page is not held while the next one is read
    if rows:
        yield rows


async def stored_case_rows(store: RunStore, run_id: str, case_ids: Collection[str]) -> list[CaseRow]:
    """The rows of run ``run_id``'s stored results whose case id is one of ``case_ids`` (all of them when
    several traces share a case id), in run order, read by key (not a pass over the run).

    Raises:
        StoreError: the store failed.
    """
    if not case_ids:
        return []
    return [case_row(stored_case(r, ())) for r in await store.run_results_by_case(run_id, sorted(case_ids))]


async def case_rows_page(
    store: RunStore,
    report: RunReport,
    *,
    after: RowKey | None = None,
    limit: int = 200,
    offset: int = 0,
    failing: bool = False,
    not_judged: bool = False,
) -> tuple[list[CaseRow], RowKey | None]:
    """One page of ``report``'s case rows in run order: up to ``limit`` rows after key ``after`` (skipping
    ``offset`` more), only those with verdict ``fail`` when ``failing``, only those with verdict
    ``not_judged`` when ``not_judged``; and the key to pass as ``after`` for the next page (``None`` on the
    last page). With ``case_source="store"`` the rows of cases that are not in the store come on the last page
    (which may then hold more than ``limit`` rows).

    Raises:
        StoreError: the store failed.
    """
    wanted = "fail" if failing else "not_judged" if not_judged else None
    if report.case_source == "report":
        rows = [r for r in report.cases if wanted is None or r.verdict == wanted]
        start = (after[0] + 1 if after else 0) + offset
        page = rows[start : start + limit]
        end = start + len(page)
        return page, ((end - 1, "") if end < len(rows) else None)
    unstored = [r for r in report.cases if wanted is None or r.verdict == wanted]
    expected = report.cases_failing if failing else report.cases_not_judged if not_judged else None
    if report.cases_passed is not None and expected is not None and expected <= len(unstored):
        return unstored, None  # no stored case of that verdict: nothing to look for (a scan of the whole run)
    got = await store.run_results_page(
        report.run_id, after=after, limit=limit + 1, offset=offset, failing=failing, not_judged=not_judged
    )
    page = [case_row(stored_case(r, ())) for _, r in got[:limit]]
    if len(got) > limit:
        return page, got[limit - 1][0]
    return page + unstored, None


async def write_report_json(store: RunStore, report: RunReport, out: TextIO) -> None:
    """Write ``report``'s JSON form (:meth:`RunReport.to_json`, one line) to ``out`` with every case row and,
    when the report has a diagnosis, every case's diagnosis: the case list is written row by row as it is read
    from the store (:func:`iter_case_rows`; case diagnoses are spooled to a temporary file meanwhile), so a
    100,000-case report is never built in memory. The document has the same keys as before the rows moved
    to the store (``cases``, ``diagnosis.cases``), and no ``case_source``.

    Raises:
        StoreError: the store failed (part of the document may have been written).
    """
    doc = report.to_json()
    doc.pop("case_source", None)
    if report.case_source == "report":
        out.write(json.dumps(doc, ensure_ascii=False) + "\n")
        return
    doc.pop("cases", None)
    diagnosis = doc.pop("diagnosis", None)
    out.write(json.dumps(doc, ensure_ascii=False)[:-1] + ', "cases": [')
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        sep = ""
        async for row in iter_case_rows(store, report):
            out.write(sep + json.dumps(row.model_dump(mode="json"), ensure_ascii=False))
            if diagnosis is not None:
                spool.write(sep + json.dumps(diagnose_case(row).model_dump(mode="json"), ensure_ascii=False))
            sep = ", "
        out.write("]")
        if diagnosis is not None:
            overall = json.dumps(diagnosis.get("overall", {}), ensure_ascii=False)
            out.write(f', "diagnosis": {{"overall": {overall}, "cases": [')
            spool.seek(0)
            shutil.copyfileobj(spool, out)
            out.write("]}")
    out.write("}\n")


async def full_report(store: RunStore, report: RunReport) -> RunReport:
    """``report`` with every case row (and case diagnosis) in memory (``case_source="report"``), for consumers
    that need them all at once (tests, small runs; ``runs compare`` and ``gate --junit`` stream instead:
    :func:`ragpulse.runs.compare.compare_stored`, :func:`ragpulse.runs.junit.write_junit`); ``report``
    itself when it already carries them. Memory grows with the number of cases.

    Raises:
        StoreError: the store failed.
    """
    if report.case_source == "report":
        return report
    rows = [r async for r in iter_case_rows(store, report)]
    diagnosis = report.diagnosis
    if diagnosis is not None:
        diagnosis = diagnosis.model_copy(update={"cases": [diagnose_case(r) for r in rows]})
    return report.model_copy(update={"cases": rows, "case_source": "report", "diagnosis": diagnosis})


async def with_corrected(store: ProfileStore, report: RunReport, versions: Mapping[str, str]) -> RunReport:
    """``report`` with ``judges.<name>.pass_rate_corrected`` for every judge whose version (from
    ``versions``, the run's ``{judge: version}``) has a calibration profile and a trustworthy figure (≥ 30
    scored cases); other judges are left as they are."""
    updated = {}
    for name, stats in report.judges.items():
        version = versions.get(name)
        profile = await store.latest_calibration_profile(name, version) if version else None
        if profile is None:
            continue
        est = corrected_pass_rate(stats.pass_, stats.scored, counts_of(profile))
        if est is not None:
            rate = CorrectedRate(value=est.value, lower=est.lower, upper=est.upper, profile=profile.name)
            updated[name] = stats.model_copy(update={"pass_rate_corrected": rate})
    if not updated:
        return report
    return report.model_copy(update={"judges": {**report.judges, **updated}})
