"""Stored traces: the list (newest first, keyset pagination, filters), one trace with every judgement and its
per-claim details, and "copy to test set".

Shared by ``GET /api/v1/traces``, ``GET /api/v1/traces/{id}``, the portal's Live traffic and Trace views.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel

from ragpulse.errors import BadRequest, Conflict, NotFoundError, StoreError
from ragpulse.model import (
    ABSTAINED,
    Judgement,
    ModelPrice,
    ModelUsage,
    TestCase,
    Turn,
    id_problem,
    normalize_trace_id,
    usage_cost,
)
from ragpulse.protocols import Store
from ragpulse.query import DEFAULT_LIMIT, Page, encode_cursor, source_scope, time_key
from ragpulse.runs.testset_files import require_question
from ragpulse.runs.testsets import DEFAULT_MAX_CASES, case_row
from ragpulse.store import PostgresStore
from ragpulse.store.portal import JudgeFilter, TraceQuery
from ragpulse.textclean import clean_text

__all__ = [
    "MAX_BULK",
    "MAX_LIMIT",
    "MAX_WORDS",
    "AppUsage",
    "BulkItem",
    "BulkRejected",
    "BulkResult",
    "Claim",
    "DocumentView",
    "JudgementSummary",
    "JudgementView",
    "SessionDetail",
    "SpanView",
    "TraceDetail",
    "TraceFilters",
    "TraceSummary",
    "copy_to_test_set",
    "copy_traces_to_test_set",
    "get_session",
    "get_trace",
    "judgement_view",
    "list_traces",
    "newest_per_judge",
    "search_words",
    "span_tree",
    "unsupported_claims",
]

#: Largest page of the trace list.
MAX_LIMIT = 500

TraceOutcomeName = Literal["evaluated", "not_sampled", "not_evaluable", "incomplete"]
JudgementOutcome = Literal["pass", "fail", "error", "abstained", "skipped"]
#: The judgement outcomes a trace list filters on (:attr:`ragpulse.model.Judgement.outcome`).
JUDGEMENT_OUTCOMES: tuple[JudgementOutcome, ...] = ("pass", "fail", "error", "abstained", "skipped")


class TraceFilters(BaseModel):
    """Filters of the trace list (all optional). ``outcome``/``min_score``/``max_score`` filter on a judgement
    of ``judge``, or of any judge when ``judge`` is not given (``outcome=fail``: any judge failed the trace);
    ``q`` is text in the question, ``text`` words that must each occur in the question or the answer (both
    refused when texts are redacted; :func:`search_words`); ``model`` the app's model;
    ``min_latency_s``/``max_latency_s`` the trace's latency in seconds (inclusive);
    ``since``/``until`` are UTC (``until`` exclusive). ``source``: ``live`` (the default: Kafka and OTLP),
    ``kafka``, ``otlp``, ``replay``, ``api`` (``POST /evaluate``) or ``all``
    (:func:`~ragpulse.query.source_scope`); without it, ``run_id`` or ``include_api`` mean ``all``."""

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
    session: str | None = None
    source: str | None = None
    q: str | None = None
    text: str | None = None
    model: str | None = None
    min_latency_s: float | None = None
    max_latency_s: float | None = None
    include_api: bool = False


#: Most words of the ``text`` filter.
MAX_WORDS = 8


def search_words(text: str | None) -> tuple[str, ...]:
    """The words of the ``text`` filter: split at white space, NUL and lone surrogates removed, duplicates
    (ignoring case) dropped, in order.

    Raises:
        BadRequest: more than :data:`MAX_WORDS` words.
    """
    words: list[str] = []
    for raw in (clean_text(text) or "").split():
        if raw.casefold() not in (w.casefold() for w in words):
            words.append(raw)
    if len(words) > MAX_WORDS:
        raise BadRequest(f"text: at most {MAX_WORDS} words")
    return tuple(words)


class JudgementSummary(BaseModel):
    """The latest judgement of one judge on a trace, as listed."""

    judge: str
    status: str
    score: float | None = None
    passed: bool | None = None
    threshold: float | None = None
    reason_code: str | None = None

    @property
    def outcome(self) -> str:
        """``pass``/``fail``/``error``/``abstained``/``skipped`` (as :attr:`ragpulse.model.Judgement.outcome`)."""
        if self.status == "ok":
            return "pass" if self.passed else "fail"
        if self.status == "skipped" and self.reason_code == ABSTAINED:
            return ABSTAINED
        return self.status


class AppUsage(BaseModel):
    """The app's own model and token usage on a trace, and its cost at the price table (``export.model_prices``).

    ``model``/``prompt_tokens``/``completion_tokens``: the answering LLM call; ``total_*``: summed over every
    LLM call of the trace; ``usage``: per model; ``app_cost``: ``None`` when a model of ``usage`` is not in the
    price table (or no usage is known): tokens without a cost, never a cost of 0. Token counts are ``None``
    when the source did not report them."""

    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    usage: list[ModelUsage] = []
    app_cost: float | None = None


class TraceSummary(AppUsage):
    """A row of the trace list (``question`` cut to 300 characters), with its session id and the app's usage."""

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
    session_id: str | None = None
    start_time: datetime | None = None
    judgements: list[JudgementSummary] = []


