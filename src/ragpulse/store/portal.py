"""The portal's queries (issue 12): test-set and case management, the trace list with keyset pagination,
score statistics, dead letters and the run queue.

:class:`PortalQueries` is mixed into :class:`~ragpulse.store.postgres.PostgresStore`; each method runs one
function on a pooled connection through the store's error mapping (asyncpg/OS errors become
:class:`~ragpulse.errors.StoreError`). Indexes: ``migrations/012_portal.sql``.

Shapes: rows come back as plain dicts (column name → value; ``jsonb`` decoded, times UTC-aware); the service
layer (:mod:`ragpulse.portal`) turns them into its typed models.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from ragpulse.model import RunRecord, TestCase
from ragpulse.owner import OWNER_HOST
from ragpulse.store import catalog
from ragpulse.store.migrate import Conn
from ragpulse.store.rows import clean, run_from_row, utc

__all__ = ["JudgeFilter", "PortalQueries", "TraceQuery"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class JudgeFilter:
    """Traces with a judgement of ``judge`` (any version; of any judge when ``None``) matching ``outcome``
    (``pass``/``fail``/``error``/``abstained``/``skipped``, as :attr:`ragpulse.model.Judgement.outcome`) and a
    score in [``min_score``, ``max_score``] (each optional)."""

    judge: str | None = None
    outcome: str | None = None
    min_score: float | None = None
    max_score: float | None = None


@dataclass(frozen=True)
class TraceQuery:
    """Filters of the trace list (every field optional; ``None`` = no filter). Times are UTC; ``until`` is
    exclusive. ``q`` matches a substring of the question (case-insensitive); each of ``words`` must be a
    substring of the question or of the answer (case-insensitive; trigram indexes, migrations 170 and 221);
    ``min_latency_s``/``max_latency_s`` bound the trace's latency (seconds, inclusive). ``after`` is the keyset cursor
    ``(received_at, trace_id)`` of the last row of the previous page."""

    app: str | None = None
    scenario: str | None = None
    outcome: str | None = None
    source: str | None = None
    #: sources left out (live traffic leaves out ``replay`` and ``api``)
    exclude_sources: tuple[str, ...] = ()
    #: leave out the traces of runs (live traffic)
    no_runs: bool = False
    run_id: str | None = None
    session_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    q: str | None = None
    judge: JudgeFilter | None = None
    after: tuple[datetime, str] | None = None
    words: tuple[str, ...] = ()
    model: str | None = None
    min_latency_s: float | None = None
    max_latency_s: float | None = None


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class _Params:
    def __init__(self) -> None:
        self.values: list[Any] = []

    def add(self, v: Any) -> str:
        self.values.append(v)
        return f"${len(self.values)}"


def _trace_where(f: TraceQuery, p: _Params) -> str:
    cond: list[str] = []
    for col, val in (
        ("app", f.app),
        ("scenario", f.scenario),
        ("outcome", f.outcome),
        ("source", f.source),
        ("run_id", f.run_id),
        ("model", f.model),
        ("session_id", f.session_id),
    ):
        if val is not None:
            cond.append(f"t.{col} = {p.add(val)}")
    if f.exclude_sources:
        cond.append(f"t.source <> ALL({p.add(list(f.exclude_sources))}::text[])")
    if f.no_runs:
        cond.append("t.run_id IS NULL")
    if f.since is not None:
        cond.append(f"t.received_at >= {p.add(utc(f.since))}")
    if f.until is not None:
        cond.append(f"t.received_at < {p.add(utc(f.until))}")
    if f.q:
        cond.append(f"t.question ILIKE {p.add(_like(f.q))}")
    for word in f.words:
        w = p.add(_like(word))
        cond.append(f"(t.question ILIKE {w} OR t.answer ILIKE {w})")
    if f.min_latency_s is not None:
        cond.append(f"t.latency_s >= {p.add(f.min_latency_s)}")
    if f.max_latency_s is not None:
        cond.append(f"t.latency_s <= {p.add(f.max_latency_s)}")
    if f.after is not None:
        cond.append(f"(t.received_at, t.trace_id) < ({p.add(utc(f.after[0]))}, {p.add(f.after[1])})")
    if f.judge is not None:
        jc = ["TRUE"] if f.judge.judge is None else [f"j.judge = {p.add(f.judge.judge)}"]
        o = f.judge.outcome
        if o == "pass":
            jc.append("j.status = 'ok' AND j.passed")
        elif o == "fail":
            jc.append("j.status = 'ok' AND NOT j.passed")
        elif o == "error":
            jc.append("j.status = 'error'")
        elif o in (
            "abstained",
            "skipped",
        ):  # a skip whose reason code is `abstained` is the outcome `abstained`
            eq = "=" if o == "abstained" else "<>"
            jc.append(f"j.status = 'skipped' AND btrim(split_part(j.reason, ':', 1)) {eq} 'abstained'")
        if f.judge.min_score is not None:
            jc.append(f"j.score >= {p.add(f.judge.min_score)}")
        if f.judge.max_score is not None:
            jc.append(f"j.score <= {p.add(f.judge.max_score)}")
        cond.append(
            f"EXISTS (SELECT 1 FROM judgements j WHERE j.trace_id = t.trace_id AND {' AND '.join(jc)})"
        )
    return " AND ".join(cond) if cond else "TRUE"


#: A judgement's status, ``abstained`` for a skip whose reason code is ``abstained`` (the outcome of
#: :attr:`ragpulse.model.Judgement.outcome`): the score statistics and their hourly rollup count abstentions apart.
#: Rollup hours stored before this count them as ``skipped``.
_STATUS_OR_ABSTAINED = (
    "CASE WHEN status = 'skipped' AND btrim(split_part(reason, ':', 1)) = 'abstained' THEN 'abstained'"
    " ELSE status END"
)

#: Name of the score rollup in ``judgement_rollup_state`` and the key of its refresh lock.
_ROLLUP = "scores_hourly"
_ROLLUP_LOCK = 0x7270_726F_6C6C_7570  # "rprollup"


def _floor_hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def _ceil_hour(t: datetime) -> datetime:
    f = _floor_hour(t)
    return f if f == t else f + timedelta(hours=1)


def _run_page_row(r: Any) -> dict[str, Any]:
    return {
        "run": run_from_row(r),
        "progress_done": r["progress_done"],
        "progress_total": r["progress_total"],
        "request": r["request"],
    }


class PortalQueries:
    """Queries of the portal, mixed into ``PostgresStore`` (which provides ``_run``)."""

    async def _run(self, action: str, fn: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run ``fn(conn)`` on a pooled connection (implemented by ``PostgresStore``)."""
        raise NotImplementedError

    async def _q(self, action: str, fn: Callable[[Conn], Awaitable[_T]]) -> _T:
        return await self._run(action, fn)

    # -- test sets ------------------------------------------------------------------------------------------
    async def list_test_sets(
        self, *, knowledge_base: str | None, limit: int, after: tuple[datetime, str] | None
    ) -> list[dict[str, Any]]:
        """Test-set rows (``name``, ``knowledge_base``, ``description``, ``case_count``, ``created_at``,
        ``updated_at``), newest first, keyset ``after`` = ``(created_at, name)`` of the previous page's last."""

        async def q(conn: Conn) -> list[dict[str, Any]]:
            rows = await conn.fetch(
                """SELECT name, knowledge_base, description, case_count, created_at, updated_at
                   FROM test_sets
                   WHERE ($1::text IS NULL OR knowledge_base = $1)
                     AND ($2::timestamptz IS NULL OR (created_at, name) < ($2, $3))
                   ORDER BY created_at DESC, name DESC LIMIT $4""",
                knowledge_base,
                after[0] if after else None,
                after[1] if after else None,
                limit,
            )
            return [dict(r) for r in rows]

        return await self._q("list_test_sets", q)

    async def test_set_row(self, name: str) -> dict[str, Any] | None:
        """One test-set row (as :meth:`list_test_sets`) or ``None``."""

        async def q(conn: Conn) -> dict[str, Any] | None:
            r = await conn.fetchrow(
                """SELECT name, knowledge_base, description, case_count, created_at, updated_at
                   FROM test_sets WHERE name = $1""",
                name,
            )
            return dict(r) if r is not None else None

        return await self._q("test_set_row", q)

    async def create_test_set_row(
        self, name: str, knowledge_base: str | None, description: str | None
    ) -> bool:
        """Insert an empty test set; ``False`` when ``name`` exists already."""

        async def q(conn: Conn) -> bool:
            got = await conn.fetchval(
                """INSERT INTO test_sets (name, knowledge_base, description) VALUES ($1, $2, $3)
                   ON CONFLICT (name) DO NOTHING RETURNING name""",
                clean(name),
                clean(knowledge_base),
                clean(description),
            )
            return got is not None

        return await self._q("create_test_set", q)

    async def update_test_set_row(self, name: str, changes: dict[str, str | None]) -> bool:
        """Set ``knowledge_base`` and/or ``description`` (keys of ``changes``); ``False`` for an unknown set."""

        async def q(conn: Conn) -> bool:
            done = await conn.execute(
                """UPDATE test_sets SET
                     knowledge_base = CASE WHEN $2 THEN $3 ELSE knowledge_base END,
                     description = CASE WHEN $4 THEN $5 ELSE description END,
                     updated_at = now()
                   WHERE name = $1""",
                name,
                "knowledge_base" in changes,
                clean(changes.get("knowledge_base")),
                "description" in changes,
                clean(changes.get("description")),
            )
            return done != "UPDATE 0"

        return await self._q("update_test_set", q)

    async def delete_test_set_row(self, name: str) -> bool:
        """Delete a test set and its cases (runs keep their reports); ``False`` for an unknown set."""

        async def q(conn: Conn) -> bool:
            return await conn.execute("DELETE FROM test_sets WHERE name = $1", name) != "DELETE 0"

        return await self._q("delete_test_set", q)

    async def knowledge_bases(self) -> list[dict[str, Any]]:
        """``[{"name": kb, "test_sets": n}]`` for every knowledge base named by a test set, by name."""

        async def q(conn: Conn) -> list[dict[str, Any]]:
            rows = await conn.fetch(
                """SELECT knowledge_base AS name, count(*)::int AS test_sets FROM test_sets
                   WHERE knowledge_base IS NOT NULL GROUP BY knowledge_base ORDER BY knowledge_base"""
            )
            return [dict(r) for r in rows]

        return await self._q("knowledge_bases", q)

    # -- cases, one at a time (SQL in :mod:`ragpulse.store.catalog`) ----------------------------------------
    async def get_case(self, name: str, case_id: str) -> TestCase | None:
        """Case ``case_id`` of test set ``name``, or ``None``."""
        return await self._q("get_case", lambda c: catalog.get_case(c, name, case_id))

    async def case_page(self, name: str, *, after: int | None, limit: int) -> list[tuple[int, TestCase]]:
        """Up to ``limit`` ``(position, case)`` of test set ``name`` after position ``after``, in order."""
        return await self._q("case_page", lambda c: catalog.case_page(c, name, after, limit))

    async def insert_case(
        self, name: str, case: TestCase, *, max_cases: int, auto_id: bool = False
    ) -> tuple[catalog.CaseWrite, str]:
        """Append one case (:func:`ragpulse.store.catalog.insert_case`)."""
        return await self._q(
            "insert_case", lambda c: catalog.insert_case(c, name, case, max_cases=max_cases, auto_id=auto_id)
        )

    async def put_case(self, name: str, case: TestCase, *, max_cases: int) -> catalog.CaseWrite:
        """Create or replace one case (:func:`ragpulse.store.catalog.put_case`)."""
        return await self._q("put_case", lambda c: catalog.put_case(c, name, case, max_cases=max_cases))

    async def delete_case(self, name: str, case_id: str) -> str:
        """Delete one case: ``deleted``, ``no_case`` or ``no_set``."""
        return await self._q("delete_case", lambda c: catalog.delete_case(c, name, case_id))

    async def import_cases(
        self, name: str, cases: Sequence[TestCase], *, replace: bool, max_cases: int
    ) -> catalog.CaseImport:
        """Write imported cases in one transaction (:func:`ragpulse.store.catalog.import_cases`)."""
        return await self._q(
            "import_cases",
            lambda c: catalog.import_cases(c, name, cases, replace=replace, max_cases=max_cases),
        )

    # -- traces ---------------------------------------------------------------------------------------------
    async def list_trace_rows(
        self, f: TraceQuery, limit: int, *, in_session_order: bool = False
    ) -> list[dict[str, Any]]:
        """Trace rows matching ``f``, newest first (``received_at DESC, trace_id DESC``), at most ``limit``,
        each with ``question`` cut to 300 characters, the session id, the app's model and token usage
        (``usage`` per model) and ``judgements``: the latest judgement per judge (``judge``, ``status``,
        ``score``, ``passed``, ``threshold``, ``reason_code`` unless ``ok``). ``in_session_order``: oldest first
        instead, by start time (else time received), the order of a session's turns (``f.after`` is not used
        then)."""
        p = _Params()
        where = _trace_where(f, p)
        order = (
            "COALESCE(t.start_time, t.received_at), t.received_at, t.trace_id"
            if in_session_order
            else "t.received_at DESC, t.trace_id DESC"
        )
        sql = f"""SELECT t.trace_id, t.app, t.scenario, t.source, t.outcome, t.outcome_reason, t.received_at,
                         left(t.question, 300) AS question, t.redacted, t.run_id, t.test_case_id, t.latency_s,
                         t.session_id, t.start_time, t.model, t.prompt_tokens, t.completion_tokens,
                         t.total_prompt_tokens, t.total_completion_tokens, t.usage
                  FROM traces t WHERE {where}
                  ORDER BY {order} LIMIT {p.add(limit)}"""

        async def q(conn: Conn) -> list[dict[str, Any]]:
            rows = [dict(r) for r in await conn.fetch(sql, *p.values)]
            if not rows:
                return rows
            js = await conn.fetch(
                """SELECT DISTINCT ON (trace_id, judge) trace_id, judge, status, score, passed, threshold,
                          CASE WHEN status <> 'ok' THEN btrim(split_part(reason, ':', 1)) END AS reason_code
                   FROM judgements WHERE trace_id = ANY($1::text[])
                   ORDER BY trace_id, judge, updated_at DESC, created_at DESC""",
                [r["trace_id"] for r in rows],
            )
            by: dict[str, list[dict[str, Any]]] = {}
            for j in js:
                d = dict(j)
                by.setdefault(d.pop("trace_id"), []).append(d)
            for r in rows:
                r["judgements"] = by.get(r["trace_id"], [])
            return rows

        return await self._q("list_traces", q)

    # -- statistics -----------------------------------------------------------------------------------------
    async def score_counts(
        self,
        *,
        since: datetime,
        until: datetime,
        bounds: Sequence[float],
        judge: str | None,
        app: str | None,
        source: str | None,
        exclude_sources: Sequence[str],
        by_app: bool,
    ) -> list[dict[str, Any]]:
        """Judgement counts created in [``since``, ``until``) grouped by ``judge`` (and ``app`` when
        ``by_app``), ``status`` (``abstained`` for a ``skipped`` judgement whose answer abstained), ``passed`` and
        ``k`` = how many of ``bounds`` (ascending upper bounds) are
        ``>= score`` (``None`` unless ``status = ok``); each row also has ``n`` and ``score_sum``.

        Whole hours already in the hourly rollup (:meth:`refresh_score_rollup`, same ``bounds``) are read from
        it; the rest of the window from ``judgements``. Rows of both parts are returned (callers add them up).
        """
        neg = sorted(-b for b in bounds)
        raw = f"""SELECT judge, {"app" if by_app else "NULL::text AS app"}, {_STATUS_OR_ABSTAINED} AS status, passed,
                         width_bucket(-score, $3::float8[]) AS k, count(*)::bigint AS n, sum(score) AS score_sum
                  FROM judgements
                  WHERE created_at >= $1 AND created_at < $2
                    AND ($4::text IS NULL OR judge = $4) AND ($5::text IS NULL OR app = $5)
                    AND ($6::text IS NULL OR source = $6)
                    AND (source IS NULL OR source <> ALL($7::text[]))
                  GROUP BY 1, 2, 3, 4, 5"""
        rolled = f"""SELECT judge, {"nullif(app, '')" if by_app else "NULL::text"} AS app, status,
                            CASE passed WHEN 1 THEN true WHEN 0 THEN false END AS passed,
                            CASE WHEN k < 0 THEN NULL ELSE k END AS k, sum(n)::bigint AS n,
                            sum(score_sum) AS score_sum
                     FROM judgement_rollup
                     WHERE hour >= $1 AND hour < $2
                       AND ($3::text IS NULL OR judge = $3) AND ($4::text IS NULL OR app = coalesce($4, ''))
                       AND ($5::text IS NULL OR source = $5)
                       AND (source IS NULL OR source <> ALL($6::text[]))
                     GROUP BY 1, 2, 3, 4, 5"""

        async def q(conn: Conn) -> list[dict[str, Any]]:
            upto = await conn.fetchval("SELECT upto FROM judgement_rollup_state WHERE name = $1", _ROLLUP)
            start, end = utc(since), utc(until)
            assert start is not None
            assert end is not None
            h0 = _ceil_hour(start)
            h1 = min(_floor_hour(end), upto) if upto is not None else h0
            parts: list[tuple[datetime, datetime]] = []
            rows: list[dict[str, Any]] = []
            if upto is not None and h0 < h1:
                rows += [
                    dict(r)
                    for r in await conn.fetch(rolled, h0, h1, judge, app, source, list(exclude_sources))
                ]
                parts = [(start, h0), (h1, end)]
            else:
                parts = [(start, end)]
            for a, b in parts:
                if a < b:
                    rows += [
                        dict(r)
                        for r in await conn.fetch(raw, a, b, neg, judge, app, source, list(exclude_sources))
                    ]
            return rows

        return await self._q("score_counts", q)

    async def refresh_score_rollup(
        self, bounds: Sequence[float], *, margin: timedelta = timedelta(minutes=5)
    ) -> datetime | None:
        """Bring the hourly rollup up to the last whole hour that ended ``margin`` ago (judgements committed
        late by a slow transaction still land before it is read). Recomputes the hours since the last refresh;
        drops rollup hours older than the oldest judgement (retention). Returns the new ``upto`` (``None``:
        no judgements yet). One refresh at a time across replicas (transaction advisory lock)."""
        neg = sorted(-b for b in bounds)

        async def q(conn: Conn) -> datetime | None:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _ROLLUP_LOCK)
                oldest = await conn.fetchval("SELECT min(created_at) FROM judgements")
                if oldest is None:
                    return None
                upto = await conn.fetchval("SELECT upto FROM judgement_rollup_state WHERE name = $1", _ROLLUP)
                start = upto if upto is not None else _floor_hour(oldest)
                target = _floor_hour(datetime.now(UTC) - margin)
                if target > start:
                    await conn.execute(
                        "DELETE FROM judgement_rollup WHERE hour >= $1 AND hour < $2", start, target
                    )
                    await conn.execute(
                        f"""INSERT INTO judgement_rollup (hour, judge, app, source, status, passed, k, n, score_sum)
                           SELECT date_trunc('hour', created_at), judge, coalesce(app, ''), coalesce(source, ''),
                                  {_STATUS_OR_ABSTAINED}, CASE WHEN passed THEN 1 WHEN NOT passed THEN 0 ELSE -1 END,
                                  coalesce(width_bucket(-score, $3::float8[]), -1), count(*),
                                  coalesce(sum(score), 0)
                           FROM judgements WHERE created_at >= $1 AND created_at < $2
                           GROUP BY 1, 2, 3, 4, 5, 6, 7""",
                        start,
                        target,
                        neg,
                    )
                    await conn.execute(
                        """INSERT INTO judgement_rollup_state (name, upto) VALUES ($1, $2)
                           ON CONFLICT (name) DO UPDATE SET upto = excluded.upto""",
                        _ROLLUP,
                        target,
                    )
                    upto = target
                await conn.execute("DELETE FROM judgement_rollup WHERE hour < $1", _floor_hour(oldest))
                result: datetime | None = upto
                return result

        return await self._q("refresh_score_rollup", q)

    async def score_timeseries(
        self,
        *,
        since: datetime,
        until: datetime,
        interval: timedelta,
        judge: str | None,
        app: str | None,
        source: str | None,
        exclude_sources: Sequence[str],
    ) -> list[dict[str, Any]]:
        """Per ``judge`` and interval start ``bucket`` (``since + k × interval``, as ``date_bin(interval,
        created_at, since)``): ``total``, ``ok``, ``passed``, ``errors`` counts and ``mean_score`` (of ``ok`` judgements),
        oldest first; intervals without judgements are absent.

        Each interval is aggregated on its own (a lateral join over the intervals): the whole hours inside it
        that the hourly rollup already holds (:meth:`refresh_score_rollup`) from ``judgement_rollup``, the rest
        (the interval's edges, hours not rolled up yet) by an index range scan of ``judgements``. Grouping the
        whole window by ``date_bin`` made the planner sort every judgement of the window on disk; 24 h / 7 d /
        30 d of 10 million judgements took 387 ms / 666 ms / 2.7 s that way (bench/README.md). Times are
        microsecond arithmetic, so a day is 24 h whatever the session's time zone (as in ``date_bin``).
        ``mean_score`` is the sum of scores over the ``ok`` count (equal to ``avg`` up to float rounding)."""
        start, end = utc(since), utc(until)
        assert start is not None
        assert end is not None
        step = timedelta(microseconds=round(interval.total_seconds() * 1_000_000))
        n = max(0, -(-(end - start) // step)) if step > timedelta(0) else 0

        async def q(conn: Conn) -> list[dict[str, Any]]:
            upto = await conn.fetchval("SELECT upto FROM judgement_rollup_state WHERE name = $1", _ROLLUP)
            # per interval: [lo, h0) and [h1, hi) from judgements, [h0, h1) from the rollup (whole hours)
            cols: list[list[datetime]] = [[], [], [], [], []]
            for k in range(n):
                lo = start + k * step
                hi = min(lo + step, end)
                h0 = _ceil_hour(lo)
                h1 = min(_floor_hour(hi), upto) if upto is not None else h0
                if h1 <= h0:
                    h0 = h1 = hi
                for col, v in zip(cols, (lo, lo, h0, h1, hi), strict=True):
                    col.append(v)
            rows = await conn.fetch(
                """SELECT s.judge, b.bucket, sum(s.total)::bigint AS total, coalesce(sum(s.ok), 0)::bigint AS ok,
                          coalesce(sum(s.passed), 0)::bigint AS passed,
                          coalesce(sum(s.errors), 0)::bigint AS errors,
                          CASE WHEN sum(s.ok) > 0 THEN sum(s.score_sum) / sum(s.ok)::float8 END AS mean_score
                   FROM unnest($1::timestamptz[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[],
                               $5::timestamptz[]) AS b(bucket, lo, h0, h1, hi)
                   CROSS JOIN LATERAL (
                       SELECT judge, count(*) AS total, count(*) FILTER (WHERE status = 'ok') AS ok,
                              count(*) FILTER (WHERE passed) AS passed,
                              count(*) FILTER (WHERE status = 'error') AS errors,
                              coalesce(sum(score), 0) AS score_sum
                       FROM judgements
                       WHERE created_at >= b.lo AND created_at < b.h0
                         AND ($6::text IS NULL OR judge = $6) AND ($7::text IS NULL OR app = $7)
                         AND ($8::text IS NULL OR source = $8)
                         AND (source IS NULL OR source <> ALL($9::text[]))
                       GROUP BY judge
                       UNION ALL
                       SELECT judge, count(*), count(*) FILTER (WHERE status = 'ok'),
                              count(*) FILTER (WHERE passed), count(*) FILTER (WHERE status = 'error'),
                              coalesce(sum(score), 0)
                       FROM judgements
                       WHERE created_at >= b.h1 AND created_at < b.hi
                         AND ($6::text IS NULL OR judge = $6) AND ($7::text IS NULL OR app = $7)
                         AND ($8::text IS NULL OR source = $8)
                         AND (source IS NULL OR source <> ALL($9::text[]))
                       GROUP BY judge
                       UNION ALL
                       SELECT judge, sum(n), sum(n) FILTER (WHERE status = 'ok'), sum(n) FILTER (WHERE passed = 1),
                              sum(n) FILTER (WHERE status = 'error'), sum(score_sum)
                       FROM judgement_rollup
                       WHERE hour >= b.h0 AND hour < b.h1
                         AND ($6::text IS NULL OR judge = $6) AND ($7::text IS NULL OR app = $7)
                         AND ($8::text IS NULL OR source = $8)
                         AND (source IS NULL OR source <> ALL($9::text[]))
                       GROUP BY judge) AS s
                   GROUP BY 1, 2
                   ORDER BY 1, 2""",
                *cols,
                judge,
                app,
                source,
                list(exclude_sources),
            )
            return [dict(r) for r in rows]

        return await self._q("score_timeseries", q)

    # -- dead letters ---------------------------------------------------------------------------------------
    async def dead_letter_page(
        self, *, source: str | None, limit: int, before_id: int | None
    ) -> list[dict[str, Any]]:
        """Dead-letter rows newest first (``id`` descending), ids below ``before_id``; ``payload`` is bytes."""

        async def q(conn: Conn) -> list[dict[str, Any]]:
            rows = await conn.fetch(
                """SELECT id, source, reason, payload, meta, created_at FROM dead_letters
                   WHERE ($1::text IS NULL OR source = $1) AND ($2::bigint IS NULL OR id < $2)
                   ORDER BY id DESC LIMIT $3""",
                source,
                before_id,
                limit,
            )
            return [dict(r) for r in rows]

        return await self._q("dead_letters", q)

    # -- runs and the run queue -----------------------------------------------------------------------------
    async def list_run_page(
        self,
        *,
        test_set: str | None,
        status: str | None,
        limit: int,
        after: tuple[datetime, str] | None,
    ) -> list[dict[str, Any]]:
        """Runs newest first (``started_at DESC, run_id DESC``), filtered by test set and status: dicts with
        ``run`` (:class:`RunRecord`), ``progress_done``, ``progress_total`` and ``request``."""

        async def q(conn: Conn) -> list[dict[str, Any]]:
            rows = await conn.fetch(
                """SELECT * FROM runs
                   WHERE ($1::text IS NULL OR test_set = $1) AND ($2::text IS NULL OR status = $2)
                     AND ($3::timestamptz IS NULL OR (started_at, run_id) < ($3, $4))
                   ORDER BY started_at DESC, run_id DESC LIMIT $5""",
                test_set,
                status,
                after[0] if after else None,
                after[1] if after else None,
                limit,
            )
            return [_run_page_row(r) for r in rows]

        return await self._q("list_runs", q)

    async def run_page_row(self, run_id: str) -> dict[str, Any] | None:
        """One run as :meth:`list_run_page` returns it, or ``None``."""

        async def q(conn: Conn) -> dict[str, Any] | None:
            r = await conn.fetchrow("SELECT * FROM runs WHERE run_id = $1", run_id)
            return _run_page_row(r) if r is not None else None

        return await self._q("run_page_row", q)

    async def run_queue_row(self, run_id: str) -> dict[str, Any] | None:
        """The queue columns of run ``run_id`` (``status``, ``request``, ``progress_done``, ``progress_total``,
        ``cancel_requested``, ``claimed_by``, ``heartbeat_at``) or ``None``."""

        async def q(conn: Conn) -> dict[str, Any] | None:
            r = await conn.fetchrow(
                """SELECT run_id, status, request, progress_done, progress_total, cancel_requested,
                          claimed_by, heartbeat_at FROM runs WHERE run_id = $1""",
                run_id,
            )
            return dict(r) if r is not None else None

        return await self._q("run_queue_row", q)

    async def enqueue_run(self, run: RunRecord, request: dict[str, Any], total: int) -> bool:
        """Insert run ``run.run_id`` with status ``queued`` and its ``request``; ``False`` if the id exists."""

        async def q(conn: Conn) -> bool:
            got = await conn.fetchval(
                """INSERT INTO runs (run_id, test_set, started_at, status, judges, settings, request,
                                     progress_done, progress_total)
                   VALUES ($1, $2, $3, 'queued', $4, $5, $6, 0, $7)
                   ON CONFLICT (run_id) DO NOTHING RETURNING run_id""",
                run.run_id,
                run.test_set,
                utc(run.started_at),
                run.judges,
                run.settings,
                request,
                total,
            )
            return got is not None

        return await self._q("enqueue_run", q)

    async def claim_queued_run(self, worker: str) -> dict[str, Any] | None:
        """Take the oldest queued run (``FOR UPDATE SKIP LOCKED``: replicas never take the same one), mark it
        ``running`` claimed by ``worker`` and owned by this process (``owner_host``/``owner_pid``, so the replay
        it starts may take the run id and a crash shows the run ``interrupted``); return its queue row or
        ``None`` when the queue is empty."""

        async def q(conn: Conn) -> dict[str, Any] | None:
            r = await conn.fetchrow(
                """UPDATE runs SET status = 'running', claimed_by = $1, heartbeat_at = now(), updated_at = now(),
                          owner_host = $2, owner_pid = $3
                   WHERE run_id = (SELECT run_id FROM runs WHERE status = 'queued'
                                   ORDER BY started_at, run_id FOR UPDATE SKIP LOCKED LIMIT 1)
                   RETURNING run_id, test_set, status, request, progress_total""",
                worker,
                OWNER_HOST,
                os.getpid(),
            )
            return dict(r) if r is not None else None

        return await self._q("claim_queued_run", q)

    async def run_progress(self, run_id: str, done: int, total: int) -> bool:
        """Record progress (and a heartbeat); return ``cancel_requested`` of the run."""

        async def q(conn: Conn) -> bool:
            got = await conn.fetchval(
                """UPDATE runs SET progress_done = $2, progress_total = $3, heartbeat_at = now()
                   WHERE run_id = $1 RETURNING cancel_requested""",
                run_id,
                done,
                total,
            )
            return bool(got)

        return await self._q("run_progress", q)

    async def request_cancel(self, run_id: str) -> str | None:
        """Cancel run ``run_id``: a queued run becomes ``cancelled`` at once, a running one gets
        ``cancel_requested`` (its worker stops it). Returns the run's status *before* the call, or ``None`` for
        an unknown run; a finished run is left as it is."""

        async def q(conn: Conn) -> str | None:
            async with conn.transaction():
                status = await conn.fetchval("SELECT status FROM runs WHERE run_id = $1 FOR UPDATE", run_id)
                if status is None:
                    return None
                if status == "queued":
                    await conn.execute(
                        """UPDATE runs SET status = 'cancelled', cancel_requested = true, finished_at = now(),
                                  updated_at = now() WHERE run_id = $1""",
                        run_id,
                    )
                elif status == "running":
                    await conn.execute(
                        "UPDATE runs SET cancel_requested = true, updated_at = now() WHERE run_id = $1",
                        run_id,
                    )
                return str(status)

        return await self._q("request_cancel", q)

    async def running_portal_runs(self) -> list[dict[str, Any]]:
        """Portal runs in status ``running``: ``run_id``, ``claimed_by`` (``host:pid``), ``heartbeat_at``."""

        async def q(conn: Conn) -> list[dict[str, Any]]:
            rows = await conn.fetch(
                """SELECT run_id, claimed_by, heartbeat_at FROM runs
                   WHERE status = 'running' AND request IS NOT NULL ORDER BY started_at"""
            )
            return [dict(r) for r in rows]

        return await self._q("running_portal_runs", q)

    async def requeue_runs(self, run_ids: Sequence[str]) -> list[str]:
        """Queue the still-``running`` portal runs ``run_ids`` again (``cancelled`` when a cancel was
        requested): their worker is gone. Returns the ids changed."""

        async def q(conn: Conn) -> list[str]:
            rows = await conn.fetch(
                """UPDATE runs SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,
                          claimed_by = NULL, updated_at = now(),
                          finished_at = CASE WHEN cancel_requested THEN now() ELSE NULL END
                   WHERE run_id = ANY($1::text[]) AND status = 'running' AND request IS NOT NULL
                   RETURNING run_id""",
                list(run_ids),
            )
            return [str(r["run_id"]) for r in rows]

        return await self._q("requeue_runs", q)

    async def set_run_status(self, run_id: str, status: str, report: dict[str, Any] | None) -> None:
        """Set a run's final ``status`` (e.g. ``cancelled``), with ``report`` when given, finished now."""

        async def q(conn: Conn) -> None:
            await conn.execute(
                """UPDATE runs SET status = $2, report = COALESCE($3, report), finished_at = now(),
                          updated_at = now() WHERE run_id = $1""",
                run_id,
                status,
                report,
            )

        await self._q("set_run_status", q)

    # -- sign-in sessions (migrations/190_portal_sessions.sql) ------------------------------------------------
    async def portal_key(self, candidate: bytes) -> bytes:
        """The database's portal key: ``candidate`` (random, ≥ 32 bytes) when none was stored yet, else the
        stored one (so every replica uses the same key)."""

        async def q(conn: Conn) -> bytes:
            await conn.execute(
                "INSERT INTO portal_key (key) VALUES ($1) ON CONFLICT (singleton) DO NOTHING", candidate
            )
            key: bytes = await conn.fetchval("SELECT key FROM portal_key")
            return key

        return await self._q("portal_key", q)

    async def create_portal_session(self, id_hash: bytes, token_mac: bytes, expires_at: datetime) -> None:
        """Store a session (and drop the expired ones)."""

        async def q(conn: Conn) -> None:
            async with conn.transaction():
                await conn.execute("DELETE FROM portal_sessions WHERE expires_at <= now()")
                await conn.execute(
                    "INSERT INTO portal_sessions (id_hash, token_mac, expires_at) VALUES ($1, $2, $3)",
                    id_hash,
                    token_mac,
                    expires_at,
                )

        await self._q("create_portal_session", q)

    async def portal_session_mac(self, id_hash: bytes) -> bytes | None:
        """The ``token_mac`` of the unexpired session ``id_hash``; ``None`` when there is none."""

        async def q(conn: Conn) -> bytes | None:
            mac: bytes | None = await conn.fetchval(
                "SELECT token_mac FROM portal_sessions WHERE id_hash = $1 AND expires_at > now()", id_hash
            )
            return mac

        return await self._q("portal_session", q)

    async def delete_portal_session(self, id_hash: bytes) -> None:
        """End the session ``id_hash`` (sign-out); nothing when it does not exist."""

        async def q(conn: Conn) -> None:
            await conn.execute("DELETE FROM portal_sessions WHERE id_hash = $1", id_hash)

        await self._q("delete_portal_session", q)
