"""A run's stored results one page at a time: the queries behind a report's per-case rows (issue 13 "Scale").

Order: the case's position in the run's test set (cases whose test case is not stored — runs sent with a run id
through Kafka/OTLP, or a test set changed since — last), then the trace id. A page's key is
``(position, trace_id)`` with position :data:`NO_POSITION` for those cases (keyset pagination: the next page
starts after the last key). Each result carries the latest judgement per judge name (as
:meth:`~ragpulse.store.PostgresStore.get_run_results`), without the judge's raw output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragpulse.model import TraceResult
from ragpulse.store.migrate import Conn
from ragpulse.store.rows import Row, result_from_rows

__all__ = ["ALL_ROWS", "NO_POSITION", "RunCaseKey", "fetch_page", "with_judgements"]

#: Position of a case that has none in the run's test set (sorts last).
NO_POSITION = 2147483647

#: ``(position, trace_id)``: where a case is in its run's order.
RunCaseKey = tuple[int, str]

# A case passes when it has a scored judgement, every scored one passed and none is an error (the report's
# definition, services.reports.case_row), over the latest judgement per judge.
_PASSED = """coalesce((
  SELECT bool_or(l.status = 'ok')
     AND bool_and(CASE l.status WHEN 'ok' THEN l.passed WHEN 'error' THEN false ELSE true END)
  FROM (SELECT DISTINCT ON (j.judge) j.status, j.passed FROM judgements j WHERE j.trace_id = rc.trace_id
        ORDER BY j.judge, j.updated_at DESC, j.created_at DESC, j.version) l), false)"""

_FROM = """
FROM run_cases rc
JOIN traces t ON t.trace_id = rc.trace_id
LEFT JOIN runs r ON r.run_id = rc.run_id
LEFT JOIN test_cases tc ON tc.test_set = r.test_set AND tc.case_id = rc.test_case_id
WHERE rc.run_id = $1"""

_POS = f"coalesce(tc.position, {NO_POSITION})"

#: Every result of run ``$1`` in run order (read through a server-side cursor).
ALL_ROWS = f"SELECT t.*, {_POS} AS case_pos {_FROM} ORDER BY case_pos, rc.trace_id"

_PAGE = f"""SELECT t.*, {_POS} AS case_pos {_FROM}
  AND ($2::integer IS NULL OR ({_POS}, rc.trace_id) > ($2::integer, $3::text))
  AND (NOT $4::boolean OR NOT {_PASSED})
ORDER BY case_pos, rc.trace_id LIMIT $5 OFFSET $6"""

_JUDGEMENTS = """SELECT DISTINCT ON (j.trace_id, j.judge) j.trace_id, j.judge, j.version, j.app, j.declared_version,
  j.backend, j.model, j.score, j.passed, j.threshold, j.status, j.reason, j.flags, NULL::text AS raw_output,
  j.latency_s, j.prompt_tokens, j.completion_tokens, j.created_at, j.updated_at
FROM judgements j WHERE j.trace_id = ANY($1::text[])
ORDER BY j.trace_id, j.judge, j.updated_at DESC, j.created_at DESC, j.version"""


async def with_judgements(conn: Conn, rows: Sequence[Row]) -> list[tuple[RunCaseKey, TraceResult]]:
    """``rows`` (``traces`` rows with ``case_pos``) as keyed results with their latest judgements (one query)."""
    if not rows:
        return []
    by_trace: dict[str, list[Any]] = {}
    for j in await conn.fetch(_JUDGEMENTS, [r["trace_id"] for r in rows]):
        by_trace.setdefault(j["trace_id"], []).append(j)
    return [
        ((int(r["case_pos"]), r["trace_id"]), result_from_rows(r, by_trace.get(r["trace_id"], [])))
        for r in rows
    ]


async def fetch_page(
    conn: Conn, run_id: str, *, after: RunCaseKey | None, limit: int, offset: int, failing: bool
) -> list[tuple[RunCaseKey, TraceResult]]:
    """Up to ``limit`` results of run ``run_id`` after key ``after`` (skipping ``offset`` more), only the cases
    that did not pass when ``failing``."""
    rows = await conn.fetch(
        _PAGE,
        run_id,
        after[0] if after else None,
        after[1] if after else None,
        failing,
        limit,
        offset,
    )
    return await with_judgements(conn, rows)
