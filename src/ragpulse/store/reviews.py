"""Human review labels and the review queue (migration 222): queries on one asyncpg connection
(``PostgresStore`` maps their errors).

A label names one judgement version ``(trace_id, judge, version)``; ``judge_passed`` is the verdict the reviewer
saw and ``label`` the human one (``True`` = the answer is good). The queue holds live traffic (Kafka/OTLP traces
outside any run) whose judgement by a judge's given version is unlabelled and failing, within ``margin`` of its
threshold, or drawn into the random share (``sample_key`` below: the same traces for every replica and page).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragpulse.store.migrate import Conn
from ragpulse.store.rows import clean, utc

__all__ = ["LabelCounts", "QueueQuery", "label_counts", "labelled_judgements", "queue_page", "upsert_label"]

#: A trace's place in [0, 1) for the random share: the first 32 bits of the MD5 of its id over 2³².
SAMPLE_KEY = "(('x' || lpad(substr(md5({col}), 1, 8), 16, '0'))::bit(64)::bigint / 4294967296.0)"


@dataclass(frozen=True)
class QueueQuery:
    """The review queue's window and rules: traces received in [``since``, ``until``) (UTC), judged by the
    judges and versions of ``versions`` (``{judge: version}``; ``judge`` narrows it to one); a judgement is due
    when unlabelled and failing, or ``|score − threshold| ≤ margin``, or its trace's sample key is below
    ``share``. ``after``: the keyset ``(received_at, trace_id)`` of the previous page's last row."""

    since: datetime
    until: datetime
    versions: Mapping[str, str]
    margin: float
    share: float
    judge: str | None = None
    after: tuple[datetime, str] | None = None


def _due(q: QueueQuery, first: int) -> str:
    """SQL true for a judgement ``j`` (of trace ``t``) that the queue's rules select; parameters from ``first``:
    margin, share."""
    return (
        f"(NOT j.passed OR abs(j.score - j.threshold) <= ${first}"
        f" OR {SAMPLE_KEY.format(col='t.trace_id')} < ${first + 1})"
    )


