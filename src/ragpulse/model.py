"""Shared types: the RAG trace that goes in and the judgement that comes out.

Every layer (``ingest``, ``engine``, ``judges``, ``store``, ``export``, ``replay``) speaks these types and
nothing else, so they are the contract of the project. They are pydantic models: validated at the edges,
immutable once built (``frozen``), and serialisable to JSON for storage and events.

Shapes and units
----------------
- Scores are floats in the closed interval [0, 1]; never NaN, never outside it (validated).
- Latencies are seconds (float). Times are timezone-aware UTC ``datetime`` values.
- Token counts are integers as reported by the judge model's API ``usage`` block.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
import weakref
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ABSTAINED",
    "ID_MAX_CHARS",
    "NO_ANSWER",
    "PROMPT_MAX_CHARS",
    "RAW_OUTPUT_MAX_CHARS",
    "REASON_MAX_CHARS",
    "RUN_HEARTBEAT_S",
    "RUN_STALE_AFTER_S",
    "TOKEN_COUNT_MAX",
    "WIRE_ATTRIBUTE_FIELDS",
    "Backend",
    "Document",
    "Judgement",
    "JudgementFlags",
    "JudgementStatus",
    "ModelPrice",
    "ModelUsage",
    "RunRecord",
    "RunStatus",
    "Source",
    "TestCase",
    "TestSet",
    "Trace",
    "TraceOutcome",
    "TraceResult",
    "Turn",
    "cases_hash",
    "check_id",
    "id_problem",
    "judged_content_hash",
    "normalize_trace_id",
    "usage_cost",
]

#: Longest ``Judgement.reason`` kept (characters); longer reasons are cut with an ellipsis.
REASON_MAX_CHARS = 512
#: Longest ``Judgement.raw_output`` kept (characters).
RAW_OUTPUT_MAX_CHARS = 4096
#: Longest ``Judgement.prompt`` kept (characters); a longer prompt keeps its start and end around a note.
PROMPT_MAX_CHARS = 32768

_HEX_RE = re.compile(r"^[0-9a-fA-F]+$")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""The bidirectional embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069): invisible, they
reorder the text around them, so ``abc\u202edcba`` shows as ``abcabcd`` ("Trojan Source", CVE-2021-42574). The
marks U+200E/U+200F/U+061C are not here: they belong to right-to-left text and reorder nothing by themselves.
``textclean.mark_bidi`` shows them by name; :func:`id_problem` refuses them in ids."""


#: Longest id (characters) :func:`id_problem` accepts: the one length rule for trace, case and session ids from
#: every source (the Kafka schema's ``traceId`` ``maxLength`` says the same).
ID_MAX_CHARS = 256

