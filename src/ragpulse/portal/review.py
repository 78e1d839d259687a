"""The human review queue (issue 31): which traces wait for a reviewer, labelling a judgement agree/disagree, and
the judges' agreement with the reviewers beside their corrected pass rates.

Shared by ``/api/v1/review/…`` and the portal's Review page. A label binds to the judgement version the reviewer
saw (``trace_id``, ``judge``, ``version``): a rejudge stores a new version and leaves the label where it was.
"disagree" flips the judge's verdict to give the human one (``label``: ``True`` = the answer is good). The labels
of a judge's current version count in its corrected pass rate (:mod:`ragpulse.calibration.live`) and can be
compared with ``ragpulse calibrate --from-reviews``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

from ragpulse.calibration.live import corrected_pass_rates
from ragpulse.errors import BadRequest, NotFoundError
from ragpulse.model import normalize_trace_id
from ragpulse.query import DEFAULT_LIMIT, Page, encode_cursor, time_key
from ragpulse.store import PostgresStore
from ragpulse.store.reviews import QueueQuery
from ragpulse.textclean import clean_text

__all__ = [
    "MAX_REVIEWER_CHARS",
    "AgreementRow",
    "LabelView",
    "QueueItem",
    "QueuedJudgement",
    "Verdict",
    "agreement",
    "check_reviewer",
    "label_judgement",
    "queue",
]

Verdict = Literal["agree", "disagree"]

#: Longest reviewer name kept.
MAX_REVIEWER_CHARS = 120


class LabelView(BaseModel):
    """A stored label: the human verdict (``label``: ``True`` = good), whether it agrees with the judge's, who."""

    label: bool
    agree: bool
    reviewer: str


class QueuedJudgement(BaseModel):
    """A judgement on a queued trace: its verdict, why it is queued (``failing``, ``borderline``, ``random``;
    empty when only another judgement of the trace is due) and its label, if given."""

    judge: str
    version: str
    score: float
    passed: bool
    threshold: float | None = None
    reason: str = ""
    reasons: list[str] = []
    label: LabelView | None = None


class QueueItem(BaseModel):
    """A trace in the queue (``question`` cut to 2,000 characters, ``answer`` to 4,000)."""

    trace_id: str
    app: str | None = None
    scenario: str | None = None
    received_at: datetime
    question: str | None = None
    answer: str | None = None
    redacted: bool = False
    judgements: list[QueuedJudgement] = []


class AgreementRow(BaseModel):
    """One judge (and app) in the corrected-pass-rate window: the review labels of its current version, the
    confusion counts used (newest calibration profile plus review labels), sensitivity and specificity of those,
    the observed and the corrected pass rate (Rogan–Gladen, ``None`` without a trustworthy figure) — the figures
    the ``ragpulse_judge_pass_rate_corrected`` gauges export."""

    judge: str
    version: str
    app: str | None = None
    labels: int
    profile: str | None = None
    tp: int = 0
    fn: int = 0
    tn: int = 0
    fp: int = 0
    sensitivity: float | None = None
    specificity: float | None = None
    passed: int
    scored: int
    observed_pass_rate: float | None = None
    corrected_pass_rate: float | None = None
    corrected_lower: float | None = None
    corrected_upper: float | None = None


def check_reviewer(name: str | None) -> str:
    """A reviewer name as stored: white space collapsed, at most :data:`MAX_REVIEWER_CHARS` characters.

    Raises:
        BadRequest: no name.
    """
    text = " ".join((clean_text(name) or "").split())[:MAX_REVIEWER_CHARS]
    if not text:
        raise BadRequest("a reviewer name is needed (the trusted header, or type one)")
    return text


