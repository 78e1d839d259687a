"""Convention mappers and the builder that turns the spans of one trace into a :class:`~ragpulse.model.Trace`.

Mappers (:class:`~ragpulse.ingest.otlp.conventions.base.ConventionMapper`) are tried in order — the
``otlp_attributes`` mapper (when configured), OpenInference, OpenLLMetry/Traceloop, Langfuse, OTel GenAI — and every
mapper that matches contributes: for each field the first mapper that found a value wins. Pass your own list
to :class:`TraceBuilder` to add a convention.

The builder adds what does not depend on the convention: ``span_id`` (the root span), latency and
start/end times (the root span's; without a root, no latency), ``app`` (mapped, else the root's
``service.name``), and the replay identity from ``ragpulse.run.id``, ``ragpulse.test_case.id``,
``ragpulse.expected_answer`` and ``ragpulse.keywords`` (a string array, a JSON array or a comma-separated
string). A root span with status ERROR sets ``Trace.error`` (the status message, else the root's
``exception`` event type and message, one line); the engine then records the trace ``not_evaluable`` with
reason ``trace_error``.
Start and end times and the latency (the root span's end minus start) pass the rule of
:func:`ragpulse.ingest.timestamps.settle_times`, as Kafka events do: an implausible time is replaced by the
receive time (flag ``time_replaced``, ``attributes.clock_skew_s``), and the root's duration is kept when it is
plausible (0 to one day) even then — a sender whose clock is wrong keeps its latency; an implausible duration
is unknown (``attributes.latency_refused``).

The answer group — ``answer``, ``answer_span_id``, ``answer_candidates`` and ``not_evaluable``
(``ambiguous_answer``) — comes whole from the first mapper that found an answer or declared it ambiguous
(:func:`~ragpulse.ingest.otlp.conventions.base.resolve_answer`).

``Trace.context`` is the context the model was given (the system message / instructions), except when a
retrieval ran and returned nothing: then it stays ``None`` so judges see "no retrieved context" rather than
the bare prompt (a configured ``otlp_attributes.context`` is always used). ``ragpulse.trace.id``, set by :mod:`ragpulse.ingest.otlp.encode` for replay traces whose id is not
32-hex, restores the original trace id, and ``ragpulse.attributes`` (a JSON object) is merged into the
trace's attributes (a test case's reference contexts and labels travel there).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ragpulse.config import OtlpSettings
from ragpulse.ingest.otlp.conventions.base import (
    ConventionMapper,
    MappedFields,
    as_text,
    maybe_json,
    refused_token_counts,
    spans_in_start_order,
    top_span,
)
from ragpulse.ingest.otlp.conventions.custom import AttributeMapper
from ragpulse.ingest.otlp.conventions.genai import GenAiMapper
from ragpulse.ingest.otlp.conventions.langfuse import LangfuseMapper
from ragpulse.ingest.otlp.conventions.openinference import OpenInferenceMapper
from ragpulse.ingest.otlp.conventions.openllmetry import OpenLlmetryMapper
from ragpulse.ingest.otlp.logs import fold_carriers
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.ingest.timestamps import is_plausible, plausible_latency, settle_times
from ragpulse.model import TOKEN_COUNT_MAX, Source, Trace, id_problem

__all__ = [
    "SPAN_OUTLINE_MAX",
    "AttributeMapper",
    "ConventionMapper",
    "GenAiMapper",
    "LangfuseMapper",
    "MappedFields",
    "OpenInferenceMapper",
    "OpenLlmetryMapper",
    "TraceBuilder",
    "default_mappers",
    "jsonable",
    "span_outline",
]

_SCALARS = (
    "question",
    "context",
    "model_context",
    "model",
    "app",
    "scenario",
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "total_prompt_tokens",
    "total_completion_tokens",
    "usage",
)
_ANSWER_GROUP = ("answer", "answer_span_id", "answer_candidates", "not_evaluable", "reasoning")


def default_mappers(settings: OtlpSettings) -> list[ConventionMapper]:
    """The built-in mappers, preceded by the ``otlp_attributes`` mapper when that setting is non-empty.

    Raises:
        ConfigError: ``settings.attributes`` is invalid.
    """
    mappers: list[ConventionMapper] = []
    custom = AttributeMapper(settings.attributes)
    if custom.configured:
        mappers.append(custom)
    mappers += [OpenInferenceMapper(), OpenLlmetryMapper(), LangfuseMapper(), GenAiMapper()]
    return mappers


def jsonable(value: Any) -> Any:
    """``value`` made JSON-serialisable for the store: bytes → base64 text, non-finite floats → ``None``,
    tuples → lists, mapping keys → strings, anything else unknown → ``str``."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return str(value)