class SessionDetail(BaseModel):
    """A session's traces in turn order (oldest first, by start time, else time received), at most
    :data:`MAX_LIMIT` (``truncated`` when it has more), and the app's tokens and cost summed over them
    (``app_cost`` ``None`` when a trace's is)."""

    session_id: str
    traces: list[TraceSummary]
    truncated: bool = False
    total_prompt_tokens: int = 0
    total_completion_tokens: int = 0
    app_cost: float | None = None


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
    #: The messages sent to the judge model (``[role]`` headed, calls joined by ``---``), its raw reply and the
    #: reasoning it sent beside its answer (``flags.reasoning``); ``None`` when not kept (heuristic judges,
    #: texts redacted, judgements stored before the prompt was kept).
    prompt: str | None = None
    raw_output: str | None = None
    reasoning: str | None = None
    flags: dict[str, Any] = {}
    claims: list[Claim] = []
    #: The newest stored judgement of its judge on the trace (:func:`newest_per_judge`); the claims table and
    #: the highlighted answer show only those.
    latest: bool = True


class SpanView(BaseModel):
    """One span of the trace's span tree (from the OTLP span outline, ``attributes.spans``), in tree order:
    ``depth`` 0 for a root; ``start_ms`` from the trace's first span, ``duration_ms`` (milliseconds, ``None``
    when the span had no time); ``offset``/``width`` its place on the timeline as fractions 0–1 of the trace's
    whole span."""

    span_id: str
    parent_span_id: str | None = None
    name: str
    kind: str = ""
    start_ms: float | None = None
    duration_ms: float | None = None
    error: bool = False
    depth: int = 0
    offset: float = 0.0
    width: float = 0.0


def span_tree(outline: Any) -> list[SpanView]:
    """The span outline ``attributes.spans`` (a list of ``{"span_id", "parent_span_id", "name", "kind",
    "start_ms", "duration_ms", "error"}``, see :func:`ragpulse.ingest.otlp.conventions.span_outline`) as a tree
    in depth-first order, children by start time; a span whose parent is not in the outline is a root.
    Malformed entries are skipped; anything but a list gives ``[]``."""
    if not isinstance(outline, list):
        return []
    spans: list[SpanView] = []
    for item in outline:
        if not isinstance(item, dict):
            continue
        try:
            spans.append(SpanView.model_validate(item))
        except ValueError:
            continue
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[SpanView]] = {}
    for s in spans:
        parent = s.parent_span_id if s.parent_span_id in ids and s.parent_span_id != s.span_id else None
        children.setdefault(parent, []).append(s)
    total = max(((s.start_ms or 0.0) + (s.duration_ms or 0.0) for s in spans), default=0.0)
    out: list[SpanView] = []
    seen: set[str] = set()

    def walk(parent: str | None, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda x: (x.start_ms is None, x.start_ms or 0.0)):
            if s.span_id in seen:  # a cycle or a repeated id
                continue
            seen.add(s.span_id)
            offset = (s.start_ms or 0.0) / total if total > 0 else 0.0
            width = (s.duration_ms or 0.0) / total if total > 0 else 0.0
            out.append(s.model_copy(update={"depth": depth, "offset": offset, "width": width}))
            walk(s.span_id, depth + 1)

    walk(None, 0)
    return out


