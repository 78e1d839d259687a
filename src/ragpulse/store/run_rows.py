"""A run's stored results one page at a time: the queries behind a report's per-case rows (issue 13 "Scale").

Order: the case's position in the run's test set (cases whose test case is not stored — runs sent with a run id
through Kafka/OTLP, or a test set changed since — last), then the trace id. A page's key is
``(position, trace_id)`` with position :data:`NO_POSITION` for those cases (keyset pagination: the next page
starts after the last key). Each result carries the judgements the run produced, one per judge name
(``run_judgements``, pinned while the run ran: a later ``rejudge`` never changes them), without the judge's raw
output, and of its trace only
what a report row needs (ids, app, scenario, source, ``test_set`` attribute; no texts:
``ragpulse trace ID`` shows those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ragpulse.model import Source, Trace, TraceOutcome, TraceResult
from ragpulse.store.migrate import Conn
from ragpulse.store.rows import Row, judgement_from_row

__all__ = [
    "ALL_ROWS",
    "NO_POSITION",
    "RunCaseKey",
    "fetch_by_case",
    "fetch_case_keys",
    "fetch_page",
    "with_judgements",
]

#: Position of a case that has none in the run's test set (sorts last).
NO_POSITION = 2147483647

#: ``(position, trace_id)``: where a case is in its run's order.
RunCaseKey = tuple[int, str]

# A case passes when it has a scored judgement, every scored one passed, none is an error and none was skipped
# for want of an answer or because the answer abstained (the report's definition, runs.reports.case_row), over
# the run's own judgement per judge (run_judgements, migration 240).
_PASSED = """coalesce((
  SELECT bool_or(l.status = 'ok')
     AND bool_and(CASE l.status WHEN 'ok' THEN l.passed WHEN 'error' THEN false
                  ELSE btrim(split_part(l.reason, ':', 1)) NOT IN ('abstained', 'no_answer') END)
  FROM run_judgements l WHERE l.run_id = rc.run_id AND l.trace_id = rc.trace_id), false)"""

# A case fails when a scored judgement failed and no judge skipped it because the answer abstained (the report's
# verdict ``fail``, runs.report_model.CaseRow.verdict); a case that neither passed nor failed is not judged.
_FAILED = """coalesce((
  SELECT bool_or(l.status = 'ok' AND l.passed IS FALSE)
     AND NOT bool_or(l.status = 'skipped' AND btrim(split_part(l.reason, ':', 1)) = 'abstained')
  FROM run_judgements l WHERE l.run_id = rc.run_id AND l.trace_id = rc.trace_id), false)"""

# The verdict filter of a page: NULL (every case), 'fail' or 'not_judged' (parameter ``{n}``).
_VERDICT = "(${n}::text IS NULL OR (NOT " + _PASSED + " AND " + _FAILED + " = (${n}::text = 'fail')))"

_FROM = """
FROM run_cases rc
JOIN traces t ON t.trace_id = rc.trace_id
LEFT JOIN runs r ON r.run_id = rc.run_id
LEFT JOIN test_cases tc ON tc.test_set = r.test_set AND tc.case_id = rc.test_case_id
WHERE rc.run_id = $1"""

_POS = f"coalesce(tc.position, {NO_POSITION})"

#: What a case row needs of a trace (not its texts): ids, routing, outcome and the ``test_set`` attribute.
_TRACE_COLUMNS = """t.trace_id, t.app, t.scenario, t.source, t.run_id, t.test_case_id, t.incomplete, t.outcome,
  t.outcome_reason, t.received_at, jsonb_build_object('test_set', t.attributes -> 'test_set') AS attributes"""

#: Every result of run ``$1`` in run order (read through a server-side cursor).
ALL_ROWS = f"SELECT {_TRACE_COLUMNS}, {_POS} AS case_pos {_FROM} ORDER BY case_pos, rc.trace_id"

_TEST_SET = "(SELECT r.test_set FROM runs r WHERE r.run_id = $1)"

# The cases of run $1 whose case id (the trace's test case id, else its trace id: a case row's ``case_id``) is
# one of $2 (distinct ids). Each id is looked up by index, in run_cases by test case id (run_cases_run_case_idx)
# and by trace id, so a page of ids costs its own rows whatever the run's size or the table statistics (the
# lateral subquery is not flattened into a join the planner could turn into a pass over the run); the trace's
# own test case id decides, and a case matches the one id equal to its case id.
_BY_CASE_FROM = """FROM unnest($2::text[]) AS k(id)
CROSS JOIN LATERAL (
  SELECT rc.run_id, rc.trace_id, rc.test_case_id FROM run_cases rc WHERE rc.run_id = $1 AND rc.test_case_id = k.id
  UNION
  SELECT rc.run_id, rc.trace_id, rc.test_case_id FROM run_cases rc WHERE rc.run_id = $1 AND rc.trace_id = k.id) rc
