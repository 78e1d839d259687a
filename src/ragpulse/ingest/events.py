"""Kafka trace events: JSON Schema validation and mapping to :class:`~ragpulse.model.Trace`.

The event schema is the packaged file ``ragpulse/ingest/trace_event.schema.json`` (JSON Schema 2020-12);
:func:`parse_event` validates every message against that same file, so the published schema and the code
cannot drift apart. See ``docs/ingestion.md`` for the field list. Validation is a yes/no answer from
``jsonschema-rs`` (compiled, ~0.005 ms per event); only an event it rejects (or cannot take, e.g. an integer
beyond 64 bits) goes through ``jsonschema``, whose best-matching error names the rejection reason.

A message that cannot become a trace raises :class:`EventRejected` with a machine-readable ``reason``:

- ``too_large: <n> bytes > <limit>`` – the raw message is bigger than ``kafka_max_message_bytes``;
- ``not_json: <detail>`` – empty, not JSON, or a JSON value with a bad number (NaN, Infinity, or a number
  beyond any float such as ``1e400`` — except in ``latencyMs``, stored as unknown latency, and ``timestamp``,
  replaced by the receive time);
- ``too_deep: …`` – objects/arrays nested deeper than :data:`~ragpulse.jsonutil.MAX_JSON_DEPTH` (64);
- ``bad_id: /traceId: …`` (or ``/testCaseId``) – an id with a control character or a ``.``/``..`` path segment
  (:func:`~ragpulse.model.id_problem`);
- ``schema: <path>: <message>`` – JSON that breaks the schema (``<path>`` is a JSON pointer, ``/`` for the
  whole event), e.g. ``schema: /: missing required field traceId``.

Text is decoded leniently (:mod:`ragpulse.textclean`): invalid UTF-8 bytes and lone surrogates become U+FFFD
and NUL characters are removed, so one bad character never costs a trace.

A valid event without a question or an answer is *not* rejected: it becomes a trace that the engine records
as ``not_evaluable``.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

import jsonschema
import jsonschema_rs
from jsonschema.exceptions import ValidationError, best_match
from pydantic import ValidationError as PydanticValidationError

from ragpulse.errors import IngestError
from ragpulse.ingest.timestamps import epoch_to_datetime, settle_times
from ragpulse.jsonutil import TooDeep, check_depth, reject_constant
from ragpulse.model import Document, Source, Trace, id_problem
from ragpulse.textclean import clean_json, decode_utf8, json_text_needs_cleaning

__all__ = [
    "KAFKA_REJECT_REASONS",
    "SCHEMA_RESOURCE",
    "EventRejected",
    "event_schema",
    "parse_event",
    "trace_from_event",
    "trace_to_event",
]

#: The ``reason`` labels of ``ragpulse_traces_rejected_total{source="kafka"}``: :attr:`EventRejected.code`
#: values, then the Kafka source's own (a result the engine could not store, an unexpected failure).
KAFKA_REJECT_REASONS = (
    "not_json",
    "schema",
    "too_large",
    "too_deep",
    "bad_id",
    "not_stored",
    "internal_error",
)

#: Package resource holding the event schema.
SCHEMA_RESOURCE = "trace_event.schema.json"

_MAX_MESSAGE_CHARS = 200

#: camelCase name → snake_case alias accepted in events.
_ALIASES = {
    "traceId": "trace_id",
    "spanId": "span_id",
    "retrievedDocIds": "retrieved_doc_ids",
    "latencyMs": "latency_ms",
    "expectedAnswer": "expected_answer",
    "runId": "run_id",
    "testCaseId": "test_case_id",
    "notEvaluable": "not_evaluable",
    "sessionId": "session_id",
    "promptTokens": "prompt_tokens",
    "completionTokens": "completion_tokens",
    "totalPromptTokens": "total_prompt_tokens",
    "totalCompletionTokens": "total_completion_tokens",
}


class EventRejected(IngestError):
    """A Kafka message that cannot become a trace; it goes to the dead-letter topic.

    Attributes:
        reason: ``too_large: …``, ``not_json: …`` or ``schema: <path>: <message>``.
        code: the head of ``reason`` (``too_large``, ``not_json``, ``too_deep``, ``bad_id`` or ``schema``), used
            as a metric label.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason, retriable=False)
        self.reason = reason
        self.code = reason.split(":", 1)[0]


