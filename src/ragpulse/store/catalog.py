"""Test sets and runs: the store's catalogue queries, as functions on one asyncpg connection.

``PostgresStore`` calls these inside its error mapping (asyncpg/OS errors become ``StoreError``); they live
apart from the result writes so that each module keeps one responsibility.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragpulse.errors import StoreError
from ragpulse.model import RunRecord, RunStatus, TestCase, TestSet
from ragpulse.owner import OWNER_HOST
from ragpulse.protocols import CaseSource
from ragpulse.store.migrate import Conn
from ragpulse.store.rows import Row, clean, run_from_row, utc

__all__ = [
    "CaseImport",
    "CaseWrite",
    "case_page",
    "create_run",
    "delete_case",
    "finish_run",
    "get_case",
    "get_run",
    "get_test_set",
    "heartbeat_run",
    "import_cases",
    "insert_case",
    "list_runs",
    "put_case",
    "test_set_hash",
    "upsert_test_set",
]

_UPSERT_SET = """
INSERT INTO test_sets (name, knowledge_base, description, case_count) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET knowledge_base = excluded.knowledge_base,
  description = excluded.description, case_count = excluded.case_count, updated_at = now()
"""

_UPSERT_CASE = """
INSERT INTO test_cases (test_set, case_id, position, question, expected_answer, keywords, reference_contexts,
  answer, contexts, doc_ids, context_labels, metadata)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (test_set, case_id) DO UPDATE SET position = excluded.position, question = excluded.question,
  expected_answer = excluded.expected_answer, keywords = excluded.keywords,
  reference_contexts = excluded.reference_contexts, answer = excluded.answer, contexts = excluded.contexts,
  doc_ids = excluded.doc_ids, context_labels = excluded.context_labels, metadata = excluded.metadata,
  updated_at = now()
"""

_UPSERT_RUN = """
INSERT INTO runs (run_id, test_set, started_at, finished_at, status, judges, settings, report, cases_hash,
  owner_host, owner_pid, heartbeat_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, CASE WHEN $5 = 'running' THEN now() END)
ON CONFLICT (run_id) DO UPDATE SET test_set = excluded.test_set, started_at = excluded.started_at,
  finished_at = excluded.finished_at, status = excluded.status, judges = excluded.judges,
  settings = excluded.settings, report = excluded.report, cases_hash = excluded.cases_hash,
  owner_host = excluded.owner_host, owner_pid = excluded.owner_pid, heartbeat_at = excluded.heartbeat_at,
  updated_at = now()
