"""Conversions between the shared model types and the store's rows (column arrays for bulk upserts).

Pure functions, no I/O. Text is sanitised on the way in: NUL characters (which PostgreSQL rejects in ``text``
and ``jsonb``) are removed, lone surrogates become U+FFFD and non-finite floats inside JSON become ``null``, so one odd trace never fails a
whole batch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg

from ragpulse.model import (
    RUN_STALE_AFTER_S,
    Backend,
    Document,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    RunRecord,
    RunStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)
from ragpulse.owner import OWNER_HOST, pid_alive
from ragpulse.store.redaction import redact, redact_attributes, redact_reason
from ragpulse.textclean import clean_text, needs_cleaning

__all__ = [
    "JUDGEMENT_COLUMNS",
    "TRACE_COLUMNS",
    "Row",
    "clean",
    "dumps",
    "judgement_from_row",
    "judgement_row",
    "result_from_rows",
    "run_from_row",
    "run_interrupted",
    "trace_from_row",
    "trace_row",
    "utc",
]

#: A fetched row (asyncpg record) or any mapping with the same keys.
Row = asyncpg.Record | Mapping[str, Any]

#: Trace columns written by ``write_results``: (name, PostgreSQL type of the unnest array, json?).
TRACE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("trace_id", "text", False),
    ("span_id", "text", False),
    ("app", "text", False),
    ("scenario", "text", False),
    ("question", "text", False),
    ("answer", "text", False),
    ("context", "text", False),
    ("documents", "text", True),
    ("question_chars", "int4", False),
    ("answer_chars", "int4", False),
    ("context_chars", "int4", False),
    ("redacted", "bool", False),
    ("model", "text", False),
    ("latency_s", "float8", False),
    ("start_time", "timestamptz", False),
    ("end_time", "timestamptz", False),
    ("attributes", "text", True),
    ("source", "text", False),
    ("outcome", "text", False),
    ("outcome_reason", "text", False),
    ("incomplete", "bool", False),
    ("time_replaced", "bool", False),
    ("run_id", "text", False),
    ("test_case_id", "text", False),
    ("expected_answer", "text", False),
    ("keywords", "text", True),
    ("not_evaluable", "text", False),
    ("reference_contexts", "text", True),
    ("context_labels", "text", True),
    ("labelled_contexts", "text", True),
    ("labelled_doc_ids", "text", True),
    ("answer_span_id", "text", False),
    ("answer_candidates", "text", True),
    ("error", "text", False),
    ("session_id", "text", False),
    ("turns", "text", True),
    ("prompt_tokens", "int4", False),
    ("completion_tokens", "int4", False),
    ("total_prompt_tokens", "int4", False),
    ("total_completion_tokens", "int4", False),
    ("usage", "text", True),
    ("received_at", "timestamptz", False),
)

#: Judgement columns written by ``write_results`` (same shape as :data:`TRACE_COLUMNS`).
JUDGEMENT_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("trace_id", "text", False),
    ("judge", "text", False),
    ("version", "text", False),
    ("app", "text", False),
    ("declared_version", "text", False),
    ("backend", "text", False),
    ("model", "text", False),
    ("score", "float8", False),
    ("passed", "bool", False),
    ("threshold", "float8", False),
    ("status", "text", False),
    ("reason", "text", False),
    ("flags", "text", True),
    ("raw_output", "text", False),
    ("latency_s", "float8", False),
    ("prompt_tokens", "int4", False),
    ("completion_tokens", "int4", False),
    ("source", "text", False),
    ("content_hash", "text", False),
    ("published_at", "timestamptz", False),
    ("prompt", "text", False),
)


def clean(text: str | None) -> str | None:
    """``text`` without NUL characters and with lone surrogates as U+FFFD (PostgreSQL cannot store either);
    see :func:`ragpulse.textclean.clean_text`."""
    return clean_text(text)


def _jsonable(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, str):
        return clean(v)
    if isinstance(v, Mapping):
        return {str(clean(str(k))): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, int)):
        return v
    return clean(str(v))


def dumps(value: Any) -> str:
    """JSON text for a ``jsonb`` column: NUL-free strings, non-finite floats as ``null``, other objects as str.

    Fast path: plain ``json.dumps``; the sanitising walk runs only when that fails or the text holds a NUL.
    """
    if not value and type(value) in _EMPTY:  # most list columns of a trace are empty
        return _EMPTY[type(value)]
    try:
        text = _JSON.encode(value)
    except (TypeError, ValueError):
        text = None
    # json escapes a NUL as \u0000, so the text itself can only hold lone surrogates
    if text is None or "\\u0000" in text or needs_cleaning(text):
        text = _JSON.encode(_jsonable(value))
    return text


#: One encoder for every ``jsonb`` value (``json.dumps`` with options builds a new one per call).
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_EMPTY: dict[type, str] = {list: "[]", tuple: "[]", dict: "{}"}


def utc(dt: datetime | None) -> datetime | None:
    """``dt`` with UTC attached when it is naive (naive times in the model mean UTC), else unchanged."""
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt


def _chars(text: str | None) -> int | None:
    return None if text is None else len(text)


def trace_row(result: TraceResult, *, redact_text: bool) -> tuple[Any, ...]:
    """One row of :data:`TRACE_COLUMNS` for ``result`` (texts redacted when ``redact_text``)."""
    t = result.trace
    question, answer, context = clean(t.question), clean(t.answer), clean(t.context)
    expected = clean(t.expected_answer)
    docs: list[dict[str, Any]] = []
    for d in t.documents:
        dd: dict[str, Any] = {
            "id": d.id,
            "content": d.content,
            "score": d.score,
            "rank": d.rank,
            "metadata": d.metadata,
        }
        if redact_text:
            dd["content_chars"] = len(d.content)
            dd["content"] = redact(d.content) if d.content else ""
        docs.append(dd)
    attributes: dict[str, Any] = dict(t.attributes)
    if redact_text:
        attributes = redact_attributes(attributes)
    q_chars, a_chars, c_chars = _chars(question), _chars(answer), _chars(context)
    references = [clean(r) or "" for r in t.reference_contexts]
    turns = [{"question": clean(u.question) or "", "answer": clean(u.answer)} for u in t.turns]
    labelled = [clean(c) or "" for c in t.labelled_contexts] if t.labelled_contexts is not None else None
    if redact_text:
        question, answer, context, expected = (
            redact(question),
            redact(answer),
            redact(context),
            redact(expected),
        )
        references = [redact(r) or "" for r in references]
        labelled = [redact(c) or "" for c in labelled] if labelled is not None else None
        turns = [{"question": redact(u["question"]) or "", "answer": redact(u["answer"])} for u in turns]
    return (
        t.trace_id,
        t.span_id,
        clean(t.app),
        clean(t.scenario),
        question,
        answer,
        context,
        dumps(docs),
        q_chars,
        a_chars,
        c_chars,
        redact_text,
        clean(t.model),
        t.latency_s,
        t.start_time,
        t.end_time,
        dumps(attributes),
        t.source.value,
        result.outcome.value,
        clean(result.outcome_reason),
        t.incomplete,
        t.time_replaced,
        clean(t.run_id),
        clean(t.test_case_id),
        expected,
        dumps(list(t.keywords)) if t.keywords is not None else None,
        clean(t.not_evaluable),
        dumps(references),
        dumps(list(t.context_labels)) if t.context_labels is not None else None,
        dumps(labelled) if labelled is not None else None,
        dumps(list(t.labelled_doc_ids)) if t.labelled_doc_ids is not None else None,
        t.answer_span_id,
        dumps(list(t.answer_candidates)),
        clean(t.error),
        clean(t.session_id),  # an id, never redacted
        dumps(turns),
        t.prompt_tokens,
        t.completion_tokens,
        t.total_prompt_tokens,
        t.total_completion_tokens,
        dumps([u.model_dump() for u in t.usage]),
        utc(result.received_at),
    )


def judgement_row(
    trace: Trace,
    j: Judgement,
    *,
    redact_text: bool,
    published_at: datetime | None = None,
    content_hash: str | None = None,
) -> tuple[Any, ...]:
    """One row of :data:`JUDGEMENT_COLUMNS` (reason reduced to its code and raw output dropped when
    ``redact_text``: both may quote the answer). ``published_at`` ``None`` puts the judgement in the results
    stream's outbox (migration 061). ``content_hash``: ``trace.content_hash`` when the caller has it already
    (computed here otherwise)."""
    ok = j.status is JudgementStatus.OK
    reason = redact_reason(j.reason, ok) if redact_text else clean(j.reason)
    return (
        trace.trace_id,
        j.judge,
        j.version,
        clean(trace.app),
        j.declared_version,
        j.backend.value,
        j.model,
        j.score if ok else None,
        j.passed if ok else None,
        j.threshold,
        j.status.value,
        reason,
        dumps(j.flags.model_dump()),
        None if redact_text else clean(j.raw_output),
        j.latency_s,
        j.prompt_tokens,
        j.completion_tokens,
        trace.traffic_source,
        content_hash if content_hash is not None else trace.content_hash,
        published_at,
        None if redact_text else clean(j.prompt),
    )


def trace_from_row(row: Row) -> Trace:
    """Rebuild a :class:`Trace` from a ``traces`` row (redacted texts come back as ``sha256:<hex>``)."""
    docs = [Document.model_validate(d) for d in (row["documents"] or [])]
    return Trace(
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        app=row["app"],
        scenario=row["scenario"],
        question=row["question"],
        documents=tuple(docs),
        context=row["context"],
        answer=row["answer"],
        model=row["model"],
        latency_s=row["latency_s"],
        start_time=row["start_time"],
        end_time=row["end_time"],
        attributes=row["attributes"] or {},
        source=Source(row["source"]),
        incomplete=row["incomplete"],
        time_replaced=bool(row.get("time_replaced") or False),
        run_id=row["run_id"],
        test_case_id=row["test_case_id"],
        expected_answer=row["expected_answer"],
        keywords=row["keywords"],
        not_evaluable=row["not_evaluable"],
        reference_contexts=row["reference_contexts"] or (),
        context_labels=row["context_labels"],
        labelled_contexts=row["labelled_contexts"],
        labelled_doc_ids=row["labelled_doc_ids"],
        answer_span_id=row["answer_span_id"],
        answer_candidates=row["answer_candidates"] or (),
        error=row["error"],
        session_id=row.get("session_id"),
        turns=row.get("turns") or (),
        prompt_tokens=row.get("prompt_tokens"),
        completion_tokens=row.get("completion_tokens"),
        total_prompt_tokens=row.get("total_prompt_tokens"),
        total_completion_tokens=row.get("total_completion_tokens"),
        usage=row.get("usage") or (),
    )


def judgement_from_row(row: Row) -> Judgement:
    """Rebuild a :class:`Judgement` from a ``judgements`` row."""
    return Judgement(
        judge=row["judge"],
        version=row["version"],
        backend=Backend(row["backend"]),
        model=row["model"],
        score=row["score"],
        passed=row["passed"],
        threshold=row["threshold"],
        status=JudgementStatus(row["status"]),
        reason=row["reason"],
        flags=JudgementFlags.model_validate(row["flags"] or {}),
        raw_output=row["raw_output"],
        latency_s=row["latency_s"],
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        declared_version=row["declared_version"],
        prompt=row.get("prompt"),
    )


def result_from_rows(row: Row, judgements: Sequence[Row]) -> TraceResult:
    """Rebuild a :class:`TraceResult` from a ``traces`` row and its ``judgements`` rows."""
    return TraceResult(
        trace=trace_from_row(row),
        outcome=TraceOutcome(row["outcome"]),
        outcome_reason=row["outcome_reason"],
        judgements=tuple(judgement_from_row(j) for j in judgements),
        received_at=row["received_at"],
    )


def run_interrupted(row: Row) -> bool:
    """Whether a ``runs`` row says ``running`` but its process is gone: the owner pid no longer exists on this
    host (:data:`~ragpulse.owner.OWNER_HOST`), or the heartbeat is older than
    :data:`~ragpulse.model.RUN_STALE_AFTER_S` (by the database clock ``db_now`` when the query selected it).
    Runs without an owner pid (from before migration 013, or the portal's queue) are never judged stale here."""
    if row["status"] != RunStatus.RUNNING.value:
        return False
    pid = row.get("owner_pid")
    if pid is None:
        return False
    if row.get("owner_host") == OWNER_HOST and not pid_alive(int(pid)):
        return True
    beat = row.get("heartbeat_at")
    now = row.get("db_now") or datetime.now(UTC)
    return beat is not None and (now - beat).total_seconds() > RUN_STALE_AFTER_S


def run_from_row(row: Row) -> RunRecord:
    """Rebuild a :class:`RunRecord` from a ``runs`` row; a stale ``running`` run reads as ``interrupted``
    (:func:`run_interrupted`)."""
    return RunRecord(
        run_id=row["run_id"],
        test_set=row["test_set"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        status=RunStatus.INTERRUPTED if run_interrupted(row) else RunStatus(row["status"]),
        judges=row["judges"] or {},
        settings=row["settings"] or {},
        report=row["report"],
        cases_hash=row.get("cases_hash"),
        owner_host=row.get("owner_host"),
        owner_pid=row.get("owner_pid"),
        heartbeat_at=row.get("heartbeat_at"),
    )