def _ns_to_dt(ns: int) -> datetime | None:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC) if ns > 0 else None


def _plausible_ns(ns: int, received_at: datetime) -> bool:
    """True when span time ``ns`` is set and passes :func:`ragpulse.ingest.timestamps.is_plausible`."""
    try:
        t = _ns_to_dt(ns)
    except (OverflowError, OSError, ValueError):
        return False
    return t is not None and is_plausible(t, received_at)


def _root_error(root: SpanData) -> str:
    """One line describing the root span's error: its status message, else its ``exception`` event's type
    and message, else ``"status ERROR"``."""
    text = root.status_message.strip()
    if not text:
        for e in root.events:
            if e.name == "exception":
                etype = as_text(e.attributes.get("exception.type"))
                emsg = as_text(e.attributes.get("exception.message"))
                text = ": ".join(t for t in (etype, emsg) if t)
                if text:
                    break
    line = " ".join(text.split())
    return line[:300] if line else "status ERROR"


def _replay_id(spans: list[SpanData], key: str, attrs: dict[str, Any]) -> str | None:
    """The replay id under attribute ``key`` when :func:`ragpulse.model.id_problem` finds nothing wrong with it.

    Ids are data, never path segments: a refused one (``../x``, a control or bidirectional character, longer
    than :data:`ragpulse.model.ID_MAX_CHARS`) is not used — the trace keeps its OTLP trace id, or links to no
    test case — and ``attrs["id_refused"]`` records ``{key: reason}`` so the trace says why."""
    value = as_text(_replay_value(spans, key))
    if value is None:
        return None
    problem = id_problem(value)
    if problem is None:
        return value
    attrs.setdefault("id_refused", {})[key] = f"{value[:100]!r} {problem}"
    return None


def _replay_value(spans: list[SpanData], key: str) -> Any:
    for s in spans:
        if key in s.attributes and s.attributes[key] not in (None, ""):
            return s.attributes[key]
    return None


_TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "total_prompt_tokens", "total_completion_tokens")


def _plausible_tokens(
    spans: Sequence[SpanData], fields: MappedFields, notes: dict[str, Any]
) -> dict[str, Any]:
    """The trace's token counts from ``fields``; a count above :data:`ragpulse.model.TOKEN_COUNT_MAX` is not
    plausible (and no store column holds it): unknown (``None``). ``notes["token_count_refused"]`` records
    ``{attribute key or trace field: why}`` — the spans' refused attributes (whose calls' usage the mappers
    already took as unknown) and a sum over the calls that is too large."""
    refused: dict[str, str] = {}
    for s in spans:
        for key, why in refused_token_counts(s).items():
            refused.setdefault(key, why)
    out: dict[str, Any] = {}
    for key in _TOKEN_FIELDS:
        v = fields.get(key)
        if isinstance(v, int) and v > TOKEN_COUNT_MAX:
            refused[key] = f"{v} (the sum over the trace's calls) is above {TOKEN_COUNT_MAX}: unknown"
            v = None
        out[key] = v
    if refused:
        notes["token_count_refused"] = refused
    return out


#: Most spans kept in a trace's span outline (``attributes.spans``); the first ones by start time.
SPAN_OUTLINE_MAX = 500