@cache
def event_schema() -> dict[str, Any]:
    """Return the packaged event JSON Schema (a dict, parsed once)."""
    text = resources.files("ragpulse.ingest").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _validator() -> Any:
    schema = event_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@cache
def _fast_validator() -> Any:
    """The same schema compiled by ``jsonschema-rs`` (formats are annotations, as for ``jsonschema``)."""
    return jsonschema_rs.validator_for(event_schema(), validate_formats=False)


def _valid(event: Any) -> bool:
    """True when ``event`` is schema-valid for certain (the compiled validator said so); False sends it to
    ``jsonschema`` for the verdict and the reason."""
    try:
        return bool(_fast_validator().is_valid(event))
    except (ValueError, TypeError, OverflowError):  # a value jsonschema-rs cannot take (e.g. a huge integer)
        return False


def _pointer(path: Any) -> str:
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE_CHARS else text[: _MAX_MESSAGE_CHARS - 1] + "…"


def _json_type(v: Any) -> str:
    """The JSON type name of a decoded value (``string``, ``number``, ``integer``, ``boolean``, …)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object" if isinstance(v, dict) else type(v).__name__


def _names(v: Any) -> str:
    return " or ".join(v) if isinstance(v, list) else str(v)


def _describe(err: ValidationError) -> str:
    """What ``err`` says without quoting the value: the rule broken and the value's JSON type (and length)."""
    got = _json_type(err.instance)
    if isinstance(err.instance, str | list | dict):
        got += f" of length {len(err.instance)}"
    v = err.validator_value
    if err.validator == "type":
        rule = f"must be of type {_names(v)}"
    elif err.validator == "minimum":
        rule = f"must be >= {v}"
    elif err.validator == "maximum":
        rule = f"must be <= {v}"
    elif err.validator == "maxLength":
        rule = f"must be at most {v} characters"
    elif err.validator == "pattern":
        rule = "must not be blank"
    else:
        rule = f"breaks the schema rule {err.validator!r}"
    return f"{rule}, got {got}"


def _schema_reason(err: ValidationError, log_text: bool) -> str:
    if not err.absolute_path and err.validator == "anyOf":
        return "schema: /: missing required field traceId (or trace_id)"
    if len(err.absolute_path) == 1 and err.absolute_path[0] in ("traceId", "trace_id"):
        return f"schema: {_pointer(err.absolute_path)}: must be a non-blank string or a non-negative integer"
    detail = err.message if log_text else _describe(err)
    return f"schema: {_pointer(err.absolute_path)}: {_short(detail)}"


def _decode(value: bytes | None, max_bytes: int) -> Any:
    if value is None or not value.strip():
        raise EventRejected("not_json: empty message")
    if len(value) > max_bytes:
        raise EventRejected(f"too_large: {len(value)} bytes > {max_bytes}")
    text = decode_utf8(value)  # lenient: invalid bytes become U+FFFD, one bad byte never costs a trace
    try:
        huge: list[_Huge] = []  # numbers beyond any float, in the order read
        event = check_depth(
            json.loads(
                text,
                strict=False,  # a raw control character (NUL, tab) in a string: taken, NUL then removed
                parse_constant=reject_constant,
                parse_float=lambda t: _float_or_huge(t, huge),
            )
        )
    except TooDeep as e:  # a poison message must be dead-lettered, not kill the consume loop
        raise EventRejected(str(e)) from e
    except (json.JSONDecodeError, ValueError) as e:
        raise EventRejected(f"not_json: {_short(str(e))}") from e
    except RecursionError as e:  # the parser's own stack ran out: the same reason
        raise EventRejected(str(TooDeep())) from e
    if huge:
        _settle_huge_numbers(event)
    if json_text_needs_cleaning(text):  # lone surrogates ("\ud83d") → U+FFFD, NUL removed
        event = clean_json(event)
    return event


