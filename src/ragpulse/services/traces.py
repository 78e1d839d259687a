"""Stored traces: the list (newest first, keyset pagination, filters), one trace with every judgement and its
per-claim details, and "copy to test set".

Shared by ``GET /api/v1/traces``, ``GET /api/v1/traces/{id}``, the portal's Live traffic and Trace views.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel

from ragpulse.errors import NotFoundError
from ragpulse.model import Judgement, TestCase, normalize_trace_id
from ragpulse.replay.testset import require_question
from ragpulse.services.errors import BadRequest, Conflict
from ragpulse.services.paging import DEFAULT_LIMIT, Page, encode_cursor, time_key
from ragpulse.services.testsets import case_row, load_test_set
from ragpulse.store import PostgresStore
from ragpulse.store.portal import JudgeFilter, TraceQuery
from ragpulse.textclean import clean_text

__all__ = [
    "MAX_LIMIT",
    "Claim",
    "DocumentView",
    "JudgementSummary",
    "JudgementView",
    "TraceDetail",
    "TraceFilters",
    "TraceSummary",
    "copy_to_test_set",
    "get_trace",
    "judgement_view",
    "list_traces",
    "newest_per_judge",
    "unsupported_claims",
]

#: Largest page of the trace list.
MAX_LIMIT = 500

TraceOutcomeName = Literal["evaluated", "not_sampled", "not_evaluable", "incomplete"]
JudgementOutcome = Literal["pass", "fail", "error", "skipped"]


class TraceFilters(BaseModel):
    """Filters of the trace list (all optional). ``judge`` with ``outcome``/``min_score``/``max_score``
    filters on that judge's judgement; ``q`` is text in the question (refused when texts are redacted);
    ``since``/``until`` are UTC (``until`` exclusive). ``include_api``: traces from ``POST /evaluate``
    (``source=api``) are left out unless set or ``source`` names them."""

    app: str | None = None
    scenario: str | None = None
    trace_outcome: TraceOutcomeName | None = None
    judge: str | None = None
    outcome: JudgementOutcome | None = None
    min_score: float | None = None
    max_score: float | None = None
    since: datetime | None = None
    until: datetime | None = None
    run_id: str | None = None
    source: str | None = None
    q: str | None = None
    include_api: bool = False


class JudgementSummary(BaseModel):
    """The latest judgement of one judge on a trace, as listed."""

    judge: str
    status: str
    score: float | None = None
    passed: bool | None = None
    threshold: float | None = None

    @property
    def outcome(self) -> str:
        """``pass``/``fail``/``error``/``skipped``."""
        if self.status == "ok":
            return "pass" if self.passed else "fail"
        return self.status


class TraceSummary(BaseModel):
    """A row of the trace list (``question`` cut to 300 characters)."""

    trace_id: str
    app: str | None = None
    scenario: str | None = None
    source: str
    outcome: str
    outcome_reason: str | None = None
    received_at: datetime
    question: str | None = None
    redacted: bool = False
    run_id: str | None = None
    test_case_id: str | None = None
    latency_s: float | None = None
    judgements: list[JudgementSummary] = []


class Claim(BaseModel):
    """One claim (or answer sentence) a judge checked, from the judgement's ``flags.claims``
    (``{"text", "start", "end", "verdict", "evidence"}``, see docs/llm-judges.md): its ``text`` (taken from the
    answer by ``start``/``end`` when the judge left it out), the ``verdict`` (``supported``, ``unsupported``,
    ``contradicted``, ``unchecked``), ``supported`` (``None`` when unchecked/unknown), the character offsets
    into the answer when known, ``evidence`` (``{"doc_id", "rank"}`` of the supporting chunk), and for an
    unsupported claim of a failing judgement ``attributed`` with its ``cause`` (``retrieval_miss``,
    ``generation_error``, ``None`` = undecided) and the not-retrieved ``reference`` context that supports a
    retrieval miss (``{"source", "index", "doc_id"}``; :mod:`ragpulse.judges.answer.attribution`)."""

    text: str
    verdict: str | None = None
    supported: bool | None = None
    start: int | None = None
    end: int | None = None
    evidence: dict[str, Any] | None = None
    attributed: bool = False
    cause: str | None = None
    reference: dict[str, Any] | None = None


class JudgementView(BaseModel):
    """A judgement as shown: every stored field, ``outcome``, and its ``claims`` from ``flags.claims``."""

    judge: str
    version: str
    backend: str
    model: str | None = None
    status: str
    outcome: str
    score: float | None = None
    threshold: float | None = None
    passed: bool | None = None
    reason: str
    decided_by: str | None = None
    #: The deciding stage of a cascade judgement (``first``/``main``/``first_fallback``; ``None``: no cascade).
    stage: str | None = None
    declared_version: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    flags: dict[str, Any] = {}
    claims: list[Claim] = []
    #: The newest stored judgement of its judge on the trace (:func:`newest_per_judge`); the claims table and
    #: the highlighted answer show only those.
    latest: bool = True


class DocumentView(BaseModel):
    """A retrieved document in rank order."""

    id: str | None = None
    rank: int
    score: float | None = None
    content: str


class TraceDetail(BaseModel):
    """One trace with everything stored about it."""

    trace_id: str
    span_id: str | None = None
    app: str | None = None
    scenario: str | None = None
    source: str
    outcome: str
    outcome_reason: str | None = None
    received_at: datetime
    question: str | None = None
    answer: str | None = None
    context: str | None = None
    documents: list[DocumentView] = []
    expected_answer: str | None = None
    keywords: list[str] | None = None
    model: str | None = None
    latency_s: float | None = None
    run_id: str | None = None
    test_case_id: str | None = None
    incomplete: bool = False
    redacted: bool = False
    attributes: dict[str, Any] = {}
    judgements: list[JudgementView] = []
    #: ``{judge: n}``: how many older judgements (other versions) of each judge are stored besides the newest.
    older_versions: dict[str, int] = {}


_VERDICT_SUPPORTED = {"supported": True, "unsupported": False, "contradicted": False}


def _claims(flags: dict[str, Any], answer: str | None) -> list[Claim]:
    """Per-claim details from ``flags.claims``; malformed entries are skipped."""
    raw = flags.get("claims")
    out: list[Claim] = []
    if not isinstance(raw, list):
        return out
    for c in raw:
        if not isinstance(c, dict):
            continue
        start, end = c.get("start"), c.get("end")
        start = start if isinstance(start, int) and not isinstance(start, bool) else None
        end = end if isinstance(end, int) and not isinstance(end, bool) else None
        text = c.get("text")
        if not isinstance(text, str) or not text:
            ok_span = answer is not None and start is not None and end is not None and 0 <= start < end
            text = answer[start:end] if ok_span and answer is not None and end is not None else None
        if not text:
            continue
        verdict = c.get("verdict")
        verdict = verdict.strip().lower() if isinstance(verdict, str) else None
        supported = _VERDICT_SUPPORTED.get(verdict or "")
        if verdict is None and isinstance(c.get("supported"), bool):
            supported = c["supported"]
            verdict = "supported" if supported else "unsupported"
        evidence = c.get("evidence") if isinstance(c.get("evidence"), dict) else None
        cause = c.get("cause") if c.get("cause") in ("retrieval_miss", "generation_error") else None
        reference = c.get("reference") if isinstance(c.get("reference"), dict) else None
        out.append(
            Claim(
                text=text,
                verdict=verdict,
                supported=supported,
                start=start,
                end=end,
                evidence=evidence,
                attributed="cause" in c,
                cause=cause,
                reference=reference,
            )
        )
    return out


def judgement_view(j: Judgement, answer: str | None) -> JudgementView:
    """``j`` as shown, with its per-claim details (texts taken from ``answer`` by offset when left out)."""
    flags = j.flags.model_dump()
    return JudgementView(
        judge=j.judge,
        version=j.version,
        backend=j.backend.value,
        model=j.model,
        status=j.status.value,
        outcome=j.outcome,
        score=j.score,
        threshold=j.threshold,
        passed=j.passed,
        reason=j.reason,
        decided_by=j.flags.decided_by,
        stage=flags.get("stage") if isinstance(flags.get("stage"), str) else None,
        declared_version=j.declared_version,
        prompt_tokens=j.prompt_tokens,
        completion_tokens=j.completion_tokens,
        latency_s=j.latency_s,
        flags=flags,
        claims=_claims(flags, answer),
    )


class _HasJudge(Protocol):
    @property
    def judge(self) -> str: ...


_J = TypeVar("_J", bound=_HasJudge)


def newest_per_judge(judgements: Sequence[_J]) -> tuple[list[_J], dict[str, int]]:
    """The newest judgement of each judge among ``judgements`` (in the store's order: by judge, oldest first,
    as :meth:`ragpulse.store.postgres.PostgresStore.get_trace` returns them), and ``{judge: n}`` older ones
    (judges with none left out)."""
    newest: dict[str, _J] = {}
    older: dict[str, int] = {}
    for j in judgements:
        if j.judge in newest:
            older[j.judge] = older.get(j.judge, 0) + 1
        newest[j.judge] = j
    return list(newest.values()), older


def unsupported_claims(detail: TraceDetail) -> list[Claim]:
    """The claims the newest judgement of any judge found unsupported (for highlighting and for ``/evaluate``
    feedback)."""
    seen: set[str] = set()
    out: list[Claim] = []
    for j in (j for j in detail.judgements if j.latest):
        for c in j.claims:
            if c.supported is False and c.text not in seen:
                seen.add(c.text)
                out.append(c)
    return out


async def list_traces(
    store: PostgresStore,
    filters: TraceFilters,
    *,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    redact_text: bool = False,
) -> Page[TraceSummary]:
    """Traces matching ``filters``, newest first (by time received), ``limit`` ≤ :data:`MAX_LIMIT` per page.

    Raises:
        BadRequest: a bad cursor or limit, ``outcome``/scores without ``judge``, or ``q`` while texts are
            redacted (``redact_text``).
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be 1–{MAX_LIMIT}")
    f = filters
    if f.judge is None and (f.outcome is not None or f.min_score is not None or f.max_score is not None):
        raise BadRequest("outcome, min_score and max_score need judge")
    if f.q and redact_text:
        raise BadRequest("text search is off: texts are stored redacted (redact_text)")
    jf = JudgeFilter(f.judge, f.outcome, f.min_score, f.max_score) if f.judge else None
    query = TraceQuery(
        app=f.app,
        scenario=f.scenario,
        outcome=f.trace_outcome,
        source=f.source,
        exclude_source="api" if f.source is None and f.run_id is None and not f.include_api else None,
        run_id=f.run_id,
        since=f.since,
        until=f.until,
        q=clean_text(f.q) or None,  # NUL and lone surrogates cannot reach PostgreSQL
        judge=jf,
        after=time_key(cursor),
    )
    rows = await store.list_trace_rows(query, limit + 1)
    items = [TraceSummary.model_validate(r) for r in rows[:limit]]
    nxt = None
    if len(rows) > limit:
        last = rows[limit - 1]
        nxt = encode_cursor([last["received_at"], last["trace_id"]])
    return Page[TraceSummary](items=items, next_cursor=nxt)