_KIND_NAMES = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def span_outline(spans: Sequence[SpanData], received_at: datetime | None = None) -> list[dict[str, Any]]:
    """The span tree of a trace for the portal's timeline: per span (by start time, at most
    :data:`SPAN_OUTLINE_MAX`) ``{"span_id", "parent_span_id", "name", "kind", "start_ms", "duration_ms",
    "error"}`` — ``start_ms`` from the earliest span's start, milliseconds; ``kind`` the span's role
    (``openinference.span.kind`` such as ``RETRIEVER``/``LLM``, ``gen_ai.operation.name`` such as ``chat``,
    ``traceloop.span.kind``, else the OTLP span kind); ``error`` when its status is ERROR. No texts.

    A start time that fails the plausibility rule (:func:`ragpulse.ingest.timestamps.is_plausible` against
    ``received_at``, default now) is unknown: no ``start_ms`` (and it is not the earliest start). A duration
    (end minus start) follows the latency rule (:func:`ragpulse.ingest.timestamps.plausible_latency`: 0 to one
    day, whatever the sender's clock), else no ``duration_ms`` — never a figure of centuries."""
    received = received_at or datetime.now(UTC)
    timed = [s for s in spans if _plausible_ns(s.start_unix_nano, received)]
    t0 = min((s.start_unix_nano for s in timed), default=0)
    out: list[dict[str, Any]] = []
    for s in spans_in_start_order(spans)[:SPAN_OUTLINE_MAX]:
        role = next(
            (
                as_text(s.attributes.get(k))
                for k in ("openinference.span.kind", "gen_ai.operation.name", "traceloop.span.kind")
                if as_text(s.attributes.get(k))
            ),
            None,
        )
        start = s.start_unix_nano if _plausible_ns(s.start_unix_nano, received) else 0
        duration_s = None
        if s.start_unix_nano > 0 and s.end_unix_nano > 0:  # a duration needs no correct clock
            duration_s = plausible_latency((s.end_unix_nano - s.start_unix_nano) / 1e9)[0]
        out.append(
            {
                "span_id": s.span_id,
                "parent_span_id": s.parent_span_id,
                "name": s.name[:200],
                "kind": (role or _KIND_NAMES.get(s.kind, ""))[:40],
                "start_ms": round((start - t0) / 1e6, 3) if start > 0 else None,
                "duration_ms": round(duration_s * 1e3, 3) if duration_s is not None else None,
                "error": s.status_code == 2,
            }
        )
    return out


