"""Shadow judgements (table ``shadow_judgements``, migration 070): writes and the pairs ``judges compare`` reads.

Queries on one asyncpg connection (:class:`~ragpulse.store.postgres.PostgresStore` maps their errors). A shadow
judgement is keyed ``(trace_id, judge, version)`` like a judgement; a repeated write of the same key replaces
the row (a redelivered trace judged again).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ragpulse.model import Judgement
from ragpulse.store.migrate import Conn
from ragpulse.store.rows import clean

__all__ = ["ShadowPair", "shadow_pairs", "write_shadows"]

_COLUMNS = (
    "trace_id", "judge", "version", "app", "backend", "model", "score", "passed", "threshold", "status",
    "reason", "flags", "raw_output", "latency_s", "prompt_tokens", "completion_tokens",
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


def _row(trace_id: str, app: str | None, j: Judgement) -> tuple[Any, ...]:
    return (
        trace_id, j.judge, j.version, clean(app), j.backend.value, j.model, j.score, j.passed, j.threshold,
        j.status.value, clean(j.reason) or "", j.flags.model_dump(), clean(j.raw_output), j.latency_s,
        j.prompt_tokens, j.completion_tokens,
    )  # fmt: skip


async def write_shadows(conn: Conn, trace_id: str, app: str | None, judgements: Sequence[Judgement]) -> None:
    """Insert (or replace) the shadow judgements of one trace."""
    rows = [_row(trace_id, app, j) for j in judgements]
    await conn.executemany(_UPSERT, rows)


def _side(alias: str) -> str:
    return ", ".join(f"{alias}.{c} AS {alias}_{c}" for c in _SIDE)


async def shadow_pairs(conn: Conn, judge: str, since: datetime | None = None) -> list[ShadowPair]:
    """Every shadow judgement of ``judge`` (made since ``since``) with the main judgement of the same trace,
    oldest first. The main side is the newest stored judgement of that judge on the trace."""
    rows = await conn.fetch(
        f"""
        SELECT s.trace_id, {_side("s")}, {_side("m")}
        FROM shadow_judgements s
        JOIN LATERAL (
            SELECT * FROM judgements j WHERE j.trace_id = s.trace_id AND j.judge = s.judge
            ORDER BY j.updated_at DESC LIMIT 1
        ) m ON true
        WHERE s.judge = $1 AND ($2::timestamptz IS NULL OR s.created_at >= $2)
        ORDER BY s.created_at, s.trace_id
        """,
        judge,
        since,
    )
    return [(r["trace_id"], {c: r[f"m_{c}"] for c in _SIDE}, {c: r[f"s_{c}"] for c in _SIDE}) for r in rows]