#: Largest token count a trace keeps (the store's ``integer`` columns): a larger count is not plausible
#: (no model reads or writes two billion tokens in a call); Kafka and ``POST /api/v1/evaluate`` refuse it
#: (the event schema's ``maximum``), OTLP takes it as unknown with a note (``attributes.token_count_refused``).
TOKEN_COUNT_MAX = 2**31 - 1


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an id that ends up in a URL (a case id, a trace id, a session id), or ``None``
    when it can.

    Ids are data: any text is allowed, ``/`` included (``hr/leave-1``), except what a browser or HTTP client
    would turn into another path: a control character (Unicode category ``Cc``: C0, DEL, C1 — a tab or a
    newline too) or a path segment that is exactly ``.`` or ``..`` (``../B``, ``a/./b``, ``..``). ``..x`` and
    ``x..`` are fine. A bidirectional control (:data:`BIDI_CONTROLS`) is refused too: it makes one id look like
    another. Links always encode ids with no safe characters (``quote(id, safe="")``). An id longer than
    :data:`ID_MAX_CHARS` characters is refused (one length rule for every source).
    """
    if not value:
        return "is empty"
    if len(value) > ID_MAX_CHARS:
        return f"is longer than {ID_MAX_CHARS} characters ({len(value)})"
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        return "contains a control character"
    if any(ch in BIDI_CONTROLS for ch in value):
        return "contains a bidirectional control character (U+202A–U+202E, U+2066–U+2069)"
    if any(seg in (".", "..") for seg in value.split("/")):
        return "has a '.' or '..' path segment"
    return None


def check_id(value: str, what: str = "id") -> str:
    """``value`` when :func:`id_problem` finds nothing wrong with it.

    Raises:
        ValueError: ``"<what> '<value>' <problem>"`` (the value cut to 100 characters, shown with ``repr``).
    """
    problem = id_problem(value)
    if problem is not None:
        raise ValueError(f"{what} {value[:100]!r} {problem}")
    return value


def normalize_trace_id(value: str) -> str:
    """Return the canonical form of a trace id.

    OTLP trace ids are 32 hex characters; Kafka producers may send UUIDs or any other string. The id is kept
    as given (surrounding whitespace removed), lower-cased when it is hex or a UUID, so ``ABCD…`` from one
    source and ``abcd…`` from another meet in the store.

    Raises:
        ValueError: the id is empty.
    """
    v = value.strip()
    if not v:
        raise ValueError("trace id is empty")
    if _HEX_RE.match(v) or _UUID_RE.match(v):
        return v.lower()
    return v


class Source(StrEnum):
    """Where a trace came from."""

    KAFKA = "kafka"
    OTLP = "otlp"
    REPLAY = "replay"
    #: ``POST /api/v1/evaluate`` (drafts judged on request; left out of live-traffic statistics by default)
    API = "api"


class Backend(StrEnum):
    """How a judge decided: by asking a judge model (``llm``) or by deterministic rules (``heuristic``)."""

    LLM = "llm"
    HEURISTIC = "heuristic"


class JudgementStatus(StrEnum):
    """One status model for every judge.

    ====================  ===========  ===========================  =====================================
    status                score        passed                       when
    ====================  ===========  ===========================  =====================================
    ``ok``                in [0, 1]    score >= judge's threshold   the judge decided
    ``skipped``           ``None``     ``None``                     no_reference, no_answer, abstained, …
    ``error``             ``None``     ``None``                     judge_unavailable, unparseable, …
    ====================  ===========  ===========================  =====================================
    """

    OK = "ok"
    SKIPPED = "skipped"
    ERROR = "error"


#: Reason code of a ``skipped`` judgement whose answer abstained ("I don't know"), and its outcome label.
ABSTAINED = "abstained"
#: Reason code of a ``skipped`` judgement of a trace without an answer.
NO_ANSWER = "no_answer"


class TraceOutcome(StrEnum):
    """What happened to a trace as a whole (separate from the statuses of its judgements)."""

    EVALUATED = "evaluated"
    NOT_SAMPLED = "not_sampled"
    NOT_EVALUABLE = "not_evaluable"
    INCOMPLETE = "incomplete"


class Document(BaseModel):
    """One retrieved document (chunk), in the rank order the retriever returned.

    Attributes:
        id: document/chunk id as the retriever reports it, or ``None`` when the instrumentation has none.
        content: the text given to the model ("" when only the id is known).
        score: the retriever's similarity score (unit depends on the retriever), if reported.
        rank: 0-based position in the retrieval result.
        metadata: free-form retriever metadata.
    """

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    content: str = ""
    score: float | None = None
    rank: int = 0
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("content", mode="before")
    @classmethod
    def _none_content(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("score")
    @classmethod
    def _finite_score(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            return None
        return v


#: Attribute keys older producers (and ``replay --via`` senders) use for what are now typed trace fields.
WIRE_ATTRIBUTE_FIELDS: dict[str, str] = {
    "ragpulse.not_evaluable": "not_evaluable",
    "reference_contexts": "reference_contexts",
    "context_labels": "context_labels",
    "labelled_contexts": "labelled_contexts",
    "labelled_doc_ids": "labelled_doc_ids",
    "session_id": "session_id",
}

#: Longest session id kept (characters); a longer one is cut.
SESSION_ID_MAX_CHARS = 256
_SESSION_SURROGATE = re.compile("[\ud800-\udfff]")


def _session_id(v: Any) -> Any:
    """The session id the store keeps and the session look-up uses: a number as text, no control characters
    (a NUL cannot be stored at all), lone surrogates as U+FFFD, stripped, cut to :data:`SESSION_ID_MAX_CHARS`
    — so a trace's session id equals its stored one; ``None`` when nothing is left (or for a boolean)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        v = str(v)
    if isinstance(v, str):
        v = _SESSION_SURROGATE.sub("\ufffd", "".join(ch for ch in v if unicodedata.category(ch) != "Cc"))
        return v.strip()[:SESSION_ID_MAX_CHARS] or None
    return v


class Turn(BaseModel):
    """An earlier turn of the conversation a trace belongs to: the user's question and the app's answer.

    Attributes:
        question: what the user asked in that turn.
        answer: what the app answered (``None`` when the source did not report it).
    """

    model_config = ConfigDict(frozen=True)

    question: str
    answer: str | None = None


class ModelUsage(BaseModel):
    """The app's own token usage for one model, summed over a trace's LLM calls to it.

    Attributes:
        model: the model name as the instrumentation reports it (``None`` when unknown).
        prompt_tokens / completion_tokens: token counts (input / output) as the model API reported them.
        calls: how many LLM calls of the trace used this model.
    """

    model_config = ConfigDict(frozen=True)

    model: str | None = None
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    calls: int = Field(default=1, ge=0)


