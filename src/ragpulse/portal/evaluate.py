"""Judge one trace now (``POST /api/v1/evaluate``): the evaluator half of an evaluator–optimizer loop.

The trace (a Kafka trace event, see ``ingest/trace_event.schema.json``) goes through the running engine like
any other, stored with ``source=api`` — which the live-traffic charts, score statistics and alert rules leave
out by default, so failing drafts do not fire the faithfulness alert. Every attempt is its own trace: the
service gives it a fresh trace id (the caller's ``traceId``, if any, is kept in the attribute
``evaluate.client_trace_id``). The answer lists every judgement plus a short ``feedback`` text naming what
failed (unsupported sentences, missing keywords), to append to the question before regenerating.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from pydantic import BaseModel

from ragpulse.errors import BadRequest, ServiceError
from ragpulse.ingest.events import EventRejected, parse_event
from ragpulse.jsonutil import TooDeep, strict_loads
from ragpulse.model import JudgementStatus, Source, TraceResult
from ragpulse.portal.traces import JudgementView, judgement_view
from ragpulse.protocols import TraceSink

__all__ = ["CLIENT_TRACE_ID_ATTRIBUTE", "EvaluateResult", "EvaluationTimeout", "evaluate", "feedback_text"]

#: Attribute that keeps the caller's own trace id.
CLIENT_TRACE_ID_ATTRIBUTE = "evaluate.client_trace_id"


class EvaluationTimeout(ServiceError):
    """The judgements were not ready within the deadline (the trace is still judged and stored)."""

    def __init__(self, trace_id: str, timeout_s: float) -> None:
        super().__init__(
            f"trace {trace_id} not judged within {timeout_s:g} s; it is still judged and stored "
            f"(GET /api/v1/traces/{trace_id})"
        )
        self.trace_id = trace_id


class EvaluationFailed(ServiceError):
    """The trace was judged but its result could not be stored."""


class EvaluateResult(BaseModel):
    """The judgements of one evaluated trace.

    ``passed``: every judge that decided passed and none errored (``None`` when no judge decided);
    ``feedback``: what failed, one line per failing judge (empty when everything passed)."""

    trace_id: str
    outcome: str
    outcome_reason: str | None = None
    passed: bool | None
    judgements: list[JudgementView]
    feedback: str


def _event_with_new_id(body: bytes) -> tuple[bytes, str]:
    try:
        event = strict_loads(body)
    except TooDeep as e:
        raise BadRequest(str(e), code=e.code) from e
    except ValueError as e:
        raise BadRequest(f"body is not valid JSON: {str(e)[:200]}") from e
    if not isinstance(event, dict):
        raise BadRequest("body must be one trace event (a JSON object)")
    client_id = event.pop("traceId", None)
    client_id = event.pop("trace_id", None) if client_id is None else client_id
    attributes = event.get("attributes")
    if attributes is not None and not isinstance(attributes, dict):
        raise BadRequest("attributes must be an object")
    tid = uuid.uuid4().hex
    event["traceId"] = tid
    if client_id is not None:
        event["attributes"] = {**(attributes or {}), CLIENT_TRACE_ID_ATTRIBUTE: str(client_id)}
    return json.dumps(event, ensure_ascii=False).encode(), tid


def feedback_text(views: list[JudgementView]) -> str:
    """One line per judge that failed or errored: its score against the threshold and what it found
    (unsupported sentences from the per-claim details, else the judge's reason — e.g. missing keywords)."""
    lines: list[str] = []
    for v in views:
        if v.outcome == "fail":
            unsupported = [c.text for c in v.claims if c.supported is False]
            head = f"{v.judge}: score {v.score:.2f} below threshold {v.threshold:.2f}"
            if unsupported:
                quoted = "; ".join(f'"{t.strip()}"' for t in unsupported[:10])
                lines.append(f"{head}. Not supported by the retrieved context: {quoted}")
            else:
                lines.append(f"{head}. {v.reason}")
        elif v.outcome == "error":
            lines.append(f"{v.judge}: not judged ({v.reason})")
    return "\n".join(lines)


async def evaluate(sink: TraceSink, body: bytes, *, timeout_s: float = 30.0) -> EvaluateResult:
    """Judge the trace event ``body`` through ``sink`` (the engine) and wait up to ``timeout_s`` for it.

    Raises:
        BadRequest: the body is not a valid trace event (the reason names the field).
        EvaluationTimeout: not judged within ``timeout_s`` (it still is, later).
        EvaluationFailed: the result could not be stored.
    """
    raw, tid = _event_with_new_id(body)
    try:
        trace = parse_event(raw, max_bytes=max(len(raw), 1))
    except EventRejected as e:
        raise BadRequest(f"not a valid trace event: {e}") from e
    trace = trace.model_copy(update={"source": Source.API})
    loop = asyncio.get_running_loop()
    done: asyncio.Future[tuple[TraceResult, bool]] = loop.create_future()

    async def ack(result: TraceResult, ok: bool) -> None:
        if not done.done():
            done.set_result((result, ok))

    await sink.submit(trace, ack)
    try:
        result, ok = await asyncio.wait_for(asyncio.shield(done), timeout_s)
    except TimeoutError as e:
        raise EvaluationTimeout(tid, timeout_s) from e
    if not ok:
        raise EvaluationFailed(f"trace {tid} was judged but could not be stored")
    views = [judgement_view(j, result.trace.answer) for j in result.judgements]
    decided = [j for j in result.judgements if j.status is JudgementStatus.OK]
    errors = any(j.status is JudgementStatus.ERROR for j in result.judgements)
    passed: Any = None if not decided else all(j.passed for j in decided) and not errors
    return EvaluateResult(
        trace_id=tid,
        outcome=result.outcome.value,
        outcome_reason=result.outcome_reason,
        passed=passed,
        judgements=views,
        feedback=feedback_text(views),
    )
