"""``PostgresStore``: the ragpulse result store on PostgreSQL through an asyncpg connection pool.

Implements the Store contract of ``docs/dev/architecture.md`` (and :class:`ragpulse.protocols.ResultStore`).
Every method translates asyncpg/OS errors into :class:`~ragpulse.errors.StoreError` (``retriable=True`` for
connection loss, timeouts, server shutdown, serialization failures; ``False`` for bad data), see
:mod:`ragpulse.store.errors`. Schema: ``ragpulse/store/migrations/*.sql`` (see ``docs/storage.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from ragpulse.config import StoreSettings, env_name
from ragpulse.errors import StoreError
from ragpulse.logging import get_logger
from ragpulse.model import (
    CalibrationProfile,
    Judgement,
    RunRecord,
    RunStatus,
    TestCase,
    TestSet,
    Trace,
    TraceResult,
    Turn,
    normalize_trace_id,
)
from ragpulse.protocols import CaseSource, PendingStore, ResultStore, WriteReport
from ragpulse.store import calibrations, catalog, reviews, run_rows, shadows
from ragpulse.store.errors import is_connection_error, to_store_error
from ragpulse.store.migrate import Conn, migrate
from ragpulse.store.portal import PortalQueries
from ragpulse.store.rows import (
    clean,
    dumps,
    judgement_from_row,
    judgement_row,
    result_from_rows,
    trace_from_row,
    trace_row,
)
from ragpulse.store.run_rows import RunCaseKey
from ragpulse.store.sql import (
    FINAL_JUDGEMENTS,
    JUDGEMENT_STAGE,
    JUDGEMENT_UPSERT,
    OUTRANKED_TRACES,
    RUN_CASES_LINK,
    RUN_CASES_UPSERT,
    RUN_JUDGEMENTS_PIN,
    STAGE_TABLES,
    TRACE_STAGE,
    TRACE_UPSERT,
    version_rank_sql,
)

__all__ = ["PostgresStore"]

_log = get_logger(__name__)
_T = TypeVar("_T")

#: Rows fetched per round trip by :meth:`PostgresStore.traces_for_rejudge` and deleted per statement by
#: :meth:`PostgresStore.prune`.
PAGE_SIZE = 500
PRUNE_CHUNK = 5000

#: One chunk of :meth:`PostgresStore.prune`: the oldest ``$2`` traces received before ``$1`` (after the keyset
#: ``($3, $4)`` of the previous chunk, in ``(received_at, trace_id)`` order), deleted with their cascades and
#: the runs' pinned case rows of them;
#: returns how many it found and deleted (fewer when another replica's prune took some) and the last key.
_PRUNE_TRACES = """
WITH doomed AS (
    SELECT trace_id, received_at FROM traces
    WHERE received_at < $1 AND ($3::timestamptz IS NULL OR (received_at, trace_id) > ($3, $4::text))
    ORDER BY received_at, trace_id LIMIT $2
), gone AS (
    DELETE FROM traces t USING doomed d WHERE t.trace_id = d.trace_id RETURNING t.trace_id, t.received_at
), unpinned AS (  -- the runs' case rows of those traces (run_judgements has no foreign key, migration 241)
    DELETE FROM run_judgements rj USING run_cases rc, doomed d
    WHERE rc.trace_id = d.trace_id AND rj.run_id = rc.run_id AND rj.trace_id = rc.trace_id
)
SELECT (SELECT count(*) FROM gone) AS deleted, count(*) AS found, max(received_at) AS last_at,
       (array_agg(trace_id ORDER BY received_at DESC, trace_id DESC))[1] AS last_id
FROM doomed
"""


async def _init_connection(conn: asyncpg.Connection[Any]) -> None:
    """Decode/encode ``json``/``jsonb`` as Python objects on every pooled connection, and create its staging
    tables for :meth:`PostgresStore.write_results` (:data:`~ragpulse.store.sql.STAGE_TABLES`)."""
    for typ in ("json", "jsonb"):
        await conn.set_type_codec(typ, encoder=dumps, decoder=json.loads, schema="pg_catalog")
    await conn.execute(STAGE_TABLES)


async def _keep_session(conn: asyncpg.Connection[Any]) -> None:
    """The pool's reset when a connection is given back: nothing beyond asyncpg's own (an open transaction is
    rolled back, listeners dropped). The store leaves no session state behind — no ``SET`` (only
    transaction-local ``set_config``), no ``LISTEN``, no cursors outside transactions, and the migration lock
    is released in a ``finally`` —, so asyncpg's default ``RESET ALL; UNLISTEN *; CLOSE ALL;
    pg_advisory_unlock_all()`` would be one more round trip and statement per acquire for nothing (measured:
    ~0.03 ms CPU per trace on each side at 30 traces per write)."""


def _where(url: str) -> str:
    """``host:port`` part of a PostgreSQL URL, without user or password (``?host=`` for a Unix socket)."""
    rest = url.partition("://")[2]
    netloc = rest.split("/", 1)[0].split("?", 1)[0].rpartition("@")[2]
    if netloc:
        return netloc
    query = rest.partition("?")[2]
    sockets = [kv.partition("=")[2] for kv in query.split("&") if kv.startswith("host=")]
    return sockets[0] if sockets else "the default host (localhost:5432)"


def _discard(conn: Any) -> None:
    """Terminate a pooled connection (the pool replaces it); nothing when the pool already took it back (a
    connection the server closed is released by asyncpg itself)."""
    with contextlib.suppress(asyncpg.InterfaceError):
        conn.terminate()


class _PublishFailed(StoreError):
    """Carries the publisher's exception through :meth:`PostgresStore._run` unwrapped."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(f"publish failed: {type(cause).__name__}")
        self.cause = cause


#: ``info()`` gives the planner's row estimate instead of ``count(*)`` for tables estimated above this.
ESTIMATE_COUNTS_ABOVE = 1_000_000


_DEAD_LETTER_PENDING = """INSERT INTO dead_letters (source, reason, payload, meta)
   SELECT $1, $3, string_agg(payload, ''::bytea ORDER BY id), jsonb_build_object('key', $2::text)
   FROM pending_inputs WHERE source = $1 AND key = $2
   HAVING count(*) > 0"""
