"""Runs as the portal shows them: the history page (filters, keyset pagination, progress) and one run with its
progress, gate result and report (shared by ``/api/v1/runs`` and the UI's Run history and Run evaluation)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from ragpulse.errors import BadRequest, NotFoundError
from ragpulse.query import DEFAULT_LIMIT, Page, decode_cursor, encode_cursor, time_key
from ragpulse.runs.diagnosis import diagnose_case
from ragpulse.runs.report_model import CaseRow
from ragpulse.runs.reports import RowKey, case_rows_page
from ragpulse.runs.stored import report_of
from ragpulse.store import PostgresStore

__all__ = ["CASES_PAGE", "Progress", "RunDetail", "RunItem", "case_page", "get_run", "list_runs"]

STATUSES = ("queued", "running", "completed", "completed_with_errors", "failed", "cancelled", "interrupted")


class Progress(BaseModel):
    """Cases done / total (``None`` for runs that do not report progress)."""

    done: int | None = None
    total: int | None = None


class RunItem(BaseModel):
    """A row of the run history."""

    run_id: str
    test_set: str
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    progress: Progress
    pass_rate: float | None = None
    coverage: float | None = None
    averages: dict[str, float | None] = {}
    judges: dict[str, str] = {}


class GateItem(BaseModel):
    """One ``fail_under`` threshold of the run and whether the run met it."""

    metric: str
    minimum: float
    actual: float | None
    met: bool


class RunDetail(RunItem):
    """One run: the history row plus its request, ``fail_under`` results and report (computed from the stored
    results while the run has none yet). ``report["cases"]`` holds the first :data:`CASES_PAGE` case rows
    (``report["diagnosis"]["cases"]`` their diagnoses; ``cases_next_cursor`` continues them through
    :func:`case_page`), ``failing_cases`` the first
    :data:`CASES_PAGE` cases that failed (verdict ``fail``; ``failing_next_cursor``), ``not_judged_cases`` the
    first :data:`CASES_PAGE` cases not judged (abstained, judge errors, skips: not failures;
    ``not_judged_next_cursor``)."""

    request: dict[str, Any] | None = None
    #: the judge model the run's judges asked (``None``: none — heuristic judges), from the run's settings
    judge_model: str | None = None
    fail_under: list[GateItem] = []
    report: dict[str, Any]
    cases_next_cursor: str | None = None
    failing_cases: list[CaseRow] = []
    failing_next_cursor: str | None = None
    not_judged_cases: list[CaseRow] = []
    not_judged_next_cursor: str | None = None


#: Case rows in one page of a run's detail.
CASES_PAGE = 200


def _item(row: dict[str, Any]) -> RunItem:
    run = row["run"]
    rep = run.report or {}
    done, total = row.get("progress_done"), row.get("progress_total")
    if run.status.value in ("completed", "completed_with_errors") and isinstance(rep.get("cases_total"), int):
        done = total = rep["cases_total"]  # finished: every case is done (progress is written every 0.25 s)
    return RunItem(
        run_id=run.run_id,
        test_set=run.test_set,
        status=run.status.value,
        started_at=run.started_at,
        finished_at=run.finished_at,
        progress=Progress(done=done, total=total),
        pass_rate=rep.get("pass_rate"),
        coverage=rep.get("coverage"),
        averages=rep.get("averages") or {},
        judges=_in_order(run.judges, run.settings.get("judge_order")),
    )


def _in_order(judges: dict[str, str], order: object) -> dict[str, str]:
    """``judges`` (name → version) in the run's judge order (its settings' ``judge_order``; PostgreSQL's
    ``jsonb`` keeps no key order), names it does not list after."""
    names = [n for n in order if isinstance(n, str) and n in judges] if isinstance(order, list) else []
    return {n: judges[n] for n in [*names, *(n for n in judges if n not in names)]}


async def list_runs(
    store: PostgresStore,
    *,
    test_set: str | None = None,
    status: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page[RunItem]:
    """Runs newest first (by start), optionally of one test set and/or status.

    Raises:
        BadRequest: an unknown status or a bad cursor.
    """
    if status is not None and status not in STATUSES:
        raise BadRequest(f"unknown status {status!r}: one of {', '.join(STATUSES)}")
    rows = await store.list_run_page(
        test_set=test_set, status=status, limit=limit + 1, after=time_key(cursor)
    )
    items = [_item(r) for r in rows[:limit]]
    nxt = None
    if len(rows) > limit:
        last = rows[limit - 1]["run"]
        nxt = encode_cursor([last.started_at, last.run_id])
    return Page[RunItem](items=items, next_cursor=nxt)


async def get_run(store: PostgresStore, run_id: str) -> RunDetail:
    """One run with progress, request, ``fail_under`` results (once finished) and report.

    Raises:
        NotFoundError: no such run.
    """
    from ragpulse.runs.gate import evaluate_gate, parse_thresholds

    row = await store.run_page_row(run_id)
    if row is None:
        raise NotFoundError(f"run {run_id[:100]!r} not found")
    run = row["run"]
    report = await report_of(store, run)
    item = _item(row)
    if not run.report:
        item = item.model_copy(
            update={"pass_rate": report.pass_rate, "coverage": report.coverage, "averages": report.averages}
        )
    request = row.get("request")
    gate: list[GateItem] = []
    specs = (request or {}).get("fail_under") or []
    if specs and run.report and "cases" in run.report:
        result = evaluate_gate(report, parse_thresholds(specs))
        gate = [
            GateItem(metric=o.metric, minimum=o.minimum, actual=o.actual, met=o.met)
            for o in result.thresholds
        ]
    rows, nxt = await case_rows_page(store, report, limit=CASES_PAGE)
    failing, failing_nxt = await case_rows_page(store, report, limit=CASES_PAGE, failing=True)
    unjudged, unjudged_nxt = await case_rows_page(store, report, limit=CASES_PAGE, not_judged=True)
    doc = report.to_json()
    doc.pop("case_source", None)
    doc["cases"] = [r.model_dump(mode="json") for r in rows]
    if isinstance(doc.get("diagnosis"), dict) and report.case_source == "store":  # the same page's diagnoses
        doc["diagnosis"]["cases"] = [diagnose_case(r).model_dump(mode="json") for r in rows]
    return RunDetail(
        **item.model_dump(),
        request=request,
        judge_model=model if isinstance(model := run.settings.get("judge_model"), str) else None,
        fail_under=gate,
        report=doc,
        cases_next_cursor=_cursor(nxt),
        failing_cases=failing,
        failing_next_cursor=_cursor(failing_nxt),
        not_judged_cases=unjudged,
        not_judged_next_cursor=_cursor(unjudged_nxt),
    )


def _cursor(key: RowKey | None) -> str | None:
    return None if key is None else encode_cursor(list(key))


async def case_page(
    store: PostgresStore,
    run_id: str,
    *,
    failing: bool = False,
    not_judged: bool = False,
    limit: int = CASES_PAGE,
    cursor: str | None = None,
) -> Page[CaseRow]:
    """A page of run ``run_id``'s case rows in run order (only the failing ones when ``failing``, only those
    not judged when ``not_judged``).

    Raises:
        NotFoundError: no such run.
        BadRequest: a bad cursor.
    """
    row = await store.run_page_row(run_id)
    if row is None:
        raise NotFoundError(f"run {run_id[:100]!r} not found")
    report = await report_of(store, row["run"])
    after: RowKey | None = None
    if cursor is not None:
        key = decode_cursor(cursor, 2)
        if not isinstance(key[0], int) or not isinstance(key[1], str):
            raise BadRequest(f"invalid cursor {cursor[:40]!r}")
        after = (key[0], key[1])
    rows, nxt = await case_rows_page(
        store, report, after=after, limit=limit, failing=failing, not_judged=not_judged
    )
    return Page[CaseRow](items=rows, next_cursor=_cursor(nxt))