JOIN traces t ON t.trace_id = rc.trace_id AND coalesce(nullif(t.test_case_id, ''), t.trace_id) = k.id
LEFT JOIN runs r ON r.run_id = rc.run_id
LEFT JOIN test_cases tc ON tc.test_set = r.test_set AND tc.case_id = rc.test_case_id"""
_BY_CASE = f"SELECT {_TRACE_COLUMNS}, {_POS} AS case_pos {_BY_CASE_FROM} ORDER BY case_pos, rc.trace_id"
_KEYS_BY_CASE = f"SELECT k.id, rc.trace_id, {_POS} AS case_pos {_BY_CASE_FROM} ORDER BY case_pos, rc.trace_id"

# Cases of the run's test set, walked in position order (index test_cases_set_position_idx, migration 140):
# a page costs its own rows, not the run's.
_PAGE_PLACED = f"""SELECT rc.trace_id, tc.position AS case_pos
FROM test_cases tc JOIN run_cases rc ON rc.run_id = $1 AND rc.test_case_id = tc.case_id
WHERE tc.test_set = {_TEST_SET}
  AND ($2::integer IS NULL OR (tc.position >= $2::integer AND (tc.position, rc.trace_id) > ($2::integer, $3::text)))
  AND {_VERDICT.format(n=4)}
ORDER BY tc.position, rc.trace_id LIMIT $5 OFFSET $6"""

# The run's other cases (no test case in its set: sent with a run id, or the set changed), last, by trace id.
_UNPLACED = f"""FROM run_cases rc
WHERE rc.run_id = $1
  AND NOT EXISTS (SELECT 1 FROM test_cases tc WHERE tc.test_set = {_TEST_SET} AND tc.case_id = rc.test_case_id)
  AND ($2::text IS NULL OR rc.trace_id > $2::text)
  AND {_VERDICT.format(n=3)}"""
_PAGE_UNPLACED = (
    f"SELECT rc.trace_id, {NO_POSITION} AS case_pos {_UNPLACED} ORDER BY rc.trace_id LIMIT $4 OFFSET $5"
)
_COUNT_PLACED = f"""SELECT count(*)
FROM test_cases tc JOIN run_cases rc ON rc.run_id = $1 AND rc.test_case_id = tc.case_id
WHERE tc.test_set = {_TEST_SET}
  AND ($2::integer IS NULL OR (tc.position, rc.trace_id) > ($2::integer, $3::text))
  AND {_VERDICT.format(n=4)}"""

_TRACES = f"SELECT {_TRACE_COLUMNS} FROM traces t WHERE t.trace_id = ANY($1::text[])"

_JUDGEMENTS = """SELECT j.trace_id, j.judge, j.version, j.app, j.declared_version, j.backend, j.model, j.score,
  j.passed, j.threshold, j.status, j.reason, j.flags, NULL::text AS raw_output, j.latency_s, j.prompt_tokens,
  j.completion_tokens, j.created_at, j.updated_at