async def get_trace(store: PostgresStore, trace_id: str) -> TraceDetail:
    """One trace with every judgement (all versions, by judge).

    Raises:
        NotFoundError: no such trace.
    """
    try:
        tid = normalize_trace_id(trace_id)
    except ValueError as e:
        raise NotFoundError("trace id is empty") from e
    r = await store.get_trace(tid)
    if r is None:
        raise NotFoundError(f"trace {trace_id!r} not found")
    t = r.trace
    newest, older = newest_per_judge(r.judgements)
    return TraceDetail(
        trace_id=t.trace_id,
        span_id=t.span_id,
        app=t.app,
        scenario=t.scenario,
        source=t.source.value,
        outcome=r.outcome.value,
        outcome_reason=r.outcome_reason,
        received_at=r.received_at,
        question=t.question,
        answer=t.answer,
        context=t.context,
        documents=[DocumentView(id=d.id, rank=d.rank, score=d.score, content=d.content) for d in t.documents],
        expected_answer=t.expected_answer,
        keywords=list(t.keywords) if t.keywords is not None else None,
        model=t.model,
        latency_s=t.latency_s,
        run_id=t.run_id,
        test_case_id=t.test_case_id,
        incomplete=t.incomplete,
        redacted=(t.question or "").startswith("sha256:") or (t.answer or "").startswith("sha256:"),
        attributes=t.attributes,
        judgements=[
            judgement_view(j, t.answer).model_copy(update={"latest": any(j is n for n in newest)})
            for j in r.judgements
        ],
        older_versions=older,
    )