class DocumentView(BaseModel):
    """A retrieved document in rank order."""

    id: str | None = None
    rank: int
    score: float | None = None
    content: str
    #: what the retriever sent with the document (source, title …), as stored
    metadata: dict[str, Any] = {}


class TraceDetail(AppUsage):
    """One trace with everything stored about it (its session, earlier turns and the app's usage included)."""

    trace_id: str
    span_id: str | None = None
    app: str | None = None
    scenario: str | None = None
    source: str
    outcome: str
    outcome_reason: str | None = None
    #: the trace-level error the source reported (OTLP root status ERROR, the event's ``error``), one line —
    #: as ``ragpulse trace --json`` shows it
    error: str | None = None
    received_at: datetime
    question: str | None = None
    answer: str | None = None
    context: str | None = None
    documents: list[DocumentView] = []
    expected_answer: str | None = None
    keywords: list[str] | None = None
    latency_s: float | None = None
    run_id: str | None = None
    test_case_id: str | None = None
    session_id: str | None = None
    turns: list[Turn] = []
    incomplete: bool = False
    redacted: bool = False
    attributes: dict[str, Any] = {}
    #: The span tree with its timeline (OTLP traces; ``[]`` for traces that came without spans).
    spans: list[SpanView] = []
    #: The app's own reasoning (thinking parts of its answering call, ``attributes.reasoning``), never judged.
    reasoning: str | None = None
    judgements: list[JudgementView] = []
    #: ``{judge: n}``: how many older judgements (other versions) of each judge are stored besides the newest.
    older_versions: dict[str, int] = {}
    #: The rest of the stored :class:`ragpulse.model.Trace` (``ragpulse trace --json`` prints this document):
    #: span times (UTC), whether they were replaced by receive times, why it was not evaluable, the ground
    #: truth a test case carried and the answering span.
    start_time: datetime | None = None
    end_time: datetime | None = None
    time_replaced: bool = False
    not_evaluable: str | None = None
    reference_contexts: list[str] = []
    context_labels: list[bool] | None = None
    labelled_contexts: list[str] | None = None
    labelled_doc_ids: list[str] | None = None
    answer_span_id: str | None = None
    answer_candidates: list[str] = []


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
        prompt=j.prompt,
        raw_output=j.raw_output,
        reasoning=flags.get("reasoning") if isinstance(flags.get("reasoning"), str) else None,
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
    prices: Mapping[str, ModelPrice] | None = None,
) -> Page[TraceSummary]:
    """Traces matching ``filters``, newest first (by time received), ``limit`` ≤ :data:`MAX_LIMIT` per page;
    the app's cost at ``prices`` (``export.model_prices``).

    Raises:
        BadRequest: a bad cursor or limit, or ``q`` while texts are redacted (``redact_text``).
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be 1–{MAX_LIMIT}")
    f = filters
    if (f.q or (f.text or "").strip()) and redact_text:
        raise BadRequest("text search is off: texts are stored redacted (redact_text)")
    if f.min_latency_s is not None and f.max_latency_s is not None and f.min_latency_s > f.max_latency_s:
        raise BadRequest("min_latency_s is above max_latency_s")
    wanted = (f.judge, f.outcome, f.min_score, f.max_score)
    jf = JudgeFilter(*wanted) if any(v is not None for v in wanted) else None
    scope = source_scope(f.source, include_api=f.include_api, run_id=f.run_id)
    query = TraceQuery(
        app=f.app,
        scenario=f.scenario,
        outcome=f.trace_outcome,
        source=scope.only,
        exclude_sources=scope.excluded,
        no_runs=scope.no_runs,
        run_id=f.run_id,
        session_id=f.session,
        since=f.since,
        until=f.until,
        q=clean_text(f.q) or None,  # NUL and lone surrogates cannot reach PostgreSQL
        judge=jf,
        after=time_key(cursor),
        words=search_words(f.text),
        model=f.model,
        min_latency_s=f.min_latency_s,
        max_latency_s=f.max_latency_s,
    )
    rows = await store.list_trace_rows(query, limit + 1)
    items = [_summary(r, prices or {}) for r in rows[:limit]]
    nxt = None
    if len(rows) > limit:
        last = rows[limit - 1]
        nxt = encode_cursor([last["received_at"], last["trace_id"]])
    return Page[TraceSummary](items=items, next_cursor=nxt)


def _summary(row: Mapping[str, Any], prices: Mapping[str, ModelPrice]) -> TraceSummary:
    s = TraceSummary.model_validate(row)
    return s.model_copy(update={"app_cost": usage_cost(s.usage, prices)})


async def get_session(
    store: PostgresStore, session_id: str, *, prices: Mapping[str, ModelPrice] | None = None
) -> SessionDetail:
    """The traces of session ``session_id`` in turn order (every source, ``api`` included), with the app's
    tokens and cost summed over them.

    Raises:
        NotFoundError: no trace has this session id.
    """
    sid = session_id.strip()
    rows = (
        await store.list_trace_rows(TraceQuery(session_id=sid), MAX_LIMIT + 1, in_session_order=True)
        if sid and "\x00" not in sid  # NUL: PostgreSQL stores no such text, so no session has this id
        else []
    )
    if not rows:
        raise NotFoundError(f"session {session_id[:100]!r} not found")
    items = [_summary(r, prices or {}) for r in rows[:MAX_LIMIT]]
    costs = [i.app_cost for i in items]
    return SessionDetail(
        session_id=sid,
        traces=items,
        truncated=len(rows) > MAX_LIMIT,
        total_prompt_tokens=sum(i.total_prompt_tokens or 0 for i in items),
        total_completion_tokens=sum(i.total_completion_tokens or 0 for i in items),
        app_cost=None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
    )


async def get_trace(
    store: Store, trace_id: str, *, prices: Mapping[str, ModelPrice] | None = None
) -> TraceDetail:
    """One trace with every judgement (all versions, by judge), and the app's cost at ``prices``: the
    document of ``GET /api/v1/traces/{id}`` and of ``ragpulse trace --json``.

    Raises:
        NotFoundError: no such trace.
    """
    try:
        tid = normalize_trace_id(trace_id)
    except ValueError as e:
        raise NotFoundError("trace id is empty") from e
    r = await store.get_trace(tid) if "\x00" not in tid else None  # PostgreSQL stores no text with NUL

    if r is None:
        raise NotFoundError(f"trace {trace_id[:100]!r} not found")
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
        error=t.error,
        received_at=r.received_at,
        question=t.question,
        answer=t.answer,
        context=t.context,
        documents=[
            DocumentView(id=d.id, rank=d.rank, score=d.score, content=d.content, metadata=d.metadata)
            for d in t.documents
        ],
        expected_answer=t.expected_answer,
        keywords=list(t.keywords) if t.keywords is not None else None,
        model=t.model,
        prompt_tokens=t.prompt_tokens,
        completion_tokens=t.completion_tokens,
        total_prompt_tokens=t.total_prompt_tokens,
        total_completion_tokens=t.total_completion_tokens,
        usage=list(t.usage),
        app_cost=t.app_cost(prices or {}),
        latency_s=t.latency_s,
        run_id=t.run_id,
        test_case_id=t.test_case_id,
        session_id=t.session_id,
        turns=list(t.turns),
        incomplete=t.incomplete,
        redacted=(t.question or "").startswith("sha256:") or (t.answer or "").startswith("sha256:"),
        attributes=t.attributes,
        spans=span_tree(t.attributes.get("spans")),
        reasoning=t.attributes["reasoning"] if isinstance(t.attributes.get("reasoning"), str) else None,
        judgements=[
            judgement_view(j, t.answer).model_copy(update={"latest": any(j is n for n in newest)})
            for j in r.judgements
        ],
        older_versions=older,
        start_time=t.start_time,
        end_time=t.end_time,
        time_replaced=t.time_replaced,
        not_evaluable=t.not_evaluable,
        reference_contexts=list(t.reference_contexts),
        context_labels=list(t.context_labels) if t.context_labels is not None else None,
        labelled_contexts=list(t.labelled_contexts) if t.labelled_contexts is not None else None,
        labelled_doc_ids=list(t.labelled_doc_ids) if t.labelled_doc_ids is not None else None,
        answer_span_id=t.answer_span_id,
        answer_candidates=list(t.answer_candidates),
    )


async def copy_to_test_set(
    store: PostgresStore,
    trace_id: str,
    test_set: str,
    *,
    case_id: str | None = None,
    expected_answer: str | None = None,
    keep_answer: bool = True,
    max_cases: int = DEFAULT_MAX_CASES,
) -> dict[str, Any]:
    """Add trace ``trace_id`` to ``test_set`` as case ``case_id`` (default ``trace-<trace id>``): its question, retrieved contexts (with ids), answer
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
    cid = case_id or f"trace-{detail.trace_id}"  # the whole id: prefixes of similar ids collide
    problem = id_problem(cid)
    if problem is not None:
        raise BadRequest(f"case id {cid[:100]!r} {problem}")
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
    outcome, _ = await store.insert_case(test_set, case, max_cases=max_cases)
    if outcome == "no_set":
        raise NotFoundError(f"test set {test_set[:100]!r} not found")
    if outcome == "exists":
        raise Conflict(f"case {cid!r} exists in test set {test_set!r}")
    if outcome == "full":
        raise BadRequest(
            f"too_many_cases: test set {test_set!r} holds {max_cases:,} cases, the limit",
            code="too_many_cases",
        )
    return case_row(case)


