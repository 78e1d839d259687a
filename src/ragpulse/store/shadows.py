"""Shadow judgements (table ``shadow_judgements``, migrations 070 and 155): writes, the pairs ``judges compare``
reads, and the lookups of a promotion (a main judge whose version has stored shadow judgements reuses them).

Queries on one asyncpg connection (:class:`~ragpulse.store.postgres.PostgresStore` maps their errors). A shadow
judgement is keyed ``(trace_id, judge, version)`` like a judgement; a repeated write of the same key replaces
the row (a redelivered trace judged again). ``content_hash`` is the judged content
(:func:`ragpulse.model.judged_content_hash`); only ``ok`` rows with one are reusable.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ragpulse.model import Judgement, JudgementFlags, JudgementStatus
from ragpulse.store.migrate import Conn
from ragpulse.store.redaction import redact_reason
from ragpulse.store.rows import clean, judgement_from_row

__all__ = [
    "ShadowPair",
    "reusable_shadows",
    "shadow_counts",
    "shadow_pairs",
    "shadow_versions",
    "write_shadows",
]

_COLUMNS = (
    "trace_id", "judge", "version", "app", "backend", "model", "score", "passed", "threshold", "status",
    "reason", "flags", "raw_output", "latency_s", "prompt_tokens", "completion_tokens", "content_hash",
)  # fmt: skip

_UPSERT = f"""
INSERT INTO shadow_judgements ({", ".join(_COLUMNS)})
VALUES ({", ".join(f"${i}" for i in range(1, len(_COLUMNS) + 1))})
ON CONFLICT (trace_id, judge, version) DO UPDATE SET
  {", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c not in ("trace_id", "judge", "version"))},
  created_at = now()
"""

#: ``(trace_id, main, shadow)``: each side a mapping with ``version``, ``status``, ``score``, ``passed``,
#: ``latency_s``, ``prompt_tokens``, ``completion_tokens``.
ShadowPair = tuple[str, dict[str, Any], dict[str, Any]]

_SIDE = ("version", "status", "score", "passed", "latency_s", "prompt_tokens", "completion_tokens")


def _row(
    trace_id: str, app: str | None, j: Judgement, content_hash: str | None, redact_text: bool
) -> tuple[Any, ...]:
    ok = j.status is JudgementStatus.OK
    reason = redact_reason(j.reason, ok) if redact_text else clean(j.reason)
    raw = None if redact_text else clean(j.raw_output)
    return (
        trace_id, j.judge, j.version, clean(app), j.backend.value, j.model, j.score, j.passed, j.threshold,
        j.status.value, reason or "", j.flags.model_dump(), raw, j.latency_s,
        j.prompt_tokens, j.completion_tokens, content_hash,
    )  # fmt: skip


async def write_shadows(
    conn: Conn,
    trace_id: str,
    app: str | None,
    judgements: Sequence[Judgement],
    content_hash: str | None = None,
    *,
    redact_text: bool = False,
) -> None:
    """Insert (or replace) the shadow judgements of one trace (``content_hash``: of the content judged); with
    ``redact_text`` the reason is reduced to its code and the raw output dropped, as for judgements."""
    rows = [_row(trace_id, app, j, content_hash, redact_text) for j in judgements]
    await conn.executemany(_UPSERT, rows)


def _pair_arrays(pairs: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    return [p[0] for p in pairs], [p[1] for p in pairs]


async def shadow_versions(conn: Conn, pairs: Sequence[tuple[str, str]]) -> frozenset[tuple[str, str]]:
    """The ``(judge, version)`` pairs among ``pairs`` with at least one reusable shadow judgement (``ok``, with
    a content hash); one index probe per pair (migration 155)."""
    if not pairs:
        return frozenset()
    judges, versions = _pair_arrays(pairs)
    rows = await conn.fetch(
        """
        SELECT k.judge, k.version FROM unnest($1::text[], $2::text[]) AS k(judge, version)
        WHERE EXISTS (
            SELECT 1 FROM shadow_judgements s
            WHERE s.judge = k.judge AND s.version = k.version AND s.status = 'ok' AND s.content_hash IS NOT NULL
        )
        """,
        judges,
        versions,
    )
    return frozenset((r["judge"], r["version"]) for r in rows)


async def reusable_shadows(
    conn: Conn, keys: Sequence[tuple[str, str]], pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], dict[tuple[str, str], Judgement]]:
    """The reusable shadow judgements (``ok``, same content hash) of ``(trace_id, content_hash)`` ``keys`` for
    the ``(judge, version)`` ``pairs``: ``{key: {(judge, version): judgement}}``; each judgement as stored,
    with ``flags.judged_at`` = when the shadow judged it (ISO 8601). Keys without any are absent."""
    if not keys or not pairs:
        return {}
    tids, hashes = _pair_arrays(keys)
    judges, versions = _pair_arrays(pairs)
    rows = await conn.fetch(
        """
        SELECT s.*, NULL::text AS declared_version FROM shadow_judgements s
        JOIN unnest($1::text[], $2::text[]) AS k(trace_id, content_hash)
          ON s.trace_id = k.trace_id AND s.content_hash = k.content_hash
        JOIN unnest($3::text[], $4::text[]) AS p(judge, version)
          ON s.judge = p.judge AND s.version = p.version
        WHERE s.status = 'ok'
        """,
        tids,
        hashes,
        judges,
        versions,
    )
    out: dict[tuple[str, str], dict[tuple[str, str], Judgement]] = {}
    for r in rows:
        j = judgement_from_row(r)
        flags = JudgementFlags(**{**j.flags.model_dump(), "judged_at": r["created_at"].isoformat()})
        out.setdefault((r["trace_id"], r["content_hash"]), {})[(j.judge, j.version)] = j.model_copy(
            update={"flags": flags}
        )
    return out


def _side(alias: str) -> str:
    return ", ".join(f"{alias}.{c} AS {alias}_{c}" for c in _SIDE)


async def shadow_pairs(
    conn: Conn, judge: str, main_version: str, shadow_version: str, since: datetime | None = None
) -> list[ShadowPair]:
    """Every shadow judgement of ``judge`` at ``shadow_version`` (made since ``since``) with the judgement of
    the same trace at ``main_version``, oldest first; traces without a ``main_version`` judgement are left out
    (after a promotion the newest judgement of a trace is the reused shadow one: never compared with itself)."""
    rows = await conn.fetch(
        f"""
        SELECT s.trace_id, {_side("s")}, {_side("m")}
        FROM shadow_judgements s
        JOIN judgements m ON m.trace_id = s.trace_id AND m.judge = s.judge AND m.version = $2
        WHERE s.judge = $1 AND s.version = $3 AND ($4::timestamptz IS NULL OR s.created_at >= $4)
        ORDER BY s.created_at, s.trace_id
        """,
        judge,
        main_version,
        shadow_version,
        since,
    )
    return [(r["trace_id"], {c: r[f"m_{c}"] for c in _SIDE}, {c: r[f"s_{c}"] for c in _SIDE}) for r in rows]


async def shadow_counts(conn: Conn, judge: str, version: str) -> dict[str, Any]:
    """Stored shadow judgements of ``judge`` at ``version``: ``{"reusable": n ok with a content hash,
    "other": n not reusable (error/skipped/no hash), "since": when the oldest stored trace with a reusable one
    was received, or None}``."""
    r = await conn.fetchrow(
        """
        SELECT count(*) FILTER (WHERE s.status = 'ok' AND s.content_hash IS NOT NULL) AS reusable,
               count(*) FILTER (WHERE NOT (s.status = 'ok' AND s.content_hash IS NOT NULL)) AS other,
               min(t.received_at) FILTER (WHERE s.status = 'ok' AND s.content_hash IS NOT NULL) AS since
        FROM shadow_judgements s LEFT JOIN traces t ON t.trace_id = s.trace_id
        WHERE s.judge = $1 AND s.version = $2
        """,
        judge,
        version,
    )
    assert r is not None
    return {"reusable": int(r["reusable"]), "other": int(r["other"]), "since": r["since"]}