"""

#: ``runs`` columns plus the database's clock (``db_now``), which :func:`run_from_row` compares heartbeats with.
_RUN_COLUMNS = "*, now() AS db_now"


def _texts(values: Any) -> list[str | None]:
    return [clean(v) for v in values]  # positions kept (doc_ids may hold None)


def _case_args(test_set: str, pos: int, c: TestCase) -> tuple[Any, ...]:
    # every text NUL-free: PostgreSQL rejects U+0000 in text, text[] and jsonb (a test set may hold "\u0000")
    return (
        clean(test_set),
        clean(c.id),
        pos,
        clean(c.question),
        clean(c.expected_answer),
        _texts(c.keywords) if c.keywords is not None else None,
        _texts(c.reference_contexts),
        clean(c.answer),
        _texts(c.contexts),
        _texts(c.doc_ids),
        list(c.context_labels) if c.context_labels is not None else None,
        c.metadata,
    )


def _case_from_row(c: Row) -> TestCase:
    return TestCase(
        id=c["case_id"],
        question=c["question"],
        expected_answer=c["expected_answer"],
        keywords=c["keywords"],
        reference_contexts=tuple(c["reference_contexts"] or ()),
        answer=c["answer"],
        contexts=tuple(c["contexts"] or ()),
        doc_ids=tuple(c["doc_ids"] or ()),
        context_labels=tuple(c["context_labels"]) if c["context_labels"] is not None else None,
        metadata=c["metadata"] or {},
    )


#: Cases written per statement by :func:`upsert_test_set`.
CASE_CHUNK = 1000


async def upsert_test_set(conn: Conn, ts: CaseSource) -> None:
    """Insert or replace test set ``ts.name`` and its cases in one transaction (cases no longer in ``ts`` are
    deleted; ``position`` keeps the file order) and record its ``content_hash`` (:func:`ragpulse.model.cases_hash`).
    The cases are read from ``ts`` and written :data:`CASE_CHUNK` at a time, so a large streamed set is never
    held in memory.

    The transaction sets ``ragpulse.hashing = 'on'`` so the ``test_cases`` triggers (migration 013), which clear
    the hash on any other change, leave this one alone.
    """
    async with conn.transaction():
        await conn.execute("SELECT set_config('ragpulse.hashing', 'on', true)")
        name = clean(ts.name)
        await conn.execute(_UPSERT_SET, name, clean(ts.knowledge_base), clean(ts.description), ts.case_count)
        ids: list[str | None] = []
        chunk: list[tuple[Any, ...]] = []
        for i, c in enumerate(ts.iter_cases()):
            ids.append(clean(c.id))
            chunk.append(_case_args(ts.name, i, c))
            if len(chunk) >= CASE_CHUNK:
                await conn.executemany(_UPSERT_CASE, chunk)
                chunk = []
        if chunk:
            await conn.executemany(_UPSERT_CASE, chunk)
        await conn.execute(
            "DELETE FROM test_cases WHERE test_set = $1 AND NOT (case_id = ANY($2::text[]))", name, ids
        )
        await conn.execute("UPDATE test_sets SET content_hash = $2 WHERE name = $1", name, ts.content_hash())


async def test_set_hash(conn: Conn, name: str) -> str | None:
    """The ``content_hash`` of stored test set ``name`` (``None`` when there is no such set).

    A set whose hash is not known (cases changed outside :func:`upsert_test_set`, e.g. in the portal, or stored
    before migration 013) is read back, hashed and the hash recorded.
    """
    name = clean(name) or ""
    row = await conn.fetchrow("SELECT content_hash FROM test_sets WHERE name = $1", name)
    if row is None:
        return None
    if row["content_hash"] is not None:
        return str(row["content_hash"])
    ts = await get_test_set(conn, name)
    if ts is None:  # deleted meanwhile
        return None
    digest = ts.content_hash()
    await conn.execute(
        "UPDATE test_sets SET content_hash = $2 WHERE name = $1 AND content_hash IS NULL", name, digest
    )
    return digest


async def get_test_set(conn: Conn, name: str) -> TestSet | None:
    """The stored test set ``name`` with its cases in their original order, or ``None``."""
    row = await conn.fetchrow("SELECT * FROM test_sets WHERE name = $1", name)
    if row is None:
        return None
    cases = await conn.fetch("SELECT * FROM test_cases WHERE test_set = $1 ORDER BY position", name)
    return TestSet(
        name=row["name"],
        knowledge_base=row["knowledge_base"],
        description=row["description"],
        cases=tuple(_case_from_row(c) for c in cases),
    )


async def test_set_head(conn: Conn, name: str) -> tuple[str | None, str | None, int] | None:
    """``(knowledge_base, description, stored case count)`` of test set ``name``, or ``None``."""
    row = await conn.fetchrow(
        "SELECT knowledge_base, description, (SELECT count(*) FROM test_cases WHERE test_set = $1) AS n "
        "FROM test_sets WHERE name = $1",
        name,
    )
    return None if row is None else (row["knowledge_base"], row["description"], int(row["n"]))


async def iter_test_cases(conn: Conn, name: str, chunk: int) -> AsyncGenerator[TestCase, None]:
    """The cases of test set ``name`` in order, read through a cursor ``chunk`` rows at a time (``conn`` must be
    in a transaction)."""
    cur = await conn.cursor("SELECT * FROM test_cases WHERE test_set = $1 ORDER BY position", name)
    while True:
        rows = await cur.fetch(chunk)
        for r in rows:
            yield _case_from_row(r)
        if len(rows) < chunk:
            return


# -- one case at a time (the portal and the API) ---------------------------------------------------------------
# Every write below is one short transaction that first locks the test set's row (``FOR UPDATE``): writes to one
# set are serialised (no lost update, ``case_count`` stays exact), writes to other sets and all reads go on. A
# write touches only its own rows — never the whole set — so its cost does not grow with the set's size.

_LOCK_SET = "SELECT case_count FROM test_sets WHERE name = $1 FOR UPDATE"
_NEXT_POSITION = "SELECT coalesce(max(position), -1) + 1 FROM test_cases WHERE test_set = $1"
_CASE_EXISTS = "SELECT 1 FROM test_cases WHERE test_set = $1 AND case_id = $2"

#: What a one-case write did: ``no_set`` (no such test set), ``exists`` (:func:`insert_case`: the id is taken),
#: ``full`` (the set holds ``max_cases`` already), ``created``, ``updated``.
CaseWrite = Literal["no_set", "exists", "full", "created", "updated"]


async def get_case(conn: Conn, name: str, case_id: str) -> TestCase | None:
    """Case ``case_id`` of test set ``name`` (one primary-key lookup), or ``None``."""
    row = await conn.fetchrow("SELECT * FROM test_cases WHERE test_set = $1 AND case_id = $2", name, case_id)
    return _case_from_row(row) if row is not None else None


async def case_page(conn: Conn, name: str, after: int | None, limit: int) -> list[tuple[int, TestCase]]:
    """Up to ``limit`` cases of test set ``name`` as ``(position, case)``, in order, after position ``after``
    (keyset on the ``(test_set, position)`` index: a page costs the same at the start and the end of a large set).
    """
    rows = await conn.fetch(
        "SELECT * FROM test_cases WHERE test_set = $1 AND position > $2 ORDER BY position LIMIT $3",
        name,
        -1 if after is None else after,
        limit,
    )
    return [(int(r["position"]), _case_from_row(r)) for r in rows]


async def insert_case(
    conn: Conn, name: str, case: TestCase, *, max_cases: int, auto_id: bool = False
) -> tuple[CaseWrite, str]:
    """Append ``case`` to test set ``name`` (position after the last); ``auto_id``: ignore ``case.id`` and use
    the first free ``case-N`` from N = case count + 1. Returns ``(outcome, case id)``: ``created``, ``exists``,
    ``full`` or ``no_set``."""
    async with conn.transaction():
        count = await conn.fetchval(_LOCK_SET, name)
        if count is None:
            return "no_set", case.id
        cid = case.id
        if auto_id:
            n = int(count) + 1
            while await conn.fetchval(_CASE_EXISTS, name, f"case-{n}") is not None:
                n += 1
            cid = f"case-{n}"
        elif await conn.fetchval(_CASE_EXISTS, name, clean(cid)) is not None:
            return "exists", cid
        if int(count) >= max_cases:
            return "full", cid
        pos = await conn.fetchval(_NEXT_POSITION, name)
        await conn.execute(_UPSERT_CASE, *_case_args(name, int(pos), case.model_copy(update={"id": cid})))
        await conn.execute(
            "UPDATE test_sets SET case_count = case_count + 1, updated_at = now() WHERE name = $1", name
        )
        return "created", cid


async def put_case(conn: Conn, name: str, case: TestCase, *, max_cases: int) -> CaseWrite:
    """Create or replace case ``case.id`` of test set ``name`` (a replaced case keeps its position). Returns
    ``created``, ``updated``, ``full`` or ``no_set``."""
    async with conn.transaction():
        count = await conn.fetchval(_LOCK_SET, name)
        if count is None:
            return "no_set"
        pos = await conn.fetchval(
            "SELECT position FROM test_cases WHERE test_set = $1 AND case_id = $2", name, clean(case.id)
        )
        created = pos is None
        if created:
            if int(count) >= max_cases:
                return "full"
            pos = await conn.fetchval(_NEXT_POSITION, name)
        await conn.execute(_UPSERT_CASE, *_case_args(name, int(pos), case))
        await conn.execute(
            "UPDATE test_sets SET case_count = case_count + $2, updated_at = now() WHERE name = $1",
            name,
            1 if created else 0,
        )
        return "created" if created else "updated"


async def delete_case(conn: Conn, name: str, case_id: str) -> CaseWrite | Literal["deleted", "no_case"]:
    """Delete case ``case_id`` of test set ``name``: ``deleted``, ``no_case`` or ``no_set``."""
    async with conn.transaction():
        if await conn.fetchval(_LOCK_SET, name) is None:
            return "no_set"
        done = await conn.execute(
            "DELETE FROM test_cases WHERE test_set = $1 AND case_id = $2", name, case_id
        )
        if done == "DELETE 0":
            return "no_case"
        await conn.execute(
            "UPDATE test_sets SET case_count = case_count - 1, updated_at = now() WHERE name = $1", name
        )
        return "deleted"


@dataclass(frozen=True)
class CaseImport:
    """What :func:`import_cases` did: ``outcome`` (``no_set``, ``full`` or ``created``), the ids ``created``
    and ``updated`` (in input order) and the set's ``case_count`` afterwards (for ``full``: what it would
    have been)."""

    outcome: CaseWrite
    created: frozenset[str]
    updated: frozenset[str]
    case_count: int


async def import_cases(
    conn: Conn, name: str, cases: Sequence[TestCase], *, replace: bool, max_cases: int
) -> CaseImport:
    """Write ``cases`` into test set ``name`` in one transaction, :data:`CASE_CHUNK` per statement.

    ``replace``: the cases become the whole set (positions from 0); else they are appended (a case whose id
    exists replaces it in its position). A later case with the same id as an earlier one replaces it. Nothing
    is written when the set would hold more than ``max_cases`` (``full``).
    """
    last: dict[str, TestCase] = {}
    for c in cases:
        last[clean(c.id) or ""] = c
    async with conn.transaction():
        count = await conn.fetchval(_LOCK_SET, name)
        if count is None:
            return CaseImport("no_set", frozenset(), frozenset(), 0)
        ids = list(last)
        positions: dict[str, int] = {}
        if not replace:
            rows = await conn.fetch(
                "SELECT case_id, position FROM test_cases WHERE test_set = $1 AND case_id = ANY($2::text[])",
                name,
                ids,
            )
            positions = {r["case_id"]: int(r["position"]) for r in rows}
        new_ids = [i for i in ids if i not in positions]
        total = len(ids) if replace else int(count) + len(new_ids)
        created, updated = frozenset(new_ids), frozenset(positions)
        if total > max_cases:
            return CaseImport("full", created, updated, total)
        if replace:
            await conn.execute("DELETE FROM test_cases WHERE test_set = $1", name)
            nxt = 0
        else:
            nxt = int(await conn.fetchval(_NEXT_POSITION, name))
        chunk: list[tuple[Any, ...]] = []
        for cid, c in last.items():
            pos = positions.get(cid)
            if pos is None:
                pos, nxt = nxt, nxt + 1
            chunk.append(_case_args(name, pos, c))
            if len(chunk) >= CASE_CHUNK:
                await conn.executemany(_UPSERT_CASE, chunk)
                chunk = []
        if chunk:
            await conn.executemany(_UPSERT_CASE, chunk)
        await conn.execute(
            "UPDATE test_sets SET case_count = $2, updated_at = now() WHERE name = $1", name, total
        )
        return CaseImport("created", created, updated, total)


async def create_run(conn: Conn, run: RunRecord, *, replace: bool = False) -> None:
    """Insert run ``run.run_id``; re-using an id resets it to ``run``'s values (status ``running``, no finish
    time, no report by default; ``heartbeat_at`` is now while ``running``). The owner is ``run.owner_host`` /
    ``run.owner_pid`` when set, else this process (:data:`~ragpulse.owner.OWNER_HOST`, ``os.getpid()``).

    ``replace``: the run id is re-used for other cases, so the old run's trace links (``run_cases``) and pinned
    case rows (``run_judgements``) are deleted first (its traces and judgements stay, as history outside the run).
    """
    async with conn.transaction():
        if replace:
            await conn.execute("DELETE FROM run_judgements WHERE run_id = $1", run.run_id)
            await conn.execute("DELETE FROM run_cases WHERE run_id = $1", run.run_id)
        await conn.execute(
            _UPSERT_RUN,
            run.run_id,
            run.test_set,
            utc(run.started_at),
            utc(run.finished_at),
            run.status.value,
            run.judges,
            run.settings,
            run.report,
            run.cases_hash,
            run.owner_host or OWNER_HOST,
            run.owner_pid if run.owner_pid is not None else os.getpid(),
        )


async def heartbeat_run(conn: Conn, run_id: str) -> bool:
    """Set ``heartbeat_at`` of run ``run_id`` to now while it is ``running``; ``False`` if it is not."""
    done = await conn.execute(
        "UPDATE runs SET heartbeat_at = now() WHERE run_id = $1 AND status = 'running'", run_id
    )
    return done != "UPDATE 0"


async def finish_run(conn: Conn, run_id: str, status: RunStatus, report: dict[str, Any]) -> None:
    """Mark run ``run_id`` finished now with ``status`` and ``report``.

    Raises:
        StoreError: unknown run id (``retriable=False``).
    """
    done = await conn.execute(
        "UPDATE runs SET status = $2, report = $3, finished_at = now(), updated_at = now() WHERE run_id = $1",
        run_id,
        status.value,
        report,
    )
    if done == "UPDATE 0":
        raise StoreError(f"finish_run failed: unknown run {run_id!r}", retriable=False)


async def list_runs(conn: Conn, limit: int = 50) -> list[RunRecord]:
    """The ``limit`` most recently started runs, newest first."""
    rows = await conn.fetch(
        f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY started_at DESC, run_id LIMIT $1", limit
    )
    return [run_from_row(r) for r in rows]


async def get_run(conn: Conn, run_id: str) -> RunRecord | None:
    """Run ``run_id`` or ``None``."""
    row = await conn.fetchrow(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = $1", run_id)
    return run_from_row(row) if row is not None else None