#: Most traces one bulk copy takes.
MAX_BULK = 500


class BulkItem(BaseModel):
    """One trace of a bulk copy: its id, and optionally the case id and the expected answer to store (else the
    trace's own)."""

    trace_id: str
    case_id: str | None = None
    expected_answer: str | None = None


class BulkRejected(BaseModel):
    """A trace a bulk copy did not add, with the reason (and its ``code``, e.g. ``too_many_cases``)."""

    trace_id: str
    reason: str
    code: str | None = None


class BulkResult(BaseModel):
    """What a bulk copy did: the ids of the cases created (in the order given) and the traces not added."""

    created: list[str] = []
    rejected: list[BulkRejected] = []


async def copy_traces_to_test_set(
    store: PostgresStore,
    test_set: str,
    items: Sequence[BulkItem],
    *,
    keep_answer: bool = True,
    max_cases: int = DEFAULT_MAX_CASES,
) -> BulkResult:
    """Add each trace of ``items`` to ``test_set`` as a case, one at a time through :func:`copy_to_test_set`
    (the per-case write with its lock and the test set's case limit): the case id is the one given, else
    ``trace-<trace id>``; an expected answer given for a trace replaces the trace's own. A trace that cannot be added (unknown, redacted, no question, its case id taken,
    the set full) is listed in ``rejected`` with the reason; the others are added.

    Raises:
        BadRequest: no traces, more than :data:`MAX_BULK`, or a trace listed twice.
        NotFoundError: no such test set.
    """
    if not items:
        raise BadRequest("no traces to add")
    if len(items) > MAX_BULK:
        raise BadRequest(f"at most {MAX_BULK} traces at a time")
    ids = [i.trace_id for i in items]
    if len(set(ids)) != len(ids):
        raise BadRequest("a trace is listed twice")
    if await store.test_set_row(test_set) is None:
        raise NotFoundError(f"test set {test_set[:100]!r} not found")
    out = BulkResult()
    for item in items:
        try:
            row = await copy_to_test_set(
                store,
                item.trace_id,
                test_set,
                case_id=item.case_id,
                expected_answer=(item.expected_answer or "").strip() or None,
                keep_answer=keep_answer,
                max_cases=max_cases,
            )
        except (BadRequest, Conflict, NotFoundError, StoreError) as e:
            if isinstance(e, StoreError) and e.retriable:  # an outage, not this trace: the request fails
                raise
            code = getattr(e, "code", None)
            reason = "the database rejected the case's data" if isinstance(e, StoreError) else str(e)
            out.rejected.append(
                BulkRejected(
                    trace_id=item.trace_id, reason=reason, code=code if isinstance(code, str) else None
                )
            )
            continue
        out.created.append(str(row["id"]))
    return out
