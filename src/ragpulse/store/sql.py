"""SQL text of the store's statements (built once at import from the column lists in :mod:`.rows`)."""

from __future__ import annotations

from ragpulse.store.rows import JUDGEMENT_COLUMNS, TRACE_COLUMNS

__all__ = [
    "FINAL_JUDGEMENTS",
    "JUDGEMENT_STAGE",
    "JUDGEMENT_UPSERT",
    "OUTRANKED_TRACES",
    "RUN_CASES_UPSERT",
    "RUN_JUDGEMENTS_PIN",
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
    guard: str | None = None,
    exprs: dict[str, str] | None = None,
) -> str:
    """``INSERT … SELECT FROM pg_temp.<stage> ORDER BY key ON CONFLICT (key) DO UPDATE … WHERE (compare) IS
    DISTINCT FROM (excluded.compare) RETURNING …``: rows in key order, so concurrent writers with overlapping
    keys lock rows in the same order (no deadlock); columns in ``keep`` keep their first stored value; ``where``
    (SQL over ``<alias>.col`` and ``excluded.col``) replaces the default update condition; ``guard`` (same
    terms) must hold as well; ``exprs`` gives the update expression of some columns (else ``excluded.col``)."""
    names = [c[0] for c in columns]
    rows = f"FROM pg_temp.{stage} u ORDER BY {', '.join(f'u.{k}' for k in key)}"
    select = ", ".join(f"u.{n}::jsonb" if js else f"u.{n}" for n, _, js in columns)
    updates = [
        f"{n} = {(exprs or {}).get(n, f'excluded.{n}')}" for n in names if n not in key and n not in keep
    ]
    updates.append("updated_at = now()")
    cmp_old = ", ".join(f"{alias}.{c}" for c in compare)
    cmp_new = ", ".join(f"excluded.{c}" for c in compare)
    condition = where or f"({cmp_old}) IS DISTINCT FROM ({cmp_new})"
    if guard:
        condition = f"({condition}) AND ({guard})"
    return (
        f"INSERT INTO {table} AS {alias} ({', '.join(names)})\n"
        f"SELECT {select}\n{rows}\n"
        f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {', '.join(updates)}\n"
        f"WHERE {condition}\n"
        f"RETURNING {returning}"
    )


def version_rank_sql(alias: str) -> str:
    """SQL for the version rank of the trace row ``alias`` (same values as
    :attr:`ragpulse.model.Trace.version_rank`: 2 complete with an answer, 1 incomplete, 0 no answer yet).
    ``answer_chars`` is counted before redaction; rows older than that column fall back to the answer's length."""
    return (
        f"(CASE WHEN {alias}.incomplete THEN 1"
        f" WHEN coalesce({alias}.answer_chars, length({alias}.answer), 0) > 0 THEN 2 ELSE 0 END)"
    )


#: Upsert of the trace rows in :data:`TRACE_STAGE`; an unchanged trace is not touched. ``received_at`` keeps its
#: first value; stored earlier ``turns`` are kept when the new row has none (a redelivery of a trace whose turns
#: the engine took from its session, and that was not looked up again because its judgements were final). A
#: version of lower rank than the stored one (:func:`version_rank_sql`) never replaces it, whatever the arrival
#: order: a started/partial event (no answer yet) arriving after the complete trace leaves it as it is. A
#: replay's version always replaces (a re-run of a run writes its cases again); see ``Trace.replaces``.
_TRACE_COMPARE = tuple(c[0] for c in TRACE_COLUMNS if c[0] not in ("trace_id", "received_at", "turns"))
TRACE_UPSERT = _bulk_upsert(
    "traces",
    "t",
    TRACE_COLUMNS,
    key=("trace_id",),
    compare=_TRACE_COMPARE,
    keep=("received_at",),
    returning="t.trace_id, (t.xmax = 0) AS inserted",
    where=(
        f"({', '.join(f't.{c}' for c in _TRACE_COMPARE)}) IS DISTINCT FROM "
        f"({', '.join(f'excluded.{c}' for c in _TRACE_COMPARE)})"
        " OR (excluded.turns <> '[]'::jsonb AND excluded.turns IS DISTINCT FROM t.turns)"
    ),
    stage=TRACE_STAGE,
    guard=f"excluded.source = 'replay' OR {version_rank_sql('excluded')} >= {version_rank_sql('t')}",
    exprs={"turns": "CASE WHEN excluded.turns = '[]'::jsonb THEN t.turns ELSE excluded.turns END"},
)