class ModelPrice(BaseModel):
    """Price of one model in the price table (``export.model_prices``), per 1,000,000 tokens, in the table's
    currency (one currency for the whole table; the docs use USD).

    Attributes:
        prompt: price of 1 M prompt (input) tokens.
        completion: price of 1 M completion (output) tokens.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: float = Field(ge=0)
    completion: float = Field(ge=0)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The cost of these tokens at this price."""
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1_000_000


class Trace(BaseModel):
    """One RAG request as seen by ragpulse.

    A trace may be incomplete: any field but ``trace_id`` may be missing. The engine decides what a missing
    question or answer means (``TraceOutcome.NOT_EVALUABLE``); nothing here raises for a missing field.

    Attributes:
        trace_id: see :func:`normalize_trace_id`.
        span_id: the span the evaluation refers to (16 hex chars for OTLP; the root span), if known.
        app: the RAG application/service name (OTLP ``service.name`` or the event's ``app``).
        scenario: a finer grouping inside the app (e.g. ``policy-qa``).
        question: the user's question.
        documents: retrieved documents in rank order.
        context: the context string given to the model, when the source reports it separately.
        answer: the model's answer.
        model: the generating model's name.
        latency_s: end-to-end latency of the RAG request, seconds.
        start_time / end_time: UTC times of the RAG request.
        attributes: extra attributes (string keys, JSON-able values).
        source: where the trace came from.
        incomplete: assembled after an idle timeout rather than a finished root span.
        time_replaced: the source's time was implausible (before 2000 or more than a day ahead) and was
            replaced by the receive time (``ragpulse.ingest.timestamps``); kept out of the evaluation-lag
            histogram.
        run_id / test_case_id: replay identity (``source == replay`` or replay sent via Kafka/OTLP).
        expected_answer / keywords: reference data, from a test case or the event.
        not_evaluable: why no judge may score this trace, set by its producer (e.g. ``rag_endpoint_failed: …``,
            ``ambiguous_answer``, ``trace_error``); ``None`` = judge it if it has a question and an answer.
        reference_contexts: ground-truth contexts (context recall/precision without labels).
        context_labels: relevance label per retrieved document (or per ``labelled_contexts``/``labelled_doc_ids``
            entry when those are given: the chunks the labels belong to, matched against the retrieved ones).
        answer_span_id: the span that supplied the answer and context (OTLP), when chosen among several.
        answer_candidates: span ids of the LLM calls that could have been the answer (OTLP).
        error: trace-level error reported by the source (e.g. OTLP root status ERROR), one line.
        session_id: the conversation (session) the trace is a turn of: OTLP ``session.id``, Traceloop's
            ``session_id`` association property, ``gen_ai.conversation.id``, Langfuse's session; Kafka
            ``sessionId``. Cut to :data:`SESSION_ID_MAX_CHARS`; one that :func:`id_problem` refuses (``..``) is
            dropped (``None``), ``attributes.id_refused.session_id`` says why.
        turns: the conversation's earlier turns, oldest first (from the answering call's messages, the
            producer's ``turns``, or the session's earlier traces, filled by the engine).
        prompt_tokens / completion_tokens: the app's answering LLM call's token usage (``model`` is its model);
            ``None`` when the source did not report it.
        total_prompt_tokens / total_completion_tokens: the same summed over every LLM call of the trace
            (``None`` when no call reported usage).
        usage: the trace's token usage per model (:class:`ModelUsage`), what the price table prices
            (:meth:`app_cost`).

    Older producers put ``not_evaluable`` (as ``ragpulse.not_evaluable``), ``reference_contexts``,
    ``context_labels``, ``labelled_contexts`` and ``labelled_doc_ids`` in ``attributes``; those keys are moved
    into the typed fields on construction (:data:`WIRE_ATTRIBUTE_FIELDS`), and :meth:`wire_attributes` puts
    them back for senders that must stay readable by older receivers.
    """

    model_config = ConfigDict(frozen=True)

    trace_id: str
    span_id: str | None = None
    app: str | None = None
    scenario: str | None = None
    question: str | None = None
    documents: tuple[Document, ...] = ()
    context: str | None = None
    answer: str | None = None
    model: str | None = None
    latency_s: float | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    source: Source = Source.REPLAY
    incomplete: bool = False
    time_replaced: bool = False
    run_id: str | None = None
    test_case_id: str | None = None
    expected_answer: str | None = None
    keywords: tuple[str, ...] | None = None
    not_evaluable: str | None = None
    reference_contexts: tuple[str, ...] = ()
    context_labels: tuple[bool, ...] | None = None
    labelled_contexts: tuple[str, ...] | None = None
    labelled_doc_ids: tuple[str, ...] | None = None
    answer_span_id: str | None = None
    answer_candidates: tuple[str, ...] = ()
    error: str | None = None
    session_id: str | None = None
    turns: tuple[Turn, ...] = ()
    prompt_tokens: int | None = Field(default=None, ge=0, le=TOKEN_COUNT_MAX)
    completion_tokens: int | None = Field(default=None, ge=0, le=TOKEN_COUNT_MAX)
    total_prompt_tokens: int | None = Field(default=None, ge=0, le=TOKEN_COUNT_MAX)
    total_completion_tokens: int | None = Field(default=None, ge=0, le=TOKEN_COUNT_MAX)
    usage: tuple[ModelUsage, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _lift_legacy_attributes(cls, data: Any) -> Any:
        """Move the older attribute keys (:data:`WIRE_ATTRIBUTE_FIELDS`) into the typed fields."""
        if not isinstance(data, Mapping):
            return data
        attrs = data.get("attributes")
        if not isinstance(attrs, Mapping) or not any(k in attrs for k in WIRE_ATTRIBUTE_FIELDS):
            return data
        out = dict(data)
        rest = dict(attrs)
        for key, field in WIRE_ATTRIBUTE_FIELDS.items():
            if key in rest:
                value = rest.pop(key)
                if out.get(field) in (None, ()):  # a typed value wins over the older key
                    out[field] = value
        out["attributes"] = rest
        return out

    @model_validator(mode="before")
    @classmethod
    def _fill_usage(cls, data: Any) -> Any:
        """Totals default to the answering call's tokens; ``usage`` defaults to one entry (the trace's
        ``model``) holding the totals, so a producer that sends only the answering call's tokens is priced."""
        if not isinstance(data, Mapping):
            return data
        p, c = data.get("prompt_tokens"), data.get("completion_tokens")
        tp, tc = data.get("total_prompt_tokens"), data.get("total_completion_tokens")
        if (p is None and c is None) and (tp is None and tc is None):
            return data
        out = dict(data)
        if tp is None and tc is None:
            out["total_prompt_tokens"], out["total_completion_tokens"] = p, c
        if not out.get("usage"):
            out["usage"] = (
                {
                    "model": out.get("model"),
                    "prompt_tokens": out.get("total_prompt_tokens") or 0,
                    "completion_tokens": out.get("total_completion_tokens") or 0,
                },
            )
        return out

    @model_validator(mode="before")
    @classmethod
    def _refuse_session_id(cls, data: Any) -> Any:
        """A session id :func:`id_problem` refuses (``..``, ``a/./b``, a bidirectional control) is dropped:
        it would be a link target (``/sessions/<id>``). ``attributes.id_refused.session_id`` says why."""
        if not isinstance(data, Mapping):
            return data
        attrs = data.get("attributes")
        attrs = attrs if isinstance(attrs, Mapping) else {}
        typed = data.get("session_id")
        legacy = typed in (None, ()) and "session_id" in attrs  # moved by _lift_legacy_attributes
        value = _session_id(attrs["session_id"] if legacy else typed)
        if not isinstance(value, str):
            return data
        problem = id_problem(value)
        if problem is None:
            return data
        out = dict(data)
        rest = dict(attrs)
        if legacy:
            rest.pop("session_id", None)
        refused = rest.get("id_refused")
        refused = dict(refused) if isinstance(refused, Mapping) else {}
        refused["session_id"] = f"{value[:100]!r} {problem}"
        rest["id_refused"] = refused
        out["attributes"] = rest
        out["session_id"] = None
        return out

    @field_validator("session_id", mode="before")
    @classmethod
    def _session(cls, v: Any) -> Any:
        return _session_id(v)

    @field_validator("not_evaluable", "error", mode="before")
    @classmethod
    def _reason(cls, v: Any) -> Any:
        if isinstance(v, str):
            return v.strip()[:REASON_MAX_CHARS] or None
        return v

    @field_validator("context_labels", mode="before")
    @classmethod
    def _labels(cls, v: Any) -> Any:
        if isinstance(v, list | tuple) and any(x not in (0, 1) or isinstance(x, str) for x in v):
            raise ValueError("context_labels must hold 0/1 values")
        return v

    def wire_attributes(self) -> dict[str, Any]:
        """``attributes`` plus the typed fields older receivers read from attributes (for senders)."""
        out = dict(self.attributes)
        for key, field in WIRE_ATTRIBUTE_FIELDS.items():
            value = getattr(self, field)
            if value not in (None, ()):
                out[key] = list(value) if isinstance(value, tuple) else value
        return out

    @field_validator("trace_id", mode="before")
    @classmethod
    def _norm_id(cls, v: Any) -> Any:
        if isinstance(v, str):
            return normalize_trace_id(v)
        if isinstance(v, int):
            return str(v)
        return v

    @field_validator("span_id", mode="before")
    @classmethod
    def _norm_span(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip()
            return v.lower() if v and _HEX_RE.match(v) else (v or None)
        return v

    @field_validator("documents", mode="before")
    @classmethod
    def _rank_documents(cls, v: Any) -> Any:
        if v is None:
            return ()
        out = []
        for i, d in enumerate(v):
            if isinstance(d, str):
                out.append({"content": d, "rank": i})
            elif isinstance(d, Mapping):
                dd = dict(d)
                dd.setdefault("rank", i)
                out.append(dd)
            else:
                out.append(d)
        return tuple(out)

    @field_validator("keywords", mode="before")
    @classmethod
    def _keywords(cls, v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, str):
            v = [k for k in re.split(r"[,，;；、\n]", v)]
        kws = tuple(str(k).strip() for k in v if str(k).strip())
        return kws or None

    @field_validator("start_time", "end_time")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            return v.replace(tzinfo=UTC)
        return v

    @field_validator("latency_s")
    @classmethod
    def _latency(cls, v: float | None) -> float | None:
        if v is not None and (not math.isfinite(v) or v < 0):
            return None
        return v

    @property
    def contexts(self) -> list[str]:
        """Retrieved context chunks in rank order: document contents, else ``[context]``, else ``[]``.

        Empty strings are dropped, so ``[]`` means "no retrieved context".
        """
        chunks = [d.content for d in self.documents if d.content and d.content.strip()]
        if chunks:
            return chunks
        if self.context and self.context.strip():
            return [self.context]
        return []

    @property
    def content_hash(self) -> str:
        """Hash of the content a judge sees (question, contexts, answer): :func:`judged_content_hash`.

        Remembered for the last :data:`CONTENT_HASH_MEMO` traces (by identity: a trace is frozen, a changed copy
        is another object), since the Kafka path asks for it several times per trace (prefetch, engine, store).
        The memo holds a weak reference: it never keeps a judged trace (whose texts may be megabytes) alive.
        """
        memo = _CONTENT_HASHES.get(id(self))
        if memo is not None and memo[0]() is self:
            return memo[1]
        value = judged_content_hash(self)
        if len(_CONTENT_HASHES) >= CONTENT_HASH_MEMO:
            del _CONTENT_HASHES[next(iter(_CONTENT_HASHES))]  # the oldest entry
        _CONTENT_HASHES[id(self)] = (weakref.ref(self), value)
        return value

    @property
    def is_test_traffic(self) -> bool:
        """A replay case (``source`` ``replay``, or a live transport carrying a run id: ``replay --via``) or a
        draft judged on request (``source`` ``api``): always judged, and kept out of the live views and of the
        sidecar's quality metrics."""
        return self.source in (Source.REPLAY, Source.API) or self.run_id is not None

    @property
    def traffic_source(self) -> str:
        """The source its judgements are counted under (``judgements.source``, the statistics' ``source``):
        ``replay`` for a trace of a run whatever its transport (``replay --via kafka|otlp``), else
        :attr:`source`."""
        return (
            Source.REPLAY.value
            if self.run_id is not None and self.source is not Source.API
            else self.source.value
        )

    @property
    def version_rank(self) -> int:
        """How complete this version of the trace is, for choosing between two versions of one trace id
        (the store keeps the higher; see :data:`ragpulse.store.sql.TRACE_UPSERT`): ``2`` complete (not
        ``incomplete``) with a non-empty answer, ``1`` ``incomplete`` (assembled after an idle timeout), ``0``
        otherwise — a started/partial event that has no answer yet."""
        if self.incomplete:
            return 1
        return 2 if self.answer else 0

    def replaces(self, stored: Trace) -> bool:
        """Whether this version of the trace replaces ``stored`` (same trace id): its
        :attr:`version_rank` is not lower, or it comes from a replay (re-running a run writes its cases again,
        whatever the RAG endpoint answers this time)."""
        return self.source is Source.REPLAY or self.version_rank >= stored.version_rank

    @property
    def doc_ids(self) -> list[str | None]:
        """Document ids in rank order (``None`` where the source reported none)."""
        return [d.id for d in self.documents]

    def app_cost(self, prices: Mapping[str, ModelPrice]) -> float | None:
        """The app's cost of this trace: every :attr:`usage` entry priced by ``prices`` (model name →
        :class:`ModelPrice`) and summed. ``None`` — never 0 — when no usage is known or a model of it is not in
        the table (or unknown): the tokens are shown without a cost."""
        return usage_cost(self.usage, prices)

    def last_turns(self, n: int) -> tuple[Turn, ...]:
        """The last ``n`` earlier turns (oldest first); ``()`` for ``n <= 0``."""
        return self.turns[-n:] if n > 0 else ()


class JudgementFlags(BaseModel):
    """Facts about how a judgement was made.

    Attributes:
        context_truncated: the retrieved context exceeded the judge's budget and low-ranked chunks were cut.
        decided_by: the rule/stage that decided (e.g. ``whole_context``, ``chunk:2``, ``literal``,
            ``no_context``, ``cache``).
        retries: how many times the judge model call was retried (429/5xx/timeout).
        cached: the result came from the in-process cache (no model call).
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    context_truncated: bool = False
    decided_by: str | None = None
    retries: int = 0
    cached: bool = False


class Judgement(BaseModel):
    """The verdict of one judge on one trace.

    Invariants (enforced on construction; violating them raises ``pydantic.ValidationError``):

    - ``status == ok``: ``score`` is a finite float in [0, 1] and ``passed`` is a bool.
    - ``status in (skipped, error)``: ``score`` and ``passed`` are ``None`` and ``reason`` is set.

    ``reason`` is cut to :data:`REASON_MAX_CHARS` characters and ``raw_output`` to
    :data:`RAW_OUTPUT_MAX_CHARS`.

    Attributes:
        judge: judge name (``relevancy``, ``faithfulness``, ``keyword``, …).
        version: stable hash of everything that can change a verdict (prompt, mode, threshold, backend, model).
        backend: ``llm`` or ``heuristic``.
        model: the judge model's name (``None`` for heuristic judges).
        score: 0–1 score, or ``None`` unless ``status == ok``.
        passed: ``score >= threshold``, or ``None`` unless ``status == ok``.
        threshold: the threshold the judge applied.
        status: see :class:`JudgementStatus`.
        reason: short explanation for people; for ``skipped``/``error`` it starts with a machine reason code
            (e.g. ``no_reference``, ``judge_unavailable: HTTP 429 after 3 attempts``).
        flags: see :class:`JudgementFlags`.
        raw_output: the judge model's raw reply (bounded), for audits.
        prompt: the messages sent to the judge model, as ``[role]`` headed blocks, one call after another
            joined by ``\n---\n`` (bounded by :data:`PROMPT_MAX_CHARS`, cut in the middle); ``None`` when no
            call was made or texts are redacted. Shown on the portal's trace page.
        latency_s: wall time of the judgement, seconds.
        prompt_tokens / completion_tokens: from the model API's ``usage`` (0 for heuristic judges).
        declared_version: a version declared by the judge's author (checklists), stored beside ``version``.
    """

    model_config = ConfigDict(frozen=True)

    judge: str
    version: str
    backend: Backend
    model: str | None = None
    score: float | None = None
    passed: bool | None = None
    threshold: float | None = None
    status: JudgementStatus
    reason: str = ""
    flags: JudgementFlags = Field(default_factory=JudgementFlags)
    raw_output: str | None = None
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    declared_version: str | None = None
    prompt: str | None = None

    @field_validator("reason", mode="before")
    @classmethod
    def _cut_reason(cls, v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, str) and len(v) > REASON_MAX_CHARS:
            return v[: REASON_MAX_CHARS - 1] + "…"
        return v

    @field_validator("raw_output", mode="before")
    @classmethod
    def _cut_raw(cls, v: Any) -> Any:
        if isinstance(v, str) and len(v) > RAW_OUTPUT_MAX_CHARS:
            return v[: RAW_OUTPUT_MAX_CHARS - 1] + "…"
        return v

    @field_validator("prompt", mode="before")
    @classmethod
    def _cut_prompt(cls, v: Any) -> Any:
        if isinstance(v, str) and len(v) > PROMPT_MAX_CHARS:
            half = (PROMPT_MAX_CHARS - 80) // 2  # the note below is shorter than 80 characters
            return f"{v[:half]}\n[… {len(v) - 2 * half:,} characters left out …]\n{v[len(v) - half :]}"
        return v

    @model_validator(mode="after")
    def _status_invariants(self) -> Self:
        if self.status is JudgementStatus.OK:
            if self.score is None or not math.isfinite(self.score) or not 0.0 <= self.score <= 1.0:
                raise ValueError(f"status ok needs a finite score in [0, 1], got {self.score!r}")
            if self.passed is None:
                raise ValueError("status ok needs passed")
        else:
            if self.score is not None or self.passed is not None:
                raise ValueError(f"status {self.status} must have score=None and passed=None")
            if not self.reason:
                raise ValueError(f"status {self.status} needs a reason")
        return self

    @property
    def reason_code(self) -> str:
        """The machine-readable head of ``reason`` (text before the first ``:``), e.g. ``no_reference``."""
        return self.reason.split(":", 1)[0].strip()

    @property
    def outcome(self) -> str:
        """``pass``, ``fail``, ``error``, ``abstained`` or ``skipped`` (the label used by metrics and reports):
        ``abstained`` is a ``skipped`` judgement with reason ``abstained`` (the answer declined to answer, "I don't
        know"), told apart from the other skips because it says something about the RAG system, not the judge."""
        if self.status is JudgementStatus.OK:
            return "pass" if self.passed else "fail"
        if self.status is JudgementStatus.SKIPPED and self.reason_code == ABSTAINED:
            return ABSTAINED
        return self.status.value


def usage_cost(usage: Iterable[ModelUsage], prices: Mapping[str, ModelPrice]) -> float | None:
    """The cost of ``usage`` (per-model token counts) at ``prices`` (model name → :class:`ModelPrice`): the sum
    over the entries, or ``None`` — never 0 — when there is no entry or a model is unknown or not in the table."""
    total = 0.0
    seen = False
    for u in usage:
        price = prices.get(u.model) if u.model else None
        if price is None:
            return None
        total += price.cost(u.prompt_tokens, u.completion_tokens)
        seen = True
    return total if seen else None


class TraceResult(BaseModel):
    """A trace with its trace-level outcome and the judgements made on it (what the store writes).

    Attributes:
        trace: the trace.
        outcome: see :class:`TraceOutcome`.
        outcome_reason: why the trace was not evaluated (e.g. ``no_question``), else ``None``.
        judgements: the judgements made (empty unless evaluated/incomplete).
        received_at: when ragpulse received the trace (UTC).
    """

    model_config = ConfigDict(frozen=True)

    trace: Trace
    outcome: TraceOutcome
    outcome_reason: str | None = None
    judgements: tuple[Judgement, ...] = ()
    received_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class TestCase(BaseModel):
    """One case of a test set.

    Attributes:
        id: case id, unique in its test set (generated from the line number when the file has none).
        question: the question to ask.
        expected_answer: the reference (ground-truth) answer, if any.
        keywords: keywords the answer should contain, if any.
        reference_contexts: ground-truth contexts (for context recall), if any.
        answer: a recorded answer to judge as is; ``None`` → ask the RAG endpoint.
        contexts / doc_ids: retrieved contexts (and their ids) that came with the recorded answer.
        context_labels: 0/1 relevance label per retrieved context, when labelled (e.g. RGB).
        metadata: every other field of the input row.
        origin: where the case was read from (``file:line``), for reports; not stored.
    """

    __test__ = False  # not a pytest class
    model_config = ConfigDict(frozen=True)

    id: str
    question: str | None = None
    expected_answer: str | None = None
    keywords: tuple[str, ...] | None = None
    reference_contexts: tuple[str, ...] = ()
    answer: str | None = None
    contexts: tuple[str, ...] = ()
    doc_ids: tuple[str | None, ...] = ()
    context_labels: tuple[int, ...] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    origin: str | None = Field(default=None, exclude=True)


class TestSet(BaseModel):
    """A named set of test cases held in memory (``name`` defaults to the file name when loaded from a JSONL
    file). It is a :class:`~ragpulse.protocols.CaseSource`, like the streamed file of
    :func:`ragpulse.runs.testset_files.open_test_set`."""

    __test__ = False
    model_config = ConfigDict(frozen=True)

    name: str
    knowledge_base: str | None = None
    description: str | None = None
    cases: tuple[TestCase, ...] = ()

    def content_hash(self) -> str:
        """The hash of the cases: see :func:`cases_hash`."""
        return cases_hash(self.cases)

    @property
    def case_count(self) -> int:
        """How many cases the set has."""
        return len(self.cases)

    def iter_cases(self) -> Iterator[TestCase]:
        """The cases in order."""
        return iter(self.cases)


def _hashable(v: Any) -> Any:
    # NUL-free like the store keeps every text, so a set hashes the same before and after storing
    if isinstance(v, str):
        return v.replace("\x00", "")
    if isinstance(v, Mapping):
        return {str(k).replace("\x00", ""): _hashable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_hashable(x) for x in v]
    return v


#: Traces whose :attr:`Trace.content_hash` is remembered (oldest forgotten first; each entry holds a weak
#: reference to its trace, checked on a hit, so a reused ``id`` never matches): a trace is asked for at the Kafka
#: poll's prefetch, in the engine and in the store write, with up to a poll (500), the engine queue (1,000), the
#: workers (256) and the results waiting for the writer in between; 2,048 missed half of the later asks in the
#: Kafka bench. About 200 bytes an entry.
CONTENT_HASH_MEMO = 8192
_CONTENT_HASHES: dict[int, tuple[weakref.ref[Trace], str]] = {}


def judged_content_hash(trace: Trace) -> str:
    """32 hex characters of the sha256 of what a judge sees: the question, the retrieved contexts
    (:attr:`Trace.contexts`, in order) and the answer, each length-prefixed and NUL-free as stored.

    A stored ``ok``/``skipped`` judgement is final for (trace id, judge, version, content hash): a redelivery
    with the same hash is not judged again; another hash (the same trace id answered differently) is.
    """
    h = hashlib.sha256()
    for part in (trace.question or "", *trace.contexts, "\x1e", trace.answer or ""):
        data = part.replace("\x00", "").encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:32]


def cases_hash(cases: Iterable[TestCase]) -> str:
    """``sha256:<64 hex>`` of the cases in order: one canonical JSON line per case (every field, keys sorted,
    NUL characters removed as the store removes them). Two files with the same cases (same ids, fields and
    order) hash the same whatever their format; any change to a case changes it."""
    h = hashlib.sha256()
    for c in cases:
        line = json.dumps(_hashable(c.model_dump(mode="json")), sort_keys=True, ensure_ascii=False)
        h.update(line.encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return f"sha256:{h.hexdigest()}"


class RunStatus(StrEnum):
    """Life cycle of a replay run.

    ``interrupted`` is never stored: it is how a stored ``running`` run reads when its process is gone (the
    owner process no longer exists on this host, or its heartbeat stopped; see ``ragpulse.store.rows``).
    """

    RUNNING = "running"
    COMPLETED = "completed"
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    FAILED = "failed"
    #: waiting in the run queue (started from the portal/API)
    QUEUED = "queued"
    #: cancelled while queued or running (no further judge call is made for it)
    CANCELLED = "cancelled"
    #: never stored: a stored ``running`` run whose process is gone (see the class docstring)
    INTERRUPTED = "interrupted"


#: Seconds between two heartbeats of a ``running`` run's process.
RUN_HEARTBEAT_S = 15.0
#: A ``running`` run whose heartbeat is older than this (seconds) reads as ``interrupted``.
RUN_STALE_AFTER_S = 90.0


class RunRecord(BaseModel):
    """A replay run as stored.

    Attributes:
        run_id: the run's id (given with ``--run-id`` or generated).
        test_set: name of the replayed test set.
        started_at / finished_at: UTC times.
        status: see :class:`RunStatus`.
        judges: ``{judge name: version}`` that the run used.
        settings: non-secret settings worth comparing between runs (model, modes, thresholds, top-k, …).
        report: the run report as JSON once finished (see :class:`ragpulse.runs.report_model.RunReport`).
        cases_hash: :func:`cases_hash` of the cases the run replayed (``None`` for runs from before it existed
            and runs that arrived only as events).
        owner_host / owner_pid: the host (hostname and pid namespace) and pid of the process running it.
        heartbeat_at: when that process last said it is alive (UTC), while the run is ``running``.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    test_set: str
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    status: RunStatus = RunStatus.RUNNING
    judges: dict[str, str] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    report: dict[str, Any] | None = None
    cases_hash: str | None = None
    owner_host: str | None = None
    owner_pid: int | None = None
    heartbeat_at: datetime | None = None


class CalibrationProfile(BaseModel):
    """A judge version's measured error rates against human labels (``ragpulse calibrate --save NAME``).

    Label 1 ("good") is the positive class and ``passed`` the judge's prediction, so ``sensitivity`` is the
    share of good answers the judge passes and ``specificity`` the share of bad answers it fails. The
    intervals are 95 % Wilson score intervals. Used to correct observed pass rates (Rogan–Gladen, see
    :mod:`ragpulse.calibration.correction`) for traces judged by exactly this ``judge`` and ``judge_version``.

    Attributes:
        name: the data set name given to ``--save`` (one profile per name, judge and version; re-saving
            replaces it).
        judge / judge_version: the calibrated judge and its version string.
        dataset_sha256: SHA-256 of the calibration file's bytes.
        n: scored cases (status ``ok``); tp/fp/tn/fn: confusion counts on them.
        threshold / backend: the pass threshold and backend the judge ran with.
        created_at: UTC time the profile was saved; for one judge and version the newest profile wins.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    judge: str
    judge_version: str
    dataset_sha256: str
    n: int
    tp: int
    fp: int
    tn: int
    fn: int
    sensitivity: float | None
    sensitivity_lower: float | None
    sensitivity_upper: float | None
    specificity: float | None
    specificity_lower: float | None
    specificity_upper: float | None
    threshold: float | None = None
    backend: str | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