async def copy_to_test_set(
    store: PostgresStore,
    trace_id: str,
    test_set: str,
    *,
    case_id: str | None = None,
    expected_answer: str | None = None,
    keep_answer: bool = True,
) -> dict[str, Any]:
    """Add trace ``trace_id`` to ``test_set`` as a case: its question, retrieved contexts (with ids), answer
    (unless ``keep_answer`` is false: then replay asks the RAG endpoint), keywords, the given
    ``expected_answer`` (else the trace's), and ``app``/``scenario``/``source_trace_id`` as metadata.

    Returns the case as a file line.

    Raises:
        NotFoundError: no such trace or test set.
        Conflict: the case id exists in the test set.
        BadRequest: the trace's texts are redacted (nothing to copy), or it has no question.
    """
    detail = await get_trace(store, trace_id)
    if detail.redacted:
        raise BadRequest("the trace's texts are stored redacted: nothing to copy")
    try:
        question = require_question(detail.question)
    except ValueError as e:
        raise BadRequest(f"the trace cannot be a test case: {e}") from e
    ts = await load_test_set(store, test_set)
    cid = case_id or f"trace-{detail.trace_id[:16]}"
    if any(c.id == cid for c in ts.cases):
        raise Conflict(f"case {cid!r} exists in test set {test_set!r}")
    docs = [d for d in detail.documents if d.content.strip()]
    contexts = [d.content for d in docs] or ([detail.context] if detail.context else [])
    metadata: dict[str, Any] = {"source_trace_id": detail.trace_id}
    if detail.app:
        metadata["app"] = detail.app
    if detail.scenario:
        metadata["scenario"] = detail.scenario
    case = TestCase(
        id=cid,
        question=question,
        expected_answer=expected_answer or detail.expected_answer,
        keywords=tuple(detail.keywords) if detail.keywords else None,
        answer=detail.answer if keep_answer else None,
        contexts=tuple(contexts),
        doc_ids=tuple(d.id for d in docs) if any(d.id for d in docs) else (),
        metadata=metadata,
    )
    await store.upsert_test_set(ts.model_copy(update={"cases": (*ts.cases, case)}))
    return case_row(case)