class _Huge(float):
    """A JSON number beyond the float range (``1e400``), parsed as ±infinity and marked so that
    :func:`_settle_huge_numbers` can tell where it stood."""

    __slots__ = ("text",)
    text: str


def _float_or_huge(text: str, found: list[_Huge]) -> float:
    """``parse_float`` hook: the float of ``text``, or a :class:`_Huge` (also appended to ``found``) when it
    overflows."""
    value = float(text)
    if math.isfinite(value):
        return value
    huge = _Huge(value)
    huge.text = text
    found.append(huge)
    return huge


def _settle_huge_numbers(event: Any) -> None:
    """Numbers beyond any float where docs/ingestion.md gives them a meaning: ``latencyMs``/``latency_ms``
    becomes ±infinity (stored as unknown latency, ``attributes.latency_refused``); ``timestamp`` the largest float of its sign, which no date
    can hold either (replaced by the receive time, ``time_replaced``). Anywhere else such a number is rejected.

    Raises:
        EventRejected: ``not_json: <number> is not a finite JSON number`` for any other field.
    """
    if isinstance(event, dict):
        for key in ("latencyMs", "latency_ms"):
            latency = event.get(key)
            if isinstance(latency, _Huge):
                event[key] = float(latency)  # ±inf: an unknown latency, with the reason (settle_times)
        ts = event.get("timestamp")
        if isinstance(ts, _Huge):
            event["timestamp"] = math.copysign(sys.float_info.max, ts)
    stack = [event]
    while stack:
        item = stack.pop()
        if isinstance(item, _Huge):
            raise EventRejected(f"not_json: {item.text[:40]} is not a finite JSON number")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _pick(event: dict[str, Any], camel: str) -> Any:
    v = event.get(camel)
    if v is None and camel in _ALIASES:
        v = event.get(_ALIASES[camel])
    return v


def _timestamp(v: Any, log_text: bool = False) -> datetime | None:
    """The event's ``timestamp`` as a UTC time: RFC 3339 (no zone = UTC) or a Unix epoch number whose unit
    (s, ms, µs, ns) follows from its magnitude. ``None`` when missing or out of any representable range (the
    plausibility rule then replaces it by the receive time)."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise EventRejected("schema: /timestamp: must be an RFC 3339 date-time or a Unix epoch number")
    if isinstance(v, int | float):
        return epoch_to_datetime(v)
    try:
        ts = datetime.fromisoformat(str(v).strip())
    except ValueError as e:
        shown = _short(repr(v)) if log_text else f"a string of {len(str(v))} characters"
        raise EventRejected(f"schema: /timestamp: {shown} is not an RFC 3339 date-time") from e
    if ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    try:
        return ts.astimezone(UTC)
    except (OverflowError, ValueError):  # e.g. 0001-01-01T00:00:00+01:00
        return None


def _latency_s(v: Any) -> float | None:
    """``latencyMs`` in seconds (``inf`` for a number beyond any float, e.g. ``1e400`` or a 400-digit integer),
    or ``None`` when missing; :func:`~ragpulse.ingest.timestamps.settle_times` decides whether it is kept."""
    if v is None:
        return None
    try:
        return float(v) / 1000.0
    except OverflowError:  # an integer beyond any float
        return math.inf if v > 0 else -math.inf
    except (ValueError, TypeError):
        return None


def _documents(event: dict[str, Any]) -> tuple[Document, ...]:
    docs = event.get("documents")
    if docs:
        out = []
        for i, d in enumerate(docs):
            did = d.get("id")
            content = d.get("content")
            if content is None:
                content = d.get("text")
            out.append(
                Document(
                    id=None if did is None else str(did),
                    content=content or "",
                    score=d.get("score"),
                    rank=i,
                    metadata=d.get("metadata") or {},
                )
            )
        return tuple(out)
    ids = _pick(event, "retrievedDocIds") or []
    contexts = event.get("contexts") or []
    n = max(len(ids), len(contexts))
    return tuple(
        Document(
            id=None if i >= len(ids) or ids[i] is None else str(ids[i]),
            content=(contexts[i] or "") if i < len(contexts) else "",
            rank=i,
        )
        for i in range(n)
    )


def _usage(v: Any) -> tuple[dict[str, Any], ...]:
    """The event's ``usage`` (``[{model, promptTokens, completionTokens, calls}]``, snake_case accepted)."""
    out = []
    for u in v or ():
        out.append(
            {
                "model": u.get("model"),
                "prompt_tokens": _pick(u, "promptTokens") or 0,
                "completion_tokens": _pick(u, "completionTokens") or 0,
                "calls": u.get("calls", 1),
            }
        )
    return tuple(out)