#: Trace ids of :data:`TRACE_STAGE` whose stored row ranks higher than the staged version — run in the same
#: transaction right after :data:`TRACE_UPSERT` (which locked those rows), these are the versions it did not
#: write; their judgements and run links are not written either.
OUTRANKED_TRACES = f"""
SELECT u.trace_id FROM pg_temp.{TRACE_STAGE} u JOIN traces t ON t.trace_id = u.trace_id
WHERE u.source <> 'replay' AND {version_rank_sql("t")} > {version_rank_sql("u")}
"""

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

#: Links replayed traces to their run (``run_id``, ``trace_id``, ``test_case_id`` arrays) — only to a run that is
#: ``running``, and only for a case of that run's test set, so a trace from outside (a Kafka event or OTLP span
#: carrying a finished run's id, or another set's case id) never changes a run's cases or report. A run id with
#: no run record is linked as given (the store's own callers write a run's traces after creating it).
#: The same rule for the traces of run ``$1`` already stored (written before their test set was: a batch replay
#: stores its test set while it judges, ``ragpulse.runs.runner.storing_test_set``).
RUN_CASES_LINK = """
INSERT INTO run_cases (run_id, trace_id, test_case_id)
SELECT t.run_id, t.trace_id, t.test_case_id
FROM traces t
JOIN runs r ON r.run_id = t.run_id AND r.status = 'running'
JOIN test_cases tc ON tc.test_set = r.test_set AND tc.case_id = t.test_case_id
WHERE t.run_id = $1
ON CONFLICT (run_id, trace_id) DO NOTHING
RETURNING run_id, trace_id
"""

RUN_CASES_UPSERT = """
INSERT INTO run_cases AS rc (run_id, trace_id, test_case_id)
SELECT k.run_id, k.trace_id, k.test_case_id
FROM unnest($1::text[], $2::text[], $3::text[]) AS k(run_id, trace_id, test_case_id)
LEFT JOIN runs r ON r.run_id = k.run_id
WHERE r.run_id IS NULL
   OR (r.status = 'running' AND EXISTS (
         SELECT 1 FROM test_cases tc WHERE tc.test_set = r.test_set AND tc.case_id = k.test_case_id))
ON CONFLICT (run_id, trace_id) DO UPDATE SET test_case_id = excluded.test_case_id
WHERE rc.test_case_id IS DISTINCT FROM excluded.test_case_id
"""

#: The columns of ``run_judgements`` copied from ``judgements`` (migration 240; no raw model output).
RUN_JUDGEMENT_COLUMNS = (
    "trace_id", "judge", "version", "app", "declared_version", "backend", "model", "score", "passed", "threshold",
    "status", "reason", "flags", "latency_s", "prompt_tokens", "completion_tokens", "created_at", "updated_at",
)  # fmt: skip
_RJ_SET = ", ".join(f"{c} = excluded.{c}" for c in RUN_JUDGEMENT_COLUMNS if c not in ("trace_id", "judge"))

#: Pins the judgements of the linked ``(run_id, trace_id)`` pairs (two text arrays) as the run's case rows
#: (``run_judgements``, migration 240): per judge of the run's judges (``runs.judges``; every judge when the run
#: has none recorded or no record), the trace's judgement at the run's version when stored, else its newest. Only
#: while the run is ``running`` (or has no record): a later ``rejudge`` of the same traces never changes a
#: finished run's rows.
RUN_JUDGEMENTS_PIN = f"""
INSERT INTO run_judgements AS rj (run_id, {", ".join(RUN_JUDGEMENT_COLUMNS)})
SELECT DISTINCT ON (rc.run_id, rc.trace_id, j.judge) rc.run_id, {", ".join(f"j.{c}" for c in RUN_JUDGEMENT_COLUMNS)}
FROM unnest($1::text[], $2::text[]) AS k(run_id, trace_id)
JOIN run_cases rc ON rc.run_id = k.run_id AND rc.trace_id = k.trace_id
JOIN judgements j ON j.trace_id = k.trace_id
LEFT JOIN runs r ON r.run_id = k.run_id
WHERE r.run_id IS NULL OR (r.status = 'running' AND (r.judges = '{{}}'::jsonb OR r.judges ? j.judge))
ORDER BY rc.run_id, rc.trace_id, j.judge, (r.judges ->> j.judge = j.version) DESC NULLS LAST,
  j.updated_at DESC, j.created_at DESC, j.version
ON CONFLICT (run_id, trace_id, judge) DO UPDATE SET {_RJ_SET}
WHERE (rj.version, rj.status, rj.score, rj.passed, rj.reason, rj.updated_at)
  IS DISTINCT FROM (excluded.version, excluded.status, excluded.score, excluded.passed, excluded.reason,
                    excluded.updated_at)
"""