class TraceBuilder:
    """Builds a :class:`~ragpulse.model.Trace` (``source=otlp``) from the spans of one trace.

    Args:
        settings: for the default mappers (``otlp_attributes``).
        mappers: replaces the default mapper list.
    """

    def __init__(self, settings: OtlpSettings, mappers: Sequence[ConventionMapper] | None = None) -> None:
        self.mappers: list[ConventionMapper] = (
            list(mappers) if mappers is not None else default_mappers(settings)
        )

    def merge(self, spans: Sequence[SpanData]) -> MappedFields:
        """The merged fields of every matching mapper (first mapper wins per field)."""
        spans = fold_carriers(spans)
        merged: MappedFields = {}
        attrs: dict[str, Any] = {}
        conventions: list[str] = []
        answered = False
        for m in self.mappers:
            if not m.match(spans):
                continue
            fields = m.map(spans)
            conventions.append(m.name)
            if not answered and (fields.get("answer") is not None or fields.get("not_evaluable")):
                answered = True
                for key in _ANSWER_GROUP:
                    if fields.get(key) is not None:
                        merged[key] = fields[key]
            for key in _SCALARS:
                if merged.get(key) is None and fields.get(key) is not None:
                    merged[key] = fields[key]
            if not merged.get("documents") and fields.get("documents"):
                merged["documents"] = fields["documents"]
            merged["retrieval_seen"] = bool(merged.get("retrieval_seen") or fields.get("retrieval_seen"))
            for k, v in (fields.get("attributes") or {}).items():
                if k != "convention":
                    attrs.setdefault(k, v)
        if conventions:
            attrs["conventions"] = conventions
        if merged.get("reasoning"):  # kept on the trace (attributes.reasoning), never judged as the answer
            attrs["reasoning"] = merged["reasoning"]
        merged["attributes"] = attrs
        return merged

    def build(self, trace_id: str, spans: Sequence[SpanData], *, incomplete: bool = False) -> Trace:
        """Map ``spans`` (all of one trace, any order) to a trace.

        Args:
            trace_id: 32 hex characters.
            spans: the trace's spans; may be empty only for a trace whose spans were all invalid.
            incomplete: set after an idle timeout without a finished root span.
        """
        spans = fold_carriers(spans)  # log records (gen_ai events) onto their spans
        fields = self.merge(spans)
        context = fields.get("context")
        if context is None and (fields.get("documents") or not fields.get("retrieval_seen")):
            context = fields.get("model_context")
        root = top_span(spans)
        ordered = ([root] if root else []) + [s for s in spans_in_start_order(spans) if s is not root]
        first = ordered[0] if ordered else None
        attrs: dict[str, Any] = fields["attributes"]
        if first is not None and first.service_name:
            attrs.setdefault("service.name", first.service_name)
        received = datetime.now(UTC)
        if spans:
            attrs["spans"] = span_outline(spans, received)
        error = _root_error(root) if root is not None and root.status_code == 2 else None
        app = fields.get("app") or (first.service_name if first else None)
        latency: float | None = None
        if root is not None:
            start, end = root.start_unix_nano, root.end_unix_nano
            # the root's duration needs no correct clock: settle_times keeps it when plausible (0 to one day),
            # whatever the absolute times (a sender whose clock is years off); start 1 ns, end 2**64-1 is not
            if start > 0 and end > 0:
                latency = (end - start) / 1e9
        else:
            start = min((s.start_unix_nano for s in spans if s.start_unix_nano > 0), default=0)
            end = max((s.end_unix_nano for s in spans), default=0)
        keywords = maybe_json(_replay_value(ordered, "ragpulse.keywords"))
        if keywords is not None and not isinstance(keywords, list | str):
            keywords = None
        notes: dict[
            str, Any
        ] = {}  # ragpulse's own notes: set last, a sender's attributes cannot overwrite them
        original_id = _replay_id(ordered, "ragpulse.trace.id", notes)
        test_case_id = _replay_id(ordered, "ragpulse.test_case.id", notes)
        tokens = _plausible_tokens(spans, fields, notes)
        times = settle_times(_ns_to_dt(start), _ns_to_dt(end), received, latency)
        notes.update(times.notes)
        carried = maybe_json(_replay_value(ordered, "ragpulse.attributes"))
        if isinstance(carried, Mapping):
            attrs.update(carried)
        attrs.update(notes)
        return Trace(
            trace_id=original_id or trace_id,
            span_id=root.span_id if root else (first.span_id if first else None),
            app=app,
            scenario=fields.get("scenario"),
            question=fields.get("question"),
            documents=tuple(
                d.model_copy(update={"metadata": jsonable(d.metadata)}) if d.metadata else d
                for d in fields.get("documents") or ()
            ),
            context=context,
            answer=fields.get("answer"),
            model=fields.get("model"),
            latency_s=times.latency_s,
            start_time=times.start,
            end_time=times.end,
            time_replaced=times.time_replaced,
            not_evaluable=fields.get("not_evaluable"),
            error=error,
            answer_span_id=fields.get("answer_span_id"),
            answer_candidates=tuple(fields.get("answer_candidates") or ()),
            attributes=jsonable(attrs),
            source=Source.OTLP,
            incomplete=incomplete,
            run_id=as_text(_replay_value(ordered, "ragpulse.run.id")),
            test_case_id=test_case_id,
            expected_answer=as_text(_replay_value(ordered, "ragpulse.expected_answer")),
            keywords=keywords,
            turns=tuple(fields.get("turns") or ()),
            **tokens,
            usage=tuple(fields.get("usage") or ()),
        )
