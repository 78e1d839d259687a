"""SQL text of the store's statements (built once at import from the column lists in :mod:`.rows`)."""

from __future__ import annotations

from ragpulse.store.rows import JUDGEMENT_COLUMNS, TRACE_COLUMNS

__all__ = [
    "FINAL_JUDGEMENTS",
    "JUDGEMENT_STAGE",
    "JUDGEMENT_UPSERT",
    "RUN_CASES_UPSERT",
    "STAGE_TABLES",
    "TRACE_STAGE",
    "TRACE_UPSERT",
]

#: Session-local staging tables (``pg_temp``) that ``write_results`` fills with binary ``COPY`` and upserts from;
#: emptied at every commit. Same columns as :data:`~ragpulse.store.rows.TRACE_COLUMNS` /
#: :data:`~ragpulse.store.rows.JUDGEMENT_COLUMNS` (JSON columns as text, cast on the way out).
TRACE_STAGE = "ragpulse_stage_traces"
JUDGEMENT_STAGE = "ragpulse_stage_judgements"


def _stage_ddl(name: str, columns: tuple[tuple[str, str, bool], ...]) -> str:
    cols = ", ".join(f"{n} {typ}" for n, typ, _ in columns)
    return f"CREATE TEMP TABLE IF NOT EXISTS {name} ({cols}) ON COMMIT DELETE ROWS"


#: Creates the staging tables on a new pooled connection (``PostgresStore.connect``'s pool ``init``).
STAGE_TABLES = ";\n".join(
    (_stage_ddl(TRACE_STAGE, TRACE_COLUMNS), _stage_ddl(JUDGEMENT_STAGE, JUDGEMENT_COLUMNS))
)


def _bulk_upsert(
    table: str,
    alias: str,
    columns: tuple[tuple[str, str, bool], ...],
    key: tuple[str, ...],
    compare: tuple[str, ...],
    keep: tuple[str, ...],
    returning: str,
    where: str | None = None,
    *,
    stage: str,
) -> str:
    """``INSERT … SELECT FROM pg_temp.<stage> ORDER BY key ON CONFLICT (key) DO UPDATE … WHERE (compare) IS
    DISTINCT FROM (excluded.compare) RETURNING …``: rows in key order, so concurrent writers with overlapping
    keys lock rows in the same order (no deadlock); columns in ``keep`` keep their first stored value; ``where``
    (SQL over ``<alias>.col`` and ``excluded.col``) replaces the default update condition."""
    names = [c[0] for c in columns]
    rows = f"FROM pg_temp.{stage} u ORDER BY {', '.join(f'u.{k}' for k in key)}"
    select = ", ".join(f"u.{n}::jsonb" if js else f"u.{n}" for n, _, js in columns)
    updates = [f"{n} = excluded.{n}" for n in names if n not in key and n not in keep]
    updates.append("updated_at = now()")
    cmp_old = ", ".join(f"{alias}.{c}" for c in compare)
    cmp_new = ", ".join(f"excluded.{c}" for c in compare)
    condition = where or f"({cmp_old}) IS DISTINCT FROM ({cmp_new})"
    return (
        f"INSERT INTO {table} AS {alias} ({', '.join(names)})\n"
        f"SELECT {select}\n{rows}\n"
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {', '.join(updates)}\n"
        f"WHERE {condition}\n"
        f"RETURNING {returning}"
    )


#: Upsert of the trace rows in :data:`TRACE_STAGE`; an unchanged trace is not touched. ``received_at`` keeps its
#: first value.
TRACE_UPSERT = _bulk_upsert(
    "traces",
    "t",
    TRACE_COLUMNS,
    key=("trace_id",),
    compare=tuple(c[0] for c in TRACE_COLUMNS if c[0] not in ("trace_id", "received_at")),
    keep=("received_at",),
    returning="t.trace_id, (t.xmax = 0) AS inserted",
    stage=TRACE_STAGE,
)

#: The columns that make a judgement's verdict; only a change in one of them counts as "changed".
#: Latency, tokens, flags, raw output and reason wording vary between re-runs of the same judge version on
#: the same trace (a redelivery), so they neither count as a change nor overwrite the first stored values.
VERDICT_COLUMNS = ("status", "score", "passed", "threshold", "backend", "model", "declared_version")

_VERDICT_OLD = ", ".join(f"j.{c}" for c in VERDICT_COLUMNS)
_VERDICT_NEW = ", ".join(f"excluded.{c}" for c in VERDICT_COLUMNS)

#: Upsert of the judgement rows in :data:`JUDGEMENT_STAGE`, keyed (trace_id, judge, version); returns only rows
#: inserted or replaced. A stored ``ok``/``skipped`` judgement is final for its judged content
#: (``content_hash``): the same content never replaces it, whatever the new verdict (a non-deterministic judge on
#: a redelivery). Other content replaces it (migration 110 keeps the replaced row in ``judgement_history``); a
#: stored ``error`` is replaced by a different verdict.
JUDGEMENT_UPSERT = _bulk_upsert(
    "judgements",
    "j",
    JUDGEMENT_COLUMNS,
    key=("trace_id", "judge", "version"),
    compare=VERDICT_COLUMNS,
    keep=(),
    returning="j.trace_id, j.judge, j.version, (j.xmax = 0) AS inserted",
    where=(
        "j.content_hash IS DISTINCT FROM excluded.content_hash"
        f" OR (j.status = 'error' AND ({_VERDICT_OLD}) IS DISTINCT FROM ({_VERDICT_NEW}))"
    ),
    stage=JUDGEMENT_STAGE,
)

#: Final (``ok``/``skipped``) judgements of ``(trace_id, content_hash)`` pairs (two text arrays).
FINAL_JUDGEMENTS = """
SELECT j.trace_id, j.content_hash, j.judge, j.version FROM judgements j
JOIN unnest($1::text[], $2::text[]) AS k(trace_id, content_hash)
  ON j.trace_id = k.trace_id AND j.content_hash = k.content_hash
WHERE j.status <> 'error'
"""

#: Links replayed traces to their run (``run_id``, ``trace_id``, ``test_case_id`` arrays).
RUN_CASES_UPSERT = """
INSERT INTO run_cases AS rc (run_id, trace_id, test_case_id)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (run_id, trace_id) DO UPDATE SET test_case_id = excluded.test_case_id
WHERE rc.test_case_id IS DISTINCT FROM excluded.test_case_id
"""