async def queue(
    store: PostgresStore,
    versions: Mapping[str, str],
    *,
    since: datetime,
    until: datetime,
    margin: float,
    share: float,
    judge: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page[QueueItem]:
    """Queued traces newest first (live traffic received in [``since``, ``until``) with an unlabelled judgement
    of a judge's current version that fails, is within ``margin`` of its threshold, or is in the random
    ``share``), ``limit`` ≤ 200 a page.

    Raises:
        BadRequest: a bad limit or cursor.
    """
    if not 1 <= limit <= 200:
        raise BadRequest("limit must be 1–200")
    q = QueueQuery(
        since=since,
        until=until,
        versions=versions,
        margin=margin,
        share=share,
        judge=judge,
        after=time_key(cursor),
    )
    rows = await store.review_queue(q, limit + 1)
    items = [QueueItem.model_validate(r) for r in rows[:limit]]
    nxt = None
    if len(rows) > limit:
        last = rows[limit - 1]
        nxt = encode_cursor([last["received_at"], last["trace_id"]])
    return Page[QueueItem](items=items, next_cursor=nxt)


async def label_judgement(
    store: PostgresStore, trace_id: str, judge: str, version: str, verdict: Verdict, reviewer: str
) -> dict[str, Any]:
    """Store the reviewer's verdict on judgement ``(trace_id, judge, version)``; returns the label (``trace_id``,
    ``judge``, ``version``, ``judge_passed``, ``label``, ``agree``, ``reviewer``, ``created_at``,
    ``updated_at``).

    Raises:
        BadRequest: no reviewer name, or a verdict other than agree/disagree.
        NotFoundError: no ``ok`` judgement of that judge version on the trace.
    """
    if verdict not in ("agree", "disagree"):
        raise BadRequest("verdict must be agree or disagree")
    who = check_reviewer(reviewer)
    try:
        tid = normalize_trace_id(trace_id)
    except ValueError as e:
        raise NotFoundError("trace id is empty") from e
    row = await store.save_review_label(tid, judge, version, agree=verdict == "agree", reviewer=who)
    if row is None:
        raise NotFoundError(
            f"no scored judgement {judge[:100]!r} version {version[:100]!r} on trace {trace_id[:100]!r}"
        )
    return {**row, "agree": row["label"] == row["judge_passed"]}


async def agreement(
    store: PostgresStore, versions: Mapping[str, str], window: timedelta
) -> list[AgreementRow]:
    """Per judge of ``versions`` (and app with live traffic in ``window``): labels, counts, sensitivity,
    specificity, observed and corrected pass rate — from :func:`ragpulse.calibration.live.corrected_pass_rates`,
    the function behind the exported gauges. A judge without traffic in the window gets one row (``app``
    ``None``, no pass rates) when it has labels."""
    figures, _ = await corrected_pass_rates(store, versions, window)
    rows: list[AgreementRow] = []
    seen: set[str] = set()
    for f in figures:
        seen.add(f.judge)
        c = f.counts
        rows.append(
            AgreementRow(
                judge=f.judge,
                version=f.version,
                app=f.app,
                labels=f.labels,
                profile=f.profile,
                tp=c.tp if c else 0,
                fn=c.fn if c else 0,
                tn=c.tn if c else 0,
                fp=c.fp if c else 0,
                sensitivity=c.sensitivity if c else None,
                specificity=c.specificity if c else None,
                passed=f.passed,
                scored=f.scored,
                observed_pass_rate=f.passed / f.scored if f.scored else None,
                corrected_pass_rate=f.estimate.value if f.estimate else None,
                corrected_lower=f.estimate.lower if f.estimate else None,
                corrected_upper=f.estimate.upper if f.estimate else None,
            )
        )
    for judge, version in sorted(versions.items()):
        if judge in seen:
            continue
        lc = await store.review_label_counts(judge, version)
        if lc.n:
            rows.append(
                AgreementRow(
                    judge=judge,
                    version=version,
                    labels=lc.n,
                    tp=lc.tp,
                    fn=lc.fn,
                    tn=lc.tn,
                    fp=lc.fp,
                    sensitivity=lc.tp / (lc.tp + lc.fn) if lc.tp + lc.fn else None,
                    specificity=lc.tn / (lc.tn + lc.fp) if lc.tn + lc.fp else None,
                    passed=0,
                    scored=0,
                )
            )
    return rows