FROM run_judgements j WHERE j.run_id = $1 AND j.trace_id = ANY($2::text[])
ORDER BY j.trace_id, j.judge"""


async def with_judgements(
    conn: Conn, run_id: str, rows: Sequence[Row]
) -> list[tuple[RunCaseKey, TraceResult]]:
    """``rows`` (``traces`` rows with ``case_pos``) of run ``run_id`` as keyed results with the judgements that
    run produced (one query)."""
    if not rows:
        return []
    by_trace: dict[str, list[Any]] = {}
    for j in await conn.fetch(_JUDGEMENTS, run_id, [r["trace_id"] for r in rows]):
        by_trace.setdefault(j["trace_id"], []).append(j)
    return [((int(r["case_pos"]), r["trace_id"]), _result(r, by_trace.get(r["trace_id"], []))) for r in rows]


def _result(row: Row, judgements: Sequence[Row]) -> TraceResult:
    """A result with the trace's ids, routing fields and ``test_set`` attribute only (see the module doc)."""
    test_set = (row["attributes"] or {}).get("test_set")
    return TraceResult(
        trace=Trace(
            trace_id=row["trace_id"],
            app=row["app"],
            scenario=row["scenario"],
            source=Source(row["source"]),
            run_id=row["run_id"],
            test_case_id=row["test_case_id"],
            incomplete=row["incomplete"],
            attributes={} if test_set is None else {"test_set": test_set},
        ),
        outcome=TraceOutcome(row["outcome"]),
        outcome_reason=row["outcome_reason"],
        judgements=tuple(judgement_from_row(j) for j in judgements),
        received_at=row["received_at"],
    )


async def fetch_page(
    conn: Conn,
    run_id: str,
    *,
    after: RunCaseKey | None,
    limit: int,
    offset: int,
    verdict: Literal["fail", "not_judged"] | None = None,
) -> list[tuple[RunCaseKey, TraceResult]]:
    """Up to ``limit`` results of run ``run_id`` after key ``after`` (skipping ``offset`` more), only the cases
    of ``verdict`` when given (``fail``, ``not_judged``: ``ragpulse.runs.report_model.CaseVerdict``): first the cases placed in the run's test set (an index walk in position
    order), then the others."""
    keys: list[tuple[str, int]] = []
    placed_after = after if after is None or after[0] != NO_POSITION else None
    if after is None or after[0] != NO_POSITION:
        args = (run_id, placed_after[0] if placed_after else None, placed_after[1] if placed_after else None)
        keys = [
            (r["trace_id"], r["case_pos"])
            for r in await conn.fetch(_PAGE_PLACED, *args, verdict, limit, offset)
        ]
        if len(keys) == limit:
            return await _results(conn, run_id, keys)
        if offset and not keys:  # the offset may reach into the other cases
            offset = max(0, offset - int(await conn.fetchval(_COUNT_PLACED, *args, verdict)))
        else:
            offset = 0
    rest = await conn.fetch(
        _PAGE_UNPLACED,
        run_id,
        after[1] if after is not None and after[0] == NO_POSITION else None,
        verdict,
        limit - len(keys),
        offset,
    )
    return await _results(conn, run_id, keys + [(r["trace_id"], r["case_pos"]) for r in rest])


async def fetch_by_case(conn: Conn, run_id: str, case_ids: Sequence[str]) -> list[TraceResult]:
    """The results of run ``run_id`` whose case id is one of ``case_ids`` (every result of a case id that several
    traces share), in run order, with the run's judgements."""
    rows = await conn.fetch(_BY_CASE, run_id, sorted(set(case_ids)))
    return [r for _, r in await with_judgements(conn, run_id, rows)]


async def fetch_case_keys(conn: Conn, run_id: str, case_ids: Sequence[str]) -> list[tuple[str, str]]:
    """``(case id, trace id)`` of the results :func:`fetch_by_case` finds, in the same order (no trace, no
    judgement read)."""
    return [(r["id"], r["trace_id"]) for r in await conn.fetch(_KEYS_BY_CASE, run_id, sorted(set(case_ids)))]


async def _results(
    conn: Conn, run_id: str, keys: Sequence[tuple[str, int]]
) -> list[tuple[RunCaseKey, TraceResult]]:
    """The traces of ``keys`` (``(trace_id, position)`` in page order) with the run's judgements."""
    if not keys:
        return []
    rows = {r["trace_id"]: r for r in await conn.fetch(_TRACES, [k[0] for k in keys])}
    pos = dict(keys)
    got = await with_judgements(conn, run_id, [_Placed(rows[k[0]], pos[k[0]]) for k in keys if k[0] in rows])
    return got


class _Placed(dict[str, Any]):
    """A ``traces`` row with its ``case_pos``."""

    def __init__(self, row: Row, pos: int) -> None:
        super().__init__(row.items())
        self["case_pos"] = pos