def _turns(v: Any) -> tuple[dict[str, Any], ...]:
    """The event's ``turns`` (``[{question, answer}]``, oldest first); a turn without a question is dropped."""
    return tuple(
        {"question": t["question"], "answer": t.get("answer")}
        for t in v or ()
        if (t.get("question") or "").strip()
    )


def _error(v: Any) -> str | None:
    """The event's ``error`` as one line: the string, ``"error"`` for ``true``, an object's ``type: message``
    (or its JSON); ``None`` for missing/null/false/blank."""
    if v is None or v is False:
        return None
    if v is True:
        return "error"
    if isinstance(v, dict):
        parts = [str(v[k]) for k in ("type", "message") if v.get(k) not in (None, "")]
        text = ": ".join(parts) if parts else json.dumps(v, ensure_ascii=False)[:200]
    else:
        text = str(v)
    return " ".join(text.split()) or None


def trace_from_event(
    event: dict[str, Any], received_at: datetime | None = None, *, log_text: bool = False
) -> Trace:
    """Map a schema-valid event (a dict) to a :class:`Trace` with ``source=kafka``.

    ``timestamp`` is the end of the RAG request (``end_time``); ``start_time`` is ``end_time - latency``
    when both are known; ``latencyMs`` becomes ``latency_s`` (seconds). The times and the latency follow the
    rule every source follows (:func:`ragpulse.ingest.timestamps.settle_times`): an implausible or
    unrepresentable timestamp is replaced by ``received_at`` (default: now; flag ``time_replaced``,
    ``attributes.clock_skew_s``), an implausible latency (negative, above one day, beyond any float) is unknown
    (``attributes.latency_refused``).

    Raises:
        EventRejected: the timestamp is not a date-time (the one rule JSON Schema cannot check here).
    """
    for camel in ("traceId", "testCaseId"):
        value = _pick(event, camel)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        problem = id_problem(value.strip()) if isinstance(value, str) else None
        if problem is not None:  # the id ends up in portal links: never a path of its own
            raise EventRejected(f"bad_id: /{camel}: {problem}")
    received = received_at or datetime.now(UTC)
    raw_ts = event.get("timestamp")
    end = _timestamp(raw_ts, log_text)
    times = settle_times(
        None,
        end,
        received,
        _latency_s(_pick(event, "latencyMs")),
        end_replaced=raw_ts is not None and end is None,
    )
    return Trace(
        trace_id=_pick(event, "traceId"),
        span_id=_pick(event, "spanId"),
        app=event.get("app"),
        scenario=event.get("scenario"),
        question=event.get("question"),
        documents=_documents(event),
        context=event.get("context"),
        answer=event.get("answer"),
        model=event.get("model"),
        latency_s=times.latency_s,
        start_time=times.start,
        end_time=times.end,
        time_replaced=times.time_replaced,
        error=_error(event.get("error")),
        not_evaluable=_pick(event, "notEvaluable"),
        attributes={**(event.get("attributes") or {}), **times.notes},  # ragpulse's notes win
        source=Source.KAFKA,
        run_id=_pick(event, "runId"),
        test_case_id=_pick(event, "testCaseId"),
        expected_answer=_pick(event, "expectedAnswer"),
        keywords=event.get("keywords"),
        session_id=_pick(event, "sessionId"),
        turns=_turns(event.get("turns")),
        prompt_tokens=_pick(event, "promptTokens"),
        completion_tokens=_pick(event, "completionTokens"),
        total_prompt_tokens=_pick(event, "totalPromptTokens"),
        total_completion_tokens=_pick(event, "totalCompletionTokens"),
        usage=_usage(event.get("usage")),
    )