async def queue_page(conn: Conn, q: QueueQuery, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` queued traces, newest first: ``trace_id``, ``app``, ``scenario``, ``received_at``,
    ``question`` (first 2,000 characters), ``answer`` (first 4,000), ``redacted``, and ``judgements`` — every
    ``ok`` judgement of a queued judge version on the trace (``judge``, ``version``, ``score``, ``passed``,
    ``threshold``, ``reason``, ``reasons`` ⊆ {failing, borderline, random}, and the ``label`` given
    (``label``, ``agree``, ``reviewer``) or ``None``)."""
    versions = {j: v for j, v in q.versions.items() if q.judge is None or j == q.judge}
    if not versions:
        return []
    judges, vers = list(versions), list(versions.values())
    sql = f"""
        SELECT t.trace_id, t.app, t.scenario, t.received_at, left(t.question, 2000) AS question,
               left(t.answer, 4000) AS answer, t.redacted
        FROM traces t
        WHERE t.received_at >= $1 AND t.received_at < $2
          AND t.source IN ('kafka', 'otlp') AND t.run_id IS NULL
          AND ($7::timestamptz IS NULL OR (t.received_at, t.trace_id) < ($7, $8))
          AND EXISTS (
              SELECT 1 FROM judgements j JOIN unnest($3::text[], $4::text[]) AS v(judge, version)
                ON j.judge = v.judge AND j.version = v.version
              WHERE j.trace_id = t.trace_id AND j.status = 'ok' AND {_due(q, 5)}
                AND NOT EXISTS (SELECT 1 FROM review_labels l
                                WHERE l.trace_id = j.trace_id AND l.judge = j.judge AND l.version = j.version))
        ORDER BY t.received_at DESC, t.trace_id DESC
        LIMIT $9"""
    rows = [
        dict(r)
        for r in await conn.fetch(
            sql,
            utc(q.since),
            utc(q.until),
            judges,
            vers,
            q.margin,
            q.share,
            utc(q.after[0]) if q.after else None,
            q.after[1] if q.after else None,
            limit,
        )
    ]
    if not rows:
        return rows
    js = await conn.fetch(
        f"""SELECT j.trace_id, j.judge, j.version, j.score, j.passed, j.threshold, j.reason,
                   NOT j.passed AS failing, abs(j.score - j.threshold) <= $4 AS borderline,
                   {SAMPLE_KEY.format(col="j.trace_id")} < $5 AS sampled,
                   l.label, l.judge_passed, l.reviewer
            FROM judgements j JOIN unnest($2::text[], $3::text[]) AS v(judge, version)
              ON j.judge = v.judge AND j.version = v.version
            LEFT JOIN review_labels l ON l.trace_id = j.trace_id AND l.judge = j.judge AND l.version = j.version
            WHERE j.trace_id = ANY($1::text[]) AND j.status = 'ok'
            ORDER BY j.trace_id, j.judge""",
        [r["trace_id"] for r in rows],
        judges,
        vers,
        q.margin,
        q.share,
    )
    by: dict[str, list[dict[str, Any]]] = {}
    for j in js:
        reasons = [name for name, hit in (("failing", j["failing"]), ("borderline", j["borderline"]),
                                          ("random", j["sampled"])) if hit]  # fmt: skip
        by.setdefault(j["trace_id"], []).append(
            {
                "judge": j["judge"],
                "version": j["version"],
                "score": j["score"],
                "passed": j["passed"],
                "threshold": j["threshold"],
                "reason": j["reason"],
                "reasons": reasons,
                "label": None
                if j["label"] is None
                else {
                    "label": j["label"],
                    "agree": j["label"] == j["judge_passed"],
                    "reviewer": j["reviewer"],
                },
            }
        )
    for r in rows:
        r["judgements"] = by.get(r["trace_id"], [])
    return rows


async def upsert_label(
    conn: Conn, trace_id: str, judge: str, version: str, *, agree: bool, reviewer: str
) -> dict[str, Any] | None:
    """Label the ``ok`` judgement ``(trace_id, judge, version)``: the human verdict is the judge's when
    ``agree``, its opposite otherwise; a second label of the same judgement version replaces the first.
    Returns the stored label (``trace_id``, ``judge``, ``version``, ``judge_passed``, ``label``, ``reviewer``,
    ``created_at``, ``updated_at``), or ``None`` when there is no such ``ok`` judgement."""
    row = await conn.fetchrow(
        """INSERT INTO review_labels AS l (trace_id, judge, version, content_hash, judge_passed, label, reviewer)
           SELECT j.trace_id, j.judge, j.version, j.content_hash, j.passed,
                  CASE WHEN $4 THEN j.passed ELSE NOT j.passed END, $5
           FROM judgements j
           WHERE j.trace_id = $1 AND j.judge = $2 AND j.version = $3 AND j.status = 'ok'
           ON CONFLICT (trace_id, judge, version) DO UPDATE SET
               content_hash = excluded.content_hash, judge_passed = excluded.judge_passed,
               label = excluded.label, reviewer = excluded.reviewer, updated_at = now()
           RETURNING trace_id, judge, version, judge_passed, label, reviewer, created_at, updated_at""",
        trace_id,
        judge,
        version,
        agree,
        clean(reviewer),
    )
    return dict(row) if row is not None else None


@dataclass(frozen=True)
class LabelCounts:
    """The confusion counts of one judge version against its review labels (label ``True`` = good = positive):
    ``tp`` good and passed, ``fn`` good and failed, ``tn`` bad and failed, ``fp`` bad and passed."""

    tp: int
    fn: int
    tn: int
    fp: int

    @property
    def n(self) -> int:
        """Labels counted."""
        return self.tp + self.fn + self.tn + self.fp


async def label_counts(conn: Conn, judge: str, version: str) -> LabelCounts:
    """The :class:`LabelCounts` of the labels of ``judge`` version ``version``."""
    r = await conn.fetchrow(
        """SELECT count(*) FILTER (WHERE label AND judge_passed) AS tp,
                  count(*) FILTER (WHERE label AND NOT judge_passed) AS fn,
                  count(*) FILTER (WHERE NOT label AND NOT judge_passed) AS tn,
                  count(*) FILTER (WHERE NOT label AND judge_passed) AS fp
           FROM review_labels WHERE judge = $1 AND version = $2""",
        judge,
        version,
    )
    assert r is not None
    return LabelCounts(tp=int(r["tp"]), fn=int(r["fn"]), tn=int(r["tn"]), fp=int(r["fp"]))


async def labelled_judgements(conn: Conn, judge: str, version: str) -> list[tuple[dict[str, Any], bool]]:
    """Every labelled judgement of ``judge`` version ``version`` as ``(judgements row, label)``, oldest label
    first (the rows ``calibrate --from-reviews`` compares)."""
    rows = await conn.fetch(
        """SELECT j.*, l.label AS review_label FROM review_labels l
           JOIN judgements j ON j.trace_id = l.trace_id AND j.judge = l.judge AND j.version = l.version
           WHERE l.judge = $1 AND l.version = $2
           ORDER BY l.created_at, l.trace_id""",
        judge,
        version,
    )
    return [(dict(r), bool(r["review_label"])) for r in rows]