#: The same under ``redact_text``: the concatenated payloads' size and SHA-256, not their text.
_DEAD_LETTER_PENDING_REDACTED = """INSERT INTO dead_letters (source, reason, payload, meta)
   SELECT $1, $3, ''::bytea, jsonb_build_object('key', $2::text, 'redacted', true,
     'payload_bytes', length(p), 'payload_sha256', encode(sha256(p), 'hex'))
   FROM (SELECT string_agg(payload, ''::bytea ORDER BY id) AS p FROM pending_inputs
         WHERE source = $1 AND key = $2 HAVING count(*) > 0) agg"""


def redacted_payload_meta(data: bytes) -> dict[str, Any]:
    """What a dead letter keeps of ``data`` under ``redact_text``: ``redacted``, ``payload_bytes``,
    ``payload_sha256`` (hex)."""
    return {"redacted": True, "payload_bytes": len(data), "payload_sha256": hashlib.sha256(data).hexdigest()}


class PostgresStore(PortalQueries):
    """Result store on PostgreSQL (asyncpg pool). Build it with :meth:`connect` or ``ragpulse.store.open_store``.

    Args:
        pool: an asyncpg pool whose connections were set up by :meth:`connect` (json codecs, staging tables).
        redact_text: store question/answer/context/expected answer/document texts as ``sha256:<hex>`` plus
            lengths, drop judge raw output and keep only reason codes (see :mod:`ragpulse.store.redaction`).
        acquire_timeout_s: longest wait for a pooled connection, seconds.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        redact_text: bool = False,
        acquire_timeout_s: float = 30.0,
        results_outbox: bool = False,
    ) -> None:
        self._pool = pool
        self._redact = redact_text
        self._acquire_timeout = acquire_timeout_s
        self.results_outbox = results_outbox
        """When true, new and replaced judgements wait in the results stream's outbox (``published_at`` NULL)
        until :meth:`publish_pending` hands them to the publisher; else they are stored as published."""

    @property
    def pool(self) -> asyncpg.Pool:
        """The connection pool (shared by stores made from this one)."""
        return self._pool

    @property
    def redact_text(self) -> bool:
        """Texts are stored as hashes and lengths."""
        return self._redact

    @property
    def acquire_timeout_s(self) -> float:
        """Longest wait for a pooled connection, seconds."""
        return self._acquire_timeout

    # -- life cycle ---------------------------------------------------------------------------------------------
    @classmethod
    async def connect(
        cls,
        url: str,
        settings: StoreSettings | None = None,
        *,
        run_migrations: bool = True,
        results_outbox: bool = False,
    ) -> PostgresStore:
        """Open a pool on ``url`` (any asyncpg DSN, unix-socket URIs included) and apply pending migrations.

        Pool size, command/connect timeout and redaction come from ``settings`` (defaults when ``None``).

        Raises:
            StoreError: cannot connect (``retriable=True``) or a migration failed.
        """
        s = settings or StoreSettings()
        try:
            pool = await asyncpg.create_pool(
                url,
                min_size=min(s.pool_min, s.pool_max),
                max_size=s.pool_max,
                command_timeout=s.command_timeout_s,
                timeout=s.command_timeout_s,  # connection establishment
                init=_init_connection,
                reset=_keep_session,
            )
        except Exception as e:
            err = to_store_error(e, "connect")
            if err.retriable:  # refused, unreachable, timed out, shutting down: name the setting to fix
                err = StoreError(
                    f"{err} — no PostgreSQL answers at {_where(url)}; check the database URL "
                    f"({env_name('store', 'database_url')}, store.database_url)",
                    retriable=True,
                )
            raise err from e
        store = cls(
            pool,
            redact_text=s.redact_text,
            acquire_timeout_s=s.command_timeout_s,
            results_outbox=results_outbox,
        )
        if run_migrations:
            try:
                await store.migrate()
            except BaseException:
                await store.close()
                raise
        return store

    async def migrate(self) -> list[int]:
        """Apply pending schema migrations (under the migration advisory lock); return the versions applied.

        Raises:
            StoreError: a migration failed (that migration was rolled back).
        """
        return await self._run("migrate", migrate)

    async def close(self) -> None:
        """Close the pool (waits up to 10 s for connections in use, then terminates them)."""
        try:
            await asyncio.wait_for(self._pool.close(), timeout=10.0)
        except TimeoutError:
            self._pool.terminate()

    async def ping(self) -> bool:
        """True when the database answers ``SELECT 1`` (never raises)."""
        try:
            async with self._pool.acquire(timeout=5.0) as conn:
                return bool(await conn.fetchval("SELECT 1", timeout=5.0) == 1)
        except Exception:
            return False

    async def database_identity(self) -> str:
        """``<uuid>/<database name>``: the random id migration 130 gave this database, and its name. Two
        processes see the same value exactly when they use the same database (``replay --via`` compares its
        own with the one ``serve`` reports on ``/readyz``)."""

        async def q(conn: Conn) -> str:
            return str(
                await conn.fetchval("SELECT id::text || '/' || current_database() FROM store_identity")
            )

        return await self._run("database_identity", q)

    async def info(self, *, exact_below: int | None = ESTIMATE_COUNTS_ABOVE) -> dict[str, Any]:
        """Facts about the database: ``server_version`` (e.g. ``"18.1"``), ``schema_version`` (highest applied
        migration), ``database`` (name), ``size_bytes``, row counts ``traces``, ``judgements``, ``runs``,
        ``test_sets``, ``dead_letters``, ``estimated`` (which of those counts are the planner's estimate) and
        ``oldest_trace`` (UTC time or ``None``).

        A table whose planner estimate (``pg_class.reltuples``, kept by autovacuum's ANALYZE) is above
        ``exact_below`` rows is not counted: ``count(*)`` reads the whole table or index (seconds at
        10 M judgements) and the estimate is within a few percent after ANALYZE. ``exact_below=None``
        counts every table exactly."""

        async def q(conn: Conn) -> dict[str, Any]:
            tables = ("traces", "judgements", "runs", "test_sets", "dead_letters")
            estimates = {
                r["relname"]: int(r["n"])
                for r in await conn.fetch(
                    """SELECT c.relname, c.reltuples AS n FROM pg_class c
                       WHERE c.relname = ANY($1::text[]) AND c.relnamespace = current_schema()::regnamespace
                         AND c.relkind IN ('r', 'p')""",
                    list(tables),
                )
            }
            estimated = [t for t in tables if exact_below is not None and estimates.get(t, -1) > exact_below]
            counts = ", ".join(
                f"{estimates[t]}::bigint AS {t}" if t in estimated else f"(SELECT count(*) FROM {t}) AS {t}"
                for t in tables
            )
            row = await conn.fetchrow(
                f"""SELECT current_setting('server_version') AS server_version,
                          (SELECT max(version) FROM schema_migrations) AS schema_version,
                          current_database() AS database,
                          pg_database_size(current_database()) AS size_bytes,
                          {counts},
                          (SELECT min(received_at) FROM traces) AS oldest_trace"""
            )
            facts = dict(row) if row is not None else {}
            facts["estimated"] = estimated
            return facts

        return await self._run("info", q)

    async def _run(self, action: str, fn: Callable[[Conn], Awaitable[_T]]) -> _T:
        """Run ``fn(conn)`` on a pooled connection, mapping failures to :class:`StoreError`.

        A connection that failed with a connection error (:func:`~ragpulse.store.errors.is_connection_error`)
        or whose operation was cancelled is terminated, not given back: the pool opens a fresh one for the
        next caller, and the caller's retry runs the whole operation again there. Giving it back would make
        the pool roll back an open transaction on a broken protocol, whose error ("another operation is in
        progress") used to replace the retriable one. A failure while giving back a connection after ``fn``
        finished (the pool's reset) never changes ``fn``'s outcome: the pool has terminated that connection.
        """
        try:
            conn = await self._pool.acquire(timeout=self._acquire_timeout)
        except Exception as e:
            raise self._store_error(e, action) from e
        try:
            return await fn(conn)
        except StoreError:
            raise
        except asyncio.CancelledError:
            _discard(conn)  # an operation may still be running on it: never reuse it
            raise
        except Exception as e:
            if is_connection_error(e):
                _discard(conn)
            raise self._store_error(e, action) from e
        finally:
            try:
                await self._pool.release(conn)
            except Exception as e:  # the pool's reset failed and it terminated the connection
                _log.info("store_connection_discarded", action=action, error=f"{type(e).__name__}: {e}"[:300])

    @staticmethod
    def _store_error(e: BaseException, action: str) -> StoreError:
        err = to_store_error(e, action)
        _log.warning("store_error", action=action, retriable=err.retriable, error=str(err))
        return err

    # -- results ------------------------------------------------------------------------------------------------
    async def write_results(self, results: Sequence[TraceResult]) -> WriteReport:
        """Upsert traces and their judgements in one transaction: each batch is copied (binary ``COPY``) into
        the connection's staging tables and upserted from there, one statement per table.

        Traces are keyed by ``trace_id``; of two versions of a trace the one of higher
        :attr:`~ragpulse.model.Trace.version_rank` is kept (complete with an answer > incomplete > no answer yet),
        of equal rank the later (in the batch, or the new one over the stored one). An outranked version is
        written nowhere: not its trace row, judgements or run link. Judgements are keyed by
        ``(trace_id, judge, version)``. A judgement counts as changed when it was inserted or its verdict
        (status, score, passed, threshold, backend, model, declared version) differs from the stored one; only
        then are its other columns rewritten. Traces with a ``run_id`` are linked in ``run_cases``, and while that run
        is ``running`` their judgements are pinned as its case rows (``run_judgements``, migration 240).

        Returns:
            :class:`WriteReport` with ``changed`` = keys of inserted/changed judgements, ``trace_inserted`` and
            ``outranked``.

        Raises:
            StoreError: nothing of the batch was written; ``retriable=True`` on connection loss/timeouts.
        """
        if not results:
            return WriteReport()
        by_trace: dict[str, TraceResult] = {}
        for r in results:
            had = by_trace.get(r.trace.trace_id)
            if had is None or r.trace.replaces(had.trace):
                by_trace[r.trace.trace_id] = r
        judgements: dict[tuple[str, str, str], tuple[Any, ...]] = {}
        published_at = None if self.results_outbox else datetime.now(UTC)
        run_links: dict[tuple[str, str], str | None] = {}
        trace_rows = []
        # rows in key order: concurrent batches with overlapping traces then lock rows in the same order and
        # cannot deadlock each other
        for _, r in sorted(by_trace.items()):
            trace_rows.append(trace_row(r, redact_text=self._redact))
            chash = r.trace.content_hash if r.judgements else None
            for j in r.judgements:
                judgements[(r.trace.trace_id, j.judge, j.version)] = judgement_row(
                    r.trace, j, redact_text=self._redact, published_at=published_at, content_hash=chash
                )
            if r.trace.run_id:
                run_links[(clean(r.trace.run_id) or "", r.trace.trace_id)] = clean(r.trace.test_case_id)
        judgement_rows = [judgements[k] for k in sorted(judgements)]

        async def tx(conn: Conn) -> WriteReport:
            async with conn.transaction():
                # binary COPY into the connection's staging tables (emptied at commit), then one upsert each
                await conn.copy_records_to_table(TRACE_STAGE, records=trace_rows, schema_name="pg_temp")
                trows = await conn.fetch(TRACE_UPSERT)
                outranked = frozenset(r["trace_id"] for r in await conn.fetch(OUTRANKED_TRACES))
                jrows: list[Any] = []
                jwrite = [row for row in judgement_rows if row[0] not in outranked]
                if jwrite:
                    await conn.copy_records_to_table(JUDGEMENT_STAGE, records=jwrite, schema_name="pg_temp")
                    jrows = await conn.fetch(JUDGEMENT_UPSERT)
                links = {k: v for k, v in run_links.items() if k[1] not in outranked}
                if links:
                    keys = sorted(links)
                    await conn.execute(
                        RUN_CASES_UPSERT,
                        [k[0] for k in keys],
                        [k[1] for k in keys],
                        [links[k] for k in keys],
                    )
                    await conn.execute(RUN_JUDGEMENTS_PIN, [k[0] for k in keys], [k[1] for k in keys])
            return WriteReport(
                changed=frozenset((r["trace_id"], r["judge"], r["version"]) for r in jrows),
                trace_inserted=frozenset(r["trace_id"] for r in trows if r["inserted"]),
                outranked=outranked,
            )

        return await self._run("write_results", tx)

    async def stored_version_ranks(self, trace_ids: Sequence[str]) -> dict[str, int]:
        """``{trace_id: version rank}`` of the stored versions of ``trace_ids`` (ids not stored are absent; same
        ranks as :attr:`ragpulse.model.Trace.version_rank`, :func:`~ragpulse.store.sql.version_rank_sql`). One
        query by primary key; the engine asks it before judging a version that may be outranked.

        Raises:
            StoreError: the query failed.
        """
        if not trace_ids:
            return {}
        ids = list(dict.fromkeys(trace_ids))

        async def q(conn: Conn) -> dict[str, int]:
            rows = await conn.fetch(
                f"SELECT t.trace_id, {version_rank_sql('t')} AS rank FROM traces t"
                " WHERE t.trace_id = ANY($1::text[])",
                ids,
            )
            return {r["trace_id"]: int(r["rank"]) for r in rows}

        return await self._run("stored_version_ranks", q)

    async def final_judgements(
        self, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], frozenset[tuple[str, str]]]:
        """The final (``ok``/``skipped``) judgements stored for ``(trace_id, content_hash)`` pairs, as
        ``{(trace_id, content_hash): {(judge, version), …}}`` (pairs without any are absent). One query for
        the whole batch; the engine skips these judges on a redelivery of identical content.

        Raises:
            StoreError: the query failed.
        """
        if not keys:
            return {}
        tids = [k[0] for k in keys]
        hashes = [k[1] for k in keys]

        async def q(conn: Conn) -> dict[tuple[str, str], frozenset[tuple[str, str]]]:
            out: dict[tuple[str, str], set[tuple[str, str]]] = {}
            for r in await conn.fetch(FINAL_JUDGEMENTS, tids, hashes):
                out.setdefault((r["trace_id"], r["content_hash"]), set()).add((r["judge"], r["version"]))
            return {k: frozenset(v) for k, v in out.items()}

        return await self._run("final_judgements", q)

    async def get_trace(self, trace_id: str) -> TraceResult | None:
        """The trace ``trace_id`` (normalised like :func:`ragpulse.model.normalize_trace_id`) with all its
        judgements, every version, ordered by judge name then last write (oldest first: the last of a judge is
        its newest, as run reports take it); ``None`` if unknown."""
        tid = normalize_trace_id(trace_id)

        async def q(conn: Conn) -> TraceResult | None:
            row = await conn.fetchrow("SELECT * FROM traces WHERE trace_id = $1", tid)
            if row is None:
                return None
            js = await conn.fetch(
                "SELECT * FROM judgements WHERE trace_id = $1 ORDER BY judge, updated_at, created_at, version",
                tid,
            )
            return result_from_rows(row, js)

        return await self._run("get_trace", q)

    async def session_turns(
        self, session_id: str, *, before: datetime | None, exclude: str, limit: int
    ) -> list[Turn]:
        """The last ``limit`` earlier turns of session ``session_id`` (oldest first): the question and answer of
        its stored traces that started before ``before`` (any time when ``None``), ``exclude`` (the trace being
        judged) left out, and traces stored redacted too (their texts are hashes, no conversation). Uses the
        ``traces_session_idx`` index (migration 200)."""

        async def q(conn: Conn) -> list[Turn]:
            rows = await conn.fetch(
                """SELECT question, answer FROM traces
                   WHERE session_id = $1 AND trace_id <> $2 AND NOT redacted AND question IS NOT NULL
                     AND ($3::timestamptz IS NULL OR COALESCE(start_time, received_at) < $3)
                   ORDER BY COALESCE(start_time, received_at) DESC, trace_id DESC LIMIT $4""",
                session_id,
                exclude,
                before,
                limit,
            )
            return [Turn(question=r["question"], answer=r["answer"]) for r in reversed(rows)]

        return await self._run("session_turns", q)

    async def get_run_results(self, run_id: str) -> list[TraceResult]:
        """Traces linked to run ``run_id`` (replay or replayed through Kafka/OTLP with that run id), each
        with the judgements that run produced, one per judge name (``run_judgements``: pinned while the run ran,
        so a later ``rejudge`` never changes them).

        Ordered by the test case's position in its test set when known, then by arrival.
        """

        async def q(conn: Conn) -> list[TraceResult]:
            trows = await conn.fetch(
                """SELECT t.* FROM run_cases rc
                   JOIN traces t ON t.trace_id = rc.trace_id
                   LEFT JOIN runs r ON r.run_id = rc.run_id
                   LEFT JOIN test_cases tc ON tc.test_set = r.test_set AND tc.case_id = rc.test_case_id
                   WHERE rc.run_id = $1
                   ORDER BY tc.position NULLS LAST, t.received_at, t.trace_id""",
                run_id,
            )
            jrows = await conn.fetch(
                """SELECT j.*, NULL::text AS raw_output FROM run_judgements j WHERE j.run_id = $1
                   ORDER BY j.trace_id, j.judge""",
                run_id,
            )
            by_trace: dict[str, list[Any]] = {}
            for j in jrows:
                by_trace.setdefault(j["trace_id"], []).append(j)
            return [result_from_rows(t, by_trace.get(t["trace_id"], [])) for t in trows]

        return await self._run("get_run_results", q)

    async def run_results_page(
        self,
        run_id: str,
        *,
        after: RunCaseKey | None = None,
        limit: int = 200,
        offset: int = 0,
        failing: bool = False,
        not_judged: bool = False,
    ) -> list[tuple[RunCaseKey, TraceResult]]:
        """One page of run ``run_id``'s results in run order (:mod:`ragpulse.store.run_rows`): up to ``limit``
        ``(key, result)`` pairs after ``after`` (keyset) skipping ``offset`` more; ``failing`` / ``not_judged``:
        only the cases of that verdict (``ragpulse.runs.report_model.CaseVerdict``). Each result has the run's judgement per judge (no raw model output) and of its trace
        only the ids, routing fields and ``test_set`` attribute (no texts). The first page of a 100,000-case
        run costs its own rows (an index walk in test-set position, migration 140); the last page also looks
        for cases outside the test set (one pass over the run).

        Raises:
            StoreError: the query failed.
        """
        return await self._run(
            "run_results_page",
            lambda c: run_rows.fetch_page(
                c,
                run_id,
                after=after,
                limit=limit,
                offset=offset,
                verdict="fail" if failing else "not_judged" if not_judged else None,
            ),
        )

    async def run_results_by_case(self, run_id: str, case_ids: Sequence[str]) -> list[TraceResult]:
        """The results of run ``run_id`` whose case id (the trace's test case id, else its trace id) is one of
        ``case_ids``, in run order, traces as in :meth:`run_results_page`: a look-up by key (each id through
        the indexes on the run's case and trace ids), not a pass over the run.

        Raises:
            StoreError: the query failed.
        """
        if not case_ids:
            return []
        return await self._run("run_results_by_case", lambda c: run_rows.fetch_by_case(c, run_id, case_ids))

    async def run_case_keys(self, run_id: str, case_ids: Sequence[str]) -> list[tuple[str, str]]:
        """``(case id, trace id)`` of the results :meth:`run_results_by_case` finds, in the same order: which of
        ``case_ids`` the run has, by which traces (nothing else read).

        Raises:
            StoreError: the query failed.
        """
        if not case_ids:
            return []
        return await self._run("run_case_keys", lambda c: run_rows.fetch_case_keys(c, run_id, case_ids))

    async def count_run_results(self, run_id: str) -> int:
        """How many traces are linked to run ``run_id`` (a trace is linked in the transaction that stores it
        with its judgements)."""
        return int(
            await self._run(
                "count_run_results",
                lambda c: c.fetchval("SELECT count(*) FROM run_cases WHERE run_id = $1", run_id),
            )
        )

    async def iter_run_results(self, run_id: str, *, chunk: int = 1000) -> AsyncGenerator[TraceResult, None]:
        """Every result of run ``run_id`` in run order, read through one server-side cursor ``chunk`` rows at a
        time (memory stays bounded for a 100,000-case run); each with the run's judgement per judge (no raw
        model output) and only the trace's ids, routing fields and ``test_set`` attribute. Holds one pooled
        connection until exhausted or closed.

        Raises:
            StoreError: a read failed.
        """
        try:
            async with self._pool.acquire(timeout=self._acquire_timeout) as conn, conn.transaction():
                cur = await conn.cursor(run_rows.ALL_ROWS, run_id)
                while True:
                    rows = await cur.fetch(chunk)
                    for _, result in await run_rows.with_judgements(conn, run_id, rows):
                        yield result
                    if len(rows) < chunk:
                        return
        except StoreError:
            raise
        except Exception as e:
            err = to_store_error(e, "iter_run_results")
            _log.warning("store_error", action="iter_run_results", retriable=err.retriable, error=str(err))
            raise err from e

    async def traces_for_rejudge(
        self, app: str | None, since: datetime, limit: int | None = None
    ) -> AsyncIterator[Trace]:
        """Stored traces to re-evaluate: received at or after ``since`` (UTC), of ``app`` (any when ``None``),
        outcome ``evaluated`` or ``incomplete``, not redacted (no text to judge); oldest first, at most
        ``limit``. Pages through the table (:data:`PAGE_SIZE` rows per query), so memory stays bounded.

        Raises:
            StoreError: a page could not be read.
        """
        remaining = limit
        after: tuple[datetime, str] | None = None
        while remaining is None or remaining > 0:
            page = PAGE_SIZE if remaining is None else min(PAGE_SIZE, remaining)
            cursor = after

            async def q(conn: Conn, page: int = page, cursor: Any = cursor) -> list[Any]:
                return list(
                    await conn.fetch(
                        """SELECT * FROM traces
                           WHERE received_at >= $1 AND ($2::text IS NULL OR app = $2)
                             AND outcome IN ('evaluated', 'incomplete') AND NOT redacted
                             AND ($3::timestamptz IS NULL OR (received_at, trace_id) > ($3, $4))
                           ORDER BY received_at, trace_id LIMIT $5""",
                        since,
                        app,
                        cursor[0] if cursor else None,
                        cursor[1] if cursor else None,
                        page,
                    )
                )

            rows = await self._run("traces_for_rejudge", q)
            for row in rows:
                yield trace_from_row(row)
            if len(rows) < page:
                return
            after = (rows[-1]["received_at"], rows[-1]["trace_id"])
            if remaining is not None:
                remaining -= len(rows)

    async def scored_judges(self, trace_ids: Sequence[str]) -> set[tuple[str, str]]:
        """``(trace_id, judge)`` pairs among ``trace_ids`` that have a scored (status ``ok``) judgement, any
        version — what ``rejudge`` must not shadow with an error."""

        async def q(conn: Conn) -> set[tuple[str, str]]:
            rows = await conn.fetch(
                "SELECT DISTINCT trace_id, judge FROM judgements WHERE trace_id = ANY($1::text[]) AND status = 'ok'",
                list(trace_ids),
            )
            return {(r["trace_id"], r["judge"]) for r in rows}

        return await self._run("scored_judges", q)

    # -- test sets and runs (queries in :mod:`ragpulse.store.catalog`) ------------------------------------------
    async def upsert_test_set(self, ts: CaseSource) -> None:
        """Insert or replace test set ``ts.name`` and its cases (cases no longer in ``ts`` are deleted); the
        cases are read from ``ts`` in chunks."""
        await self._run("upsert_test_set", lambda c: catalog.upsert_test_set(c, ts))

    async def link_run_cases(self, run_id: str) -> int:
        """Link run ``run_id``'s stored traces whose case is in its stored test set (the rule of a result write,
        :data:`~ragpulse.store.sql.RUN_CASES_LINK`; index ``traces_run_idx``) and pin their judgements as the
        run's case rows (:data:`~ragpulse.store.sql.RUN_JUDGEMENTS_PIN`, as a result write does), in one
        transaction; returns the links added."""

        async def link(c: Conn) -> int:
            async with c.transaction():
                rows = await c.fetch(RUN_CASES_LINK, run_id)
                if rows:
                    await c.execute(
                        RUN_JUDGEMENTS_PIN, [r["run_id"] for r in rows], [r["trace_id"] for r in rows]
                    )
                return len(rows)

        return await self._run("link_run_cases", link)

    async def get_test_set(self, name: str) -> TestSet | None:
        """The stored test set ``name`` with its cases in their original order, or ``None``."""
        return await self._run("get_test_set", lambda c: catalog.get_test_set(c, name))

    async def test_set_head(self, name: str) -> tuple[str | None, str | None, int] | None:
        """``(knowledge_base, description, case count)`` of stored test set ``name``, or ``None``."""
        return await self._run("test_set_head", lambda c: catalog.test_set_head(c, name))

    async def iter_test_cases(self, name: str, *, chunk: int = 1000) -> AsyncGenerator[TestCase, None]:
        """The cases of stored test set ``name`` in order, read through one cursor ``chunk`` at a time (bounded
        memory; holds one pooled connection until exhausted or closed).

        Raises:
            StoreError: a read failed.
        """
        try:
            async with self._pool.acquire(timeout=self._acquire_timeout) as conn, conn.transaction():
                async for case in catalog.iter_test_cases(conn, name, chunk):
                    yield case
        except StoreError:
            raise
        except Exception as e:
            err = to_store_error(e, "iter_test_cases")
            _log.warning("store_error", action="iter_test_cases", retriable=err.retriable, error=str(err))
            raise err from e

    async def test_set_hash(self, name: str) -> str | None:
        """:func:`ragpulse.model.cases_hash` of stored test set ``name``'s cases, or ``None`` when there is no
        such set (recomputed from the stored cases when they changed outside :meth:`upsert_test_set`)."""
        return await self._run("test_set_hash", lambda c: catalog.test_set_hash(c, name))

    async def create_run(self, run: RunRecord, *, replace: bool = False) -> None:
        """Insert run ``run.run_id``; re-using an id resets it to ``run``'s values (status ``running``, no
        finish time and no report by default). The owner is this process unless ``run`` names one.
        ``replace``: also drop the old run's trace links (the id is re-used for other cases)."""
        await self._run("create_run", lambda c: catalog.create_run(c, run, replace=replace))

    async def heartbeat_run(self, run_id: str) -> bool:
        """Say that run ``run_id``'s process is alive (``heartbeat_at`` = now); ``False`` if it is not
        ``running``."""
        return await self._run("heartbeat_run", lambda c: catalog.heartbeat_run(c, run_id))

    async def finish_run(self, run_id: str, status: RunStatus, report: dict[str, Any]) -> None:
        """Mark run ``run_id`` finished now with ``status`` and its ``report`` (JSON-able mapping).

        Raises:
            StoreError: unknown run id (``retriable=False``) or the database failed.
        """
        await self._run("finish_run", lambda c: catalog.finish_run(c, run_id, status, report))

    async def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """The ``limit`` most recently started runs, newest first."""
        return await self._run("list_runs", lambda c: catalog.list_runs(c, limit))

    async def get_run(self, run_id: str) -> RunRecord | None:
        """Run ``run_id`` or ``None``."""
        return await self._run("get_run", lambda c: catalog.get_run(c, run_id))

    # -- calibration profiles (queries in :mod:`ragpulse.store.calibrations`) -------------------------------------
    async def write_shadow_judgements(
        self,
        trace_id: str,
        app: str | None,
        judgements: Sequence[Judgement],
        content_hash: str | None = None,
    ) -> None:
        """Store the shadow judgements of one trace apart from its judgements (:mod:`ragpulse.store.shadows`);
        ``content_hash`` (:attr:`ragpulse.model.Trace.content_hash`) makes its ``ok`` ones reusable by a
        promotion; ``redact_text`` applies as to judgements (reason code only, no raw output)."""
        if judgements:
            await self._run(
                "write_shadow_judgements",
                lambda c: shadows.write_shadows(
                    c, trace_id, app, judgements, content_hash, redact_text=self._redact
                ),
            )

    async def shadow_pairs(
        self, judge: str, main_version: str, shadow_version: str, since: datetime | None = None
    ) -> list[shadows.ShadowPair]:
        """Shadow judgements of ``judge`` at ``shadow_version`` since ``since`` with the trace's judgement at
        ``main_version`` (oldest first; :func:`ragpulse.store.shadows.shadow_pairs`)."""
        return await self._run(
            "shadow_pairs", lambda c: shadows.shadow_pairs(c, judge, main_version, shadow_version, since)
        )

    async def shadow_versions(self, pairs: Sequence[tuple[str, str]]) -> frozenset[tuple[str, str]]:
        """``(judge, version)`` pairs with reusable shadow judgements (:func:`ragpulse.store.shadows.shadow_versions`).

        Raises:
            StoreError: the query failed.
        """
        return await self._run("shadow_versions", lambda c: shadows.shadow_versions(c, pairs))

    async def reusable_shadows(
        self, keys: Sequence[tuple[str, str]], pairs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[tuple[str, str], Judgement]]:
        """Reusable shadow judgements of ``(trace_id, content_hash)`` keys for ``(judge, version)`` pairs
        (:func:`ragpulse.store.shadows.reusable_shadows`).

        Raises:
            StoreError: the query failed.
        """
        return await self._run("reusable_shadows", lambda c: shadows.reusable_shadows(c, keys, pairs))

    async def shadow_counts(self, judge: str, version: str) -> dict[str, Any]:
        """Stored shadow judgements of ``judge`` at ``version`` (:func:`ragpulse.store.shadows.shadow_counts`)."""
        return await self._run("shadow_counts", lambda c: shadows.shadow_counts(c, judge, version))

    async def save_calibration_profile(self, profile: CalibrationProfile) -> None:
        """Store ``profile``, replacing one with the same judge, judge version and name."""
        await self._run("save_calibration_profile", lambda c: calibrations.save_profile(c, profile))

    async def list_calibration_profiles(self, judge: str | None = None) -> list[CalibrationProfile]:
        """Stored calibration profiles (of ``judge`` when given), newest first."""
        return await self._run("list_calibration_profiles", lambda c: calibrations.list_profiles(c, judge))

    async def latest_calibration_profile(self, judge: str, judge_version: str) -> CalibrationProfile | None:
        """The newest profile of exactly ``judge`` at ``judge_version`` (the one corrected pass rates use)."""
        return await self._run(
            "latest_calibration_profile", lambda c: calibrations.latest_profile(c, judge, judge_version)
        )

    async def window_pass_counts(
        self, judge_versions: Mapping[str, str], window: timedelta
    ) -> list[tuple[str, str | None, int, int]]:
        """``(judge, app, passed, scored)`` of live traffic in the last ``window`` for each judge's version
        (see :func:`ragpulse.store.calibrations.window_pass_counts`)."""
        return await self._run(
            "window_pass_counts", lambda c: calibrations.window_pass_counts(c, judge_versions, window)
        )

    # -- review labels and queue (migration 222) ---------------------------------------------------------------
    async def review_queue(self, q: reviews.QueueQuery, limit: int) -> list[dict[str, Any]]:
        """A page of the review queue (:func:`ragpulse.store.reviews.queue_page`)."""
        return await self._run("review_queue", lambda c: reviews.queue_page(c, q, limit))

    async def save_review_label(
        self, trace_id: str, judge: str, version: str, *, agree: bool, reviewer: str
    ) -> dict[str, Any] | None:
        """Store a review label (:func:`ragpulse.store.reviews.upsert_label`); ``None``: no such judgement."""
        return await self._run(
            "save_review_label",
            lambda c: reviews.upsert_label(c, trace_id, judge, version, agree=agree, reviewer=reviewer),
        )

    async def review_label_counts(self, judge: str, version: str) -> reviews.LabelCounts:
        """Confusion counts of a judge version against its review labels."""
        return await self._run("review_label_counts", lambda c: reviews.label_counts(c, judge, version))

    async def labelled_judgements(self, judge: str, version: str) -> list[tuple[Judgement, bool]]:
        """The labelled judgements of a judge version with their human labels (``True`` = good)."""
        rows = await self._run(
            "labelled_judgements", lambda c: reviews.labelled_judgements(c, judge, version)
        )
        return [(judgement_from_row(r), label) for r, label in rows]

    # -- results stream outbox (migration 061) -------------------------------------------------------------------
    async def publish_pending(
        self, publish: Callable[[list[dict[str, Any]]], Awaitable[None]], limit: int = 500
    ) -> int:
        """Hand up to ``limit`` unpublished judgements (oldest first) to ``publish``, then mark them published,
        in one transaction; return how many.

        The rows are locked (``FOR UPDATE SKIP LOCKED``) while ``publish`` runs, so replicas never publish the
        same row at once; when ``publish`` raises nothing is marked and the rows are offered again (at least
        once). Each row: ``trace_id``, ``judge``, ``version``, ``app``, ``scenario``, ``status``, ``score``,
        ``passed``, ``reason``, ``flags`` (dict), ``time`` (when stored, UTC).
        """

        async def q(conn: Conn) -> int:
            async with conn.transaction():
                rows = await conn.fetch(
                    """SELECT j.trace_id, j.judge, j.version, j.app, t.scenario, j.status, j.score, j.passed,
                              j.reason, j.flags, j.updated_at AS time, t.session_id, t.model AS trace_model,
                              t.prompt_tokens, t.completion_tokens, t.total_prompt_tokens,
                              t.total_completion_tokens, t.usage
                       FROM judgements j JOIN traces t ON t.trace_id = j.trace_id
                       WHERE j.published_at IS NULL
                       ORDER BY j.updated_at
                       LIMIT $1
                       FOR UPDATE OF j SKIP LOCKED""",
                    limit,
                )
                if not rows:
                    return 0
                try:
                    await publish([dict(r) for r in rows])
                except Exception as e:  # the publisher's error, not the store's: roll back, re-raise as is
                    raise _PublishFailed(e) from e
                await conn.execute(
                    """UPDATE judgements j SET published_at = now()
                       FROM unnest($1::text[], $2::text[], $3::text[]) AS k(trace_id, judge, version)
                       WHERE j.trace_id = k.trace_id AND j.judge = k.judge AND j.version = k.version""",
                    [r["trace_id"] for r in rows],
                    [r["judge"] for r in rows],
                    [r["version"] for r in rows],
                )
                return len(rows)

        try:
            return await self._run("publish_pending", q)
        except _PublishFailed as e:
            raise e.cause from e.cause.__cause__

    # -- retention and dead letters -------------------------------------------------------------------------------
    async def prune(self, older_than: timedelta) -> int:
        """Delete traces received more than ``older_than`` ago (their judgements, judgement history and run
        links cascade), dead letters and shadow judgements older than that; return the number of traces deleted.

        Batched deletes by time, oldest first (docs/storage.md, "Retention"): each transaction deletes at most
        :data:`PRUNE_CHUNK` traces (or dead letters, or shadow judgements), found by a keyset walk of the
        ``received_at`` index, so no lock is held long, concurrent writers of new traces never wait, and an
        interrupted prune has removed the oldest rows. Measured on 10 million judgements: a day (111,000 traces,
        330,000 judgements) in 5–6 s (bench/README.md). Runs and test sets are kept.
        """

        async def q(conn: Conn) -> int:
            cutoff = await conn.fetchval("SELECT now() - $1::interval", older_than)
            total = 0
            after: tuple[datetime, str] | None = None
            while True:
                row = await conn.fetchrow(_PRUNE_TRACES, cutoff, PRUNE_CHUNK, *(after or (None, None)))
                assert row is not None
                total += int(row["deleted"])
                if row["found"] < PRUNE_CHUNK:
                    break
                after = (row["last_at"], row["last_id"])
            for table, column in (("dead_letters", "created_at"), ("shadow_judgements", "created_at")):
                while True:
                    status = await conn.execute(
                        f"""DELETE FROM {table} WHERE ctid = ANY(ARRAY(
                              SELECT ctid FROM {table} WHERE {column} < $1 LIMIT $2))""",
                        cutoff,
                        PRUNE_CHUNK,
                    )
                    if int(status.split()[-1]) < PRUNE_CHUNK:
                        break
            return total

        deleted = await self._run("prune", q)
        _log.info("store_pruned", traces_deleted=deleted, older_than_s=older_than.total_seconds())
        return deleted

    async def write_dead_letter(
        self, source: str, reason: str, payload: bytes | str, meta: dict[str, Any] | None = None
    ) -> None:
        """Keep an input that could not be processed: ``source`` (``kafka``/``otlp``/…), a ``reason``, the
        raw ``payload`` (``str`` is stored UTF-8 encoded) and JSON-able ``meta`` (topic, partition, offset…).

        Under ``redact_text`` the payload (production text) is not stored: an empty payload and, in ``meta``,
        ``redacted: true``, ``payload_bytes`` (its size) and ``payload_sha256`` (hex of its SHA-256).
        """
        data = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
        if self._redact:
            meta = {**(meta or {}), **redacted_payload_meta(data)}
            data = b""

        async def q(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO dead_letters (source, reason, payload, meta) VALUES ($1, $2, $3, $4)",
                source,
                clean(reason) or "",
                data,
                meta or {},
            )

        await self._run("write_dead_letter", q)

    # -- daily judge-model token budget (ragpulse.protocols.TokenLedger) --------------------------------------------
    async def reserve_tokens(self, judge: str, day: str, tokens: int, budget: int | None) -> int | None:
        """Add ``tokens`` to ``judge_token_ledger`` for ``(day, judge)`` unless the total already reached
        ``budget``; the new total, or ``None`` when refused. One statement: atomic across replicas."""

        async def q(conn: Conn) -> int | None:
            total = await conn.fetchval(
                """INSERT INTO judge_token_ledger AS l (day, judge, tokens) VALUES ($1::text::date, $2, $3)
                   ON CONFLICT (day, judge) DO UPDATE
                   SET tokens = l.tokens + EXCLUDED.tokens, updated_at = now()
                   WHERE $4::bigint IS NULL OR l.tokens < $4::bigint
                   RETURNING tokens""",
                day,
                judge,
                tokens,
                budget,
            )
            return None if total is None else int(total)

        if budget is not None and budget <= 0:
            return None
        return await self._run("reserve_tokens", q)

    async def charge_tokens(self, judge: str, day: str, tokens: int) -> int:
        """Add ``tokens`` (may be negative) to ``(day, judge)``; returns the new total."""

        async def q(conn: Conn) -> int:
            total = await conn.fetchval(
                """INSERT INTO judge_token_ledger AS l (day, judge, tokens) VALUES ($1::text::date, $2, $3)
                   ON CONFLICT (day, judge) DO UPDATE SET tokens = l.tokens + EXCLUDED.tokens, updated_at = now()
                   RETURNING tokens""",
                day,
                judge,
                tokens,
            )
            return int(total)

        return await self._run("charge_tokens", q)

    # -- pending inputs (accepted, result not stored yet; ragpulse.protocols.PendingStore) -----------------------
    async def add_pending(self, source: str, items: Sequence[tuple[str, bytes]]) -> None:
        """Keep ``(key, payload)`` items of ``source`` in ``pending_inputs`` (one transaction)."""
        if not items:
            return

        async def q(conn: Conn) -> None:
            await conn.execute(
                """INSERT INTO pending_inputs (source, key, payload)
                   SELECT $1, k, p FROM unnest($2::text[], $3::bytea[]) AS t(k, p)""",
                source,
                [k for k, _ in items],
                [p for _, p in items],
            )

        await self._run("add_pending", q)

    async def load_pending(self, source: str) -> list[tuple[str, bytes]]:
        """Every pending key of ``source`` with its payloads concatenated in arrival order (for OTLP the
        concatenation of serialized requests is itself one valid request), oldest key first."""

        async def q(conn: Conn) -> list[tuple[str, bytes]]:
            rows = await conn.fetch(
                """SELECT key, string_agg(payload, ''::bytea ORDER BY id) AS payload, min(id) AS first
                   FROM pending_inputs WHERE source = $1 GROUP BY key ORDER BY first""",
                source,
            )
            return [(str(r["key"]), bytes(r["payload"])) for r in rows]

        return await self._run("load_pending", q)

    async def remove_pending(self, source: str, keys: Sequence[str]) -> None:
        """Delete the pending payloads of ``keys``."""
        if not keys:
            return

        async def q(conn: Conn) -> None:
            await conn.execute(
                "DELETE FROM pending_inputs WHERE source = $1 AND key = ANY($2::text[])", source, list(keys)
            )

        await self._run("remove_pending", q)

    async def dead_letter_pending(self, source: str, key: str, reason: str) -> None:
        """Move the pending payloads of ``key`` into one dead letter (payloads concatenated, ``meta.key``; under
        ``redact_text`` only their size and SHA-256, as :meth:`write_dead_letter`)."""
        sql = _DEAD_LETTER_PENDING_REDACTED if self._redact else _DEAD_LETTER_PENDING

        async def q(conn: Conn) -> None:
            async with conn.transaction():
                await conn.execute(
                    sql,
                    source,
                    key,
                    clean(reason) or "",
                )
                await conn.execute("DELETE FROM pending_inputs WHERE source = $1 AND key = $2", source, key)

        await self._run("dead_letter_pending", q)

    async def list_dead_letters(self, limit: int = 100) -> list[dict[str, Any]]:
        """Newest dead letters first: dicts with ``id``, ``source``, ``reason``, ``payload`` (bytes), ``meta``,
        ``created_at``."""

        async def q(conn: Conn) -> list[dict[str, Any]]:
            rows = await conn.fetch("SELECT * FROM dead_letters ORDER BY id DESC LIMIT $1", limit)
            return [dict(r) for r in rows]

        return await self._run("list_dead_letters", q)


if TYPE_CHECKING:  # PostgresStore satisfies the ResultStore seam (checked by mypy)

    def _is_result_store(store: PostgresStore) -> ResultStore:
        return store

    def _is_pending_store(store: PostgresStore) -> PendingStore:
        return store