def parse_event(
    value: bytes | None,
    *,
    max_bytes: int = 4 * 1024 * 1024,
    received_at: datetime | None = None,
    log_text: bool = False,
) -> Trace:
    """Decode one Kafka message value (UTF-8 JSON) into a :class:`Trace`.

    Args:
        value: the raw message value (``None`` for a tombstone).
        max_bytes: largest accepted message, bytes (``Settings.kafka_max_message_bytes``).
        received_at: when the message was received (UTC; default now): replaces an implausible timestamp.
        log_text: quote the offending value in the rejection reason (``Settings.log_text``); when off (the
            default) the reason names the field, the rule and the value's JSON type only, since reasons reach
            logs and dead-letter headers and the value may be question or answer text.

    Raises:
        EventRejected: with ``reason`` ``too_large: …``, ``not_json: …`` or ``schema: <path>: <message>``.
    """
    event = _decode(value, max_bytes)
    if not _valid(event):
        err = best_match(_validator().iter_errors(event))
        if err is not None:
            raise EventRejected(_schema_reason(err, log_text))
    try:
        return trace_from_event(event, received_at, log_text=log_text)
    except PydanticValidationError as e:
        first = e.errors()[0]
        loc = _pointer(first["loc"])
        raise EventRejected(f"schema: {loc}: {_short(first['msg'])}") from e


def trace_to_event(trace: Trace) -> dict[str, Any]:
    """The Kafka event (camelCase dict, JSON-able) that :func:`parse_event` maps back to ``trace``.

    Used by ``ragpulse replay --via kafka``. ``source`` is not carried (the consumer sets ``kafka``);
    ``start_time`` is carried only through ``timestamp`` (end) and ``latencyMs``.
    """
    ev: dict[str, Any] = {"traceId": trace.trace_id}
    if trace.documents:
        ev["documents"] = [
            {k: v for k, v in (("id", d.id), ("content", d.content), ("score", d.score)) if v is not None}
            | ({"metadata": d.metadata} if d.metadata else {})
            for d in trace.documents
        ]
    scalars = {
        "spanId": trace.span_id,
        "question": trace.question,
        "answer": trace.answer,
        "context": trace.context,
        "model": trace.model,
        "app": trace.app,
        "scenario": trace.scenario,
        "timestamp": trace.end_time.isoformat() if trace.end_time else None,
        "latencyMs": trace.latency_s * 1000.0 if trace.latency_s is not None else None,
        "expectedAnswer": trace.expected_answer,
        "keywords": list(trace.keywords) if trace.keywords else None,
        "runId": trace.run_id,
        "testCaseId": trace.test_case_id,
        "attributes": trace.wire_attributes() or None,
        "error": trace.error,
        "notEvaluable": trace.not_evaluable,
        "sessionId": trace.session_id,
        "turns": [{"question": t.question, "answer": t.answer} for t in trace.turns] or None,
        "promptTokens": trace.prompt_tokens,
        "completionTokens": trace.completion_tokens,
        "totalPromptTokens": trace.total_prompt_tokens,
        "totalCompletionTokens": trace.total_completion_tokens,
        "usage": [
            {
                "model": u.model,
                "promptTokens": u.prompt_tokens,
                "completionTokens": u.completion_tokens,
                "calls": u.calls,
            }
            for u in trace.usage
        ]
        or None,
    }
    ev.update({k: v for k, v in scalars.items() if v is not None})
    return ev
