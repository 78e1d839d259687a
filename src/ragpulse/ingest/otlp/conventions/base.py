"""The mapper seam and helpers shared by the convention mappers.

A mapper reads the spans of one trace and returns the trace fields it found (:data:`MappedFields`); the
builder (:mod:`ragpulse.ingest.otlp.conventions`) merges the results of every matching mapper, first mapper
first. Keys of :data:`MappedFields`: ``question``, ``answer``, ``model``, ``app``, ``scenario``, ``context``
(an explicitly reported context) and ``model_context`` (the system message / instructions given to the
model) as ``str``; ``documents`` (``list[Document]``); ``retrieval_seen`` (``bool``: a retrieval step is in the
trace, even if it found nothing) and ``attributes`` (``dict``: ``session_id``, ``user_id``, ``convention`` …).
A mapper leaves out what it did not find.

The answering model call (issue 11): with several LLM calls in a trace, :func:`choose_answer_call` picks the
one whose input carries the retrieved documents (else the user question), among several the one that ended
last before the root ended; mappers then report ``answer_span_id`` (``str``), ``answer_candidates``
(``list[str]``, span ids) and, when two or more candidates cannot be told apart and the trace has no explicit
answer, ``not_evaluable`` = ``ambiguous_answer``. A recorded output that is only the repr of a generator
(streaming: ``<generator object … at 0x…>``) counts as no output (:func:`is_streaming_repr`). Without a
retriever, the outputs of tool calls are the retrieved documents (:func:`tool_documents`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import TOKEN_COUNT_MAX, Document
from ragpulse.textclean import clean_json, json_text_needs_cleaning

__all__ = [
    "AMBIGUOUS_ANSWER",
    "OUTPUT_ROLES",
    "AnswerChoice",
    "ConventionMapper",
    "LlmCall",
    "MappedFields",
    "answer_text",
    "as_float",
    "as_text",
    "call_of",
    "choose_answer_call",
    "doc_id_from_metadata",
    "indexed",
    "is_object_repr",
    "is_streaming_repr",
    "last_ended",
    "last_text",
    "make_document",
    "maybe_json",
    "message_text",
    "parse_messages",
    "ranked",
    "reasoning_text",
    "refused_token_counts",
    "resolve_answer",
    "spans_in_start_order",
    "split_prompt",
    "tool_documents",
    "top_span",
    "turns_of",
    "usage_of",
]

MappedFields = dict[str, Any]


class ConventionMapper(Protocol):
    """Maps the spans of one trace to trace fields for one instrumentation convention.

    Attributes:
        name: the convention's name (``openinference``, ``otel-genai``, ``openllmetry``, ``custom``).
    """

    name: str

    def match(self, spans: Sequence[SpanData]) -> bool:
        """True when the spans use this convention (cheap: looks at attribute names only)."""
        ...

    def map(self, spans: Sequence[SpanData]) -> MappedFields:
        """The fields found (see the module docstring). Never raises for odd attribute values."""
        ...


def spans_in_start_order(spans: Sequence[SpanData]) -> list[SpanData]:
    """Spans sorted by start time (ties: end time, then span id), so results do not depend on export order."""
    return sorted(spans, key=lambda s: (s.start_unix_nano, s.end_unix_nano, s.span_id))


#: Attribute prefixes of the RAG/LLM conventions ragpulse reads: a span carrying one belongs to the RAG service.
_RAG_PREFIXES = ("gen_ai.", "llm.", "openinference.", "traceloop.", "langfuse.", "retrieval.", "ragpulse.")


def _is_rag_span(span: SpanData) -> bool:
    return any(k.startswith(_RAG_PREFIXES) for k in span.attributes)


def top_span(spans: Sequence[SpanData]) -> SpanData | None:
    """The root of what is judged: the earliest root span (no parent, or a remote parent) of the RAG service,
    else ``None``.

    In a trace that spans several services (a gateway calls the RAG service with W3C ``traceparent``), the
    gateway's root and the RAG service's entry span (remote parent) are both roots; roots of a service that
    emitted RAG/LLM spans (:data:`_RAG_PREFIXES`) win over the others, so the front service's span never
    replaces the RAG service's entry span.
    """
    roots = [s for s in spans if s.is_root]
    if len(roots) > 1:
        rag_services = {s.service_name for s in spans if _is_rag_span(s)}
        preferred = [r for r in roots if r.service_name in rag_services]
        if preferred:
            roots = preferred
    return spans_in_start_order(roots)[0] if roots else None


def last_ended(spans: Sequence[SpanData]) -> SpanData | None:
    """The span that ended last (the first of them on a tie), or ``None`` for no spans."""
    return max(spans, key=lambda s: s.end_unix_nano) if spans else None


def maybe_json(value: Any) -> Any:
    """Parse ``value`` as JSON when it is a string holding a JSON object, array or string literal; its strings
    follow the text rule of the attributes they come from (a ``\\u0000`` escape removed, a lone surrogate
    escape as U+FFFD: :func:`ragpulse.textclean.clean_json`)."""
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in ("{", "[", '"'):
            try:
                parsed = json.loads(s)
            except (ValueError, RecursionError):  # not JSON, or nested too deeply to parse: keep the text
                return value
            return clean_json(parsed) if json_text_needs_cleaning(s) else parsed
    return value


def as_text(value: Any) -> str | None:
    """A non-blank string value as is, numbers as text; ``None`` for anything else."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    return None


def as_float(value: Any) -> float | None:
    """A number (or numeric string) as ``float``; ``None`` otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


_INDEX_RE_CACHE: dict[str, re.Pattern[str]] = {}


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Collect flattened list attributes ``<prefix>.<i>.<rest>`` into ``[{rest: value}, …]`` ordered by ``i``.

    Gaps in the indexes are skipped (the order of the present indexes is kept).
    """
    pat = _INDEX_RE_CACHE.get(prefix)
    if pat is None:
        pat = re.compile(re.escape(prefix) + r"\.(\d+)\.(.+)$")
        _INDEX_RE_CACHE[prefix] = pat
    groups: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        m = pat.match(key)
        if m:
            groups.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [groups[i] for i in sorted(groups)]


def message_text(content: Any) -> str | None:
    """Text of a message ``content``: a string, or a list of parts (``{"type": "text", "content"|"text": …}``)."""
    if isinstance(content, str):
        return content if content.strip() else None
    if isinstance(content, Mapping):
        for key in ("content", "text", "value"):
            t = message_text(content.get(key))
            if t:
                return t
        return None
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "tool_call_response":
                r = part.get("response", part.get("result"))
                t = r if isinstance(r, str) else json.dumps(r, ensure_ascii=False, default=str)
                if t and t.strip():
                    texts.append(t)
                continue
            if isinstance(part, Mapping) and part.get("type") not in (
                None,
                "text",
                "input_text",
                "output_text",
            ):
                continue
            t = message_text(part)
            if t:
                texts.append(t)
        return "\n".join(texts) if texts else None
    return None


#: LangChain message ``type`` → chat role.
_MESSAGE_TYPES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def parse_messages(value: Any) -> list[tuple[str, str]]:
    """``(role, text)`` pairs from a message list in OTel GenAI parts form or chat-completions form.

    Accepts a structured list (``arrayValue`` of ``kvlistValue``) or its JSON-string form; each message is
    ``{"role", "parts": [{"type": "text", "content"}]}``, ``{"role", "content"}`` or a LangChain message
    ``{"type": "human"|"ai"|"system"|"tool", "content"}``. A bare parts list (as in
    ``gen_ai.system_instructions``) yields one ``("system", text)`` pair. Messages without text are skipped.
    """
    v = maybe_json(value)
    if isinstance(v, str):
        return [("system", v)] if v.strip() else []
    if isinstance(v, Mapping):
        v = [v]
    if not isinstance(v, list):
        return []
    if v and all(
        isinstance(p, Mapping) and "role" not in p and "type" in p and p["type"] not in _MESSAGE_TYPES
        for p in v
    ):
        t = message_text(v)
        return [("system", t)] if t else []
    out: list[tuple[str, str]] = []
    for msg in v:
        if not isinstance(msg, Mapping):
            continue
        role = str(msg.get("role") or _MESSAGE_TYPES.get(str(msg.get("type")), ""))
        text = message_text(msg.get("parts")) if "parts" in msg else message_text(msg.get("content"))
        if text:
            out.append((role, text))
    return out


_ID_KEYS = ("id", "doc_id", "document_id", "chunk_id", "_id", "source")


def doc_id_from_metadata(metadata: Any) -> str | None:
    """A document id from retriever metadata (``id``, ``doc_id``, ``document_id``, ``chunk_id``, ``_id``, else
    ``source``: LangChain loaders set it, and OpenLLMetry does not export ``Document.id``)."""
    md = maybe_json(metadata)
    if isinstance(md, Mapping):
        for key in _ID_KEYS:
            t = as_text(md.get(key))
            if t:
                return t
    return None


def make_document(
    *, doc_id: Any, content: Sequence[Any], score: Any = None, metadata: Any = None
) -> Document:
    """A :class:`~ragpulse.model.Document` from raw attribute values.

    Args:
        doc_id: the reported id; when it is not text, the id comes from ``metadata``
            (:func:`doc_id_from_metadata`), else ``None``.
        content: candidate content values, first non-blank text wins; ``""`` when none is text.
        score: a number or numeric string (``None`` otherwise).
        metadata: a mapping or its JSON-string form; anything else gives ``{}``.
    """
    md = maybe_json(metadata)
    return Document(
        id=as_text(doc_id) or doc_id_from_metadata(md),
        content=next((t for t in map(as_text, content) if t), ""),
        score=as_float(score),
        metadata=dict(md) if isinstance(md, Mapping) else {},
    )


def ranked(docs: Sequence[Document]) -> list[Document]:
    """The documents with ``rank`` set to their 0-based position."""
    return [d.model_copy(update={"rank": i}) for i, d in enumerate(docs)]


def last_text(messages: Sequence[tuple[str, str]], roles: Sequence[str]) -> str | None:
    """The text of the last ``(role, text)`` message whose role is in ``roles``, or ``None``."""
    picked = [t for role, t in messages if role in roles]
    return picked[-1] if picked else None


#: Roles an output (completion) message may carry: ``assistant``; none; ``unknown`` (OpenLLMetry's
#: LangChain instrumentation for a streamed ``AIMessageChunk``); ``model`` (Gemini).
OUTPUT_ROLES = ("assistant", "", "unknown", "model")

_STREAM_RE = re.compile(r"^\s*<(?:async_)?generator object .+ at 0x[0-9a-fA-F]+>\s*$", re.DOTALL)

#: ``not_evaluable`` reason when two or more model calls could have produced the answer.
AMBIGUOUS_ANSWER = "ambiguous_answer"


def is_streaming_repr(text: Any) -> bool:
    """True for the repr of a (async) generator that instrumentation records instead of a streamed output,
    e.g. ``<generator object answer_stream at 0x7f…>`` or ``<async_generator object RunnableSequence.astream
    at 0x…>``."""
    return isinstance(text, str) and len(text) < 500 and _STREAM_RE.match(text) is not None


_THINK_RE = re.compile(r"^\s*<(think|thinking|reasoning)>.*?</\1>\s*", re.DOTALL | re.IGNORECASE)


_OBJECT_REPR_RE = re.compile(r"^\s*[A-Z][A-Za-z0-9_]*\([a-z_][a-z0-9_]*=")


def is_object_repr(text: Any) -> bool:
    """True for the repr of a Python object recorded instead of a text output, e.g. LlamaIndex workflows'
    ``StopEvent(result=AgentOutput(response=ChatMessage(…)))`` (often cut, so no closing parenthesis is
    required): a capitalised name directly followed by ``(`` and a keyword argument."""
    return isinstance(text, str) and _OBJECT_REPR_RE.match(text) is not None


def reasoning_text(text: Any) -> str | None:
    """The content of the inline reasoning block ``text`` starts with (``<think>…</think>`` …), else ``None``."""
    if not isinstance(text, str) or text.lstrip()[:1] != "<":
        return None
    m = _THINK_RE.match(text)
    if m is None:
        return None
    inner = re.sub(r"^\s*<[^>]+>|</[^>]+>\s*$", "", m.group(0))
    return inner.strip() or None


def call_of(span: SpanData, inputs: list[tuple[str, str]], *outputs: Any) -> LlmCall:
    """A :class:`LlmCall` whose output is the first of ``outputs`` that :func:`answer_text` keeps, with the
    reasoning block that output started with."""
    for raw in outputs:
        text = answer_text(raw)
        if text is not None:
            return LlmCall(span, inputs, text, reasoning_text(raw))
    return LlmCall(span, inputs, None)


def answer_text(text: str | None) -> str | None:
    """``text`` without a leading inline reasoning block (``<think>…</think>``, ``<thinking>``,
    ``<reasoning>``: the final answer only), unless it is blank, a streaming repr (:func:`is_streaming_repr`)
    or an object repr (:func:`is_object_repr`), then ``None``."""
    if not isinstance(text, str) or not text.strip() or is_streaming_repr(text) or is_object_repr(text):
        return None
    if text.lstrip()[:1] == "<":
        text = _THINK_RE.sub("", text, count=1)
        if not text.strip():
            return None
    return text


_LABEL_RE = re.compile(
    r"(?:^|\n)[ \t]*(?:question|query|user question|q)[ \t]*:[ \t]*(?P<q>[^\n]+?)[ \t]*"
    r"(?:\n[ \t]*answer[ \t]*:[ \t]*)?\s*$",
    re.IGNORECASE,
)


def split_prompt(user_text: str | None, question: str | None) -> tuple[str | None, str | None]:
    """``(question, passages)`` of a user message that carries passages besides the question (prompt-stuffed
    RAG: LlamaIndex's QA template, "Context: … Question: …").

    With a known ``question`` contained in a longer message, the passages are the message without it. Else a
    last line labelled ``Question:`` / ``Query:`` / ``Q:`` (optionally followed by ``Answer:``) is the
    question — unless one is known (the user's; the labelled one may be a condensed rewrite) — and the text
    before it the passages. Otherwise ``(user_text, None)``: the message is the
    question and no passages are claimed.
    """
    if not user_text:
        return question, None
    text = user_text.strip()
    if question and question.strip() and question.strip() in text and text != question.strip():
        rest = text.replace(question.strip(), "").strip()
        return question, rest or None
    m = _LABEL_RE.search(text)
    if m and m.start() > 0:
        passages = text[: m.start()].strip()
        # a question found outside the model call (the user's) wins over the labelled one (maybe rewritten)
        return question or m.group("q").strip(), passages or None
    return question or user_text, None


@dataclass
class LlmCall:
    """One model call as a mapper reads it.

    Attributes:
        span: the span.
        inputs: its input messages as ``(role, text)`` pairs (roles ``system``, ``user``, ``assistant``,
            ``tool`` …).
        output: its completion text (``None`` when absent or only a streaming repr), without reasoning.
        reasoning: the inline reasoning block (``<think>…</think>``) its completion started with, if any.
    """

    span: SpanData
    inputs: list[tuple[str, str]] = field(default_factory=list)
    output: str | None = None
    reasoning: str | None = None


@dataclass
class AnswerChoice:
    """What :func:`choose_answer_call` decided.

    Attributes:
        call: the answering call, ``None`` when there is none or the choice is ambiguous.
        candidates: span ids of the model calls that could have been the answer (start order).
        ambiguous: two or more candidates could not be told apart.
    """

    call: LlmCall | None = None
    candidates: list[str] = field(default_factory=list)
    ambiguous: bool = False


def _carries(call: LlmCall, needles: Sequence[str]) -> bool:
    text = "\n".join(t for _, t in call.inputs)
    return any(n in text for n in needles)


def _needles(documents: Sequence[Document]) -> list[str]:
    """Probe strings for documents: the first 200 characters of each non-blank content."""
    out = []
    for d in documents:
        c = d.content.strip()
        if c:
            out.append(c[:200])
    return out


def choose_answer_call(
    calls: Sequence[LlmCall],
    *,
    root: SpanData | None,
    question: str | None,
    documents: Sequence[Document],
    answer: str | None = None,
) -> AnswerChoice:
    """Pick the model call that produced the trace's answer.

    Candidates are the calls that ended no later than the root span (all calls when there is no root). Then,
    in order: the calls whose output equals the explicit ``answer`` (the root's output); else the calls whose
    input carries one of the retrieved ``documents``; else those whose input carries the user ``question``;
    else, when there is a single candidate, that one. Among several in the first non-empty group the one that
    ended last wins; two that ended at the same time with different outputs, or several calls none of which
    carries the documents or the question, are ambiguous.

    Args:
        calls: the trace's model calls (any order).
        root: the root span, if present.
        question: the user question as found outside the model calls (root/retriever input), if any.
        documents: the retrieved documents found so far.
        answer: the explicit answer (root output), if any.
    """
    if not calls:
        return AnswerChoice()
    end = root.end_unix_nano if root is not None and root.end_unix_nano > 0 else None
    pool = [c for c in calls if end is None or c.span.end_unix_nano <= end] or list(calls)
    pool = sorted(pool, key=lambda c: (c.span.start_unix_nano, c.span.end_unix_nano, c.span.span_id))
    candidates = [c.span.span_id for c in pool]
    with_output = [c for c in pool if c.output is not None] or pool
    if len(with_output) == 1:
        return AnswerChoice(call=with_output[0], candidates=candidates)
    groups: list[list[LlmCall]] = []
    if answer:
        groups.append([c for c in with_output if c.output and c.output.strip() == answer.strip()])
    needles = _needles(documents)
    if needles:
        groups.append([c for c in with_output if _carries(c, needles)])
    if question and question.strip():
        groups.append([c for c in with_output if _carries(c, [question.strip()])])
    for group in groups:
        if not group:
            continue
        last = max(c.span.end_unix_nano for c in group)
        tied = [c for c in group if c.span.end_unix_nano == last]
        if len({c.output for c in tied}) > 1:
            return AnswerChoice(candidates=candidates, ambiguous=True)
        return AnswerChoice(call=tied[-1], candidates=candidates)
    return AnswerChoice(candidates=candidates, ambiguous=True)


#: Token-count attributes of a model call: (prompt, completion) key pairs, first pair found wins —
#: OpenInference, OTel GenAI (current and the older names OpenLLMetry used).
_TOKEN_KEYS = (
    ("llm.token_count.prompt", "llm.token_count.completion"),
    ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
    ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"),
)
#: Keys of Langfuse's ``langfuse.observation.usage_details`` (a JSON object): (prompt, completion) pairs.
_LANGFUSE_USAGE_KEYS = (("input", "output"), ("prompt_tokens", "completion_tokens"))


def _whole(v: Any) -> int | None:
    """``v`` as a non-negative whole number (any size), else ``None``."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v if v >= 0 else None
    f = as_float(v)
    if f is None or not math.isfinite(f) or f < 0 or f != int(f):
        return None
    return int(f)


def _token_pairs(span: SpanData) -> list[tuple[str, str, Any, Any]]:
    """``(prompt key, completion key, prompt value, completion value)`` per token-count key pair of ``span``, in
    the order :func:`usage_of` reads them (Langfuse's keys as ``langfuse.observation.usage_details.<key>``)."""
    a = span.attributes
    out = [(pk, ck, a.get(pk), a.get(ck)) for pk, ck in _TOKEN_KEYS]
    details = maybe_json(a.get("langfuse.observation.usage_details"))
    if isinstance(details, Mapping):
        base = "langfuse.observation.usage_details."
        out += [(base + pk, base + ck, details.get(pk), details.get(ck)) for pk, ck in _LANGFUSE_USAGE_KEYS]
    return out


def refused_token_counts(span: SpanData) -> dict[str, str]:
    """``{attribute key: why}`` for each token count of ``span`` above
    :data:`ragpulse.model.TOKEN_COUNT_MAX`: not plausible, so :func:`usage_of` takes that call's usage as
    unknown (the trace keeps the note in ``attributes.token_count_refused``)."""
    out: dict[str, str] = {}
    for pk, ck, pv, cv in _token_pairs(span):
        for key, v in ((pk, pv), (ck, cv)):
            n = _whole(v)
            if n is not None and n > TOKEN_COUNT_MAX:
                out[key] = (
                    f"{n} on span {span.span_id} is above {TOKEN_COUNT_MAX}: that call's token usage is unknown"
                )
    return out


def usage_of(span: SpanData) -> tuple[int, int] | None:
    """``(prompt_tokens, completion_tokens)`` a model-call span reports, or ``None`` when it reports none.

    Read from OpenInference ``llm.token_count.prompt``/``.completion``, OTel GenAI
    ``gen_ai.usage.input_tokens``/``.output_tokens`` (or the older ``prompt_tokens``/``completion_tokens``), or
    Langfuse's ``langfuse.observation.usage_details`` (``input``/``output`` or ``prompt_tokens``/
    ``completion_tokens``). A missing half counts 0 when the other is reported. A count above
    :data:`ragpulse.model.TOKEN_COUNT_MAX` is not plausible: the span's usage is unknown (``None``; see
    :func:`refused_token_counts`).
    """
    for _, _, pv, cv in _token_pairs(span):
        p, c = _whole(pv), _whole(cv)
        if p is not None or c is not None:
            if max(p or 0, c or 0) > TOKEN_COUNT_MAX:
                return None
            return p or 0, c or 0
    return None


def turns_of(inputs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The conversation's earlier turns in a model call's input messages: every ``user`` message before the
    last one, with the ``assistant`` text that followed it (``None`` when none did), oldest first."""
    users = [i for i, (role, _) in enumerate(inputs) if role == "user"]
    if len(users) < 2:
        return []
    out: list[dict[str, Any]] = []
    for i in users[:-1]:
        answer = None
        for role, text in inputs[i + 1 :]:
            if role == "user":
                break
            if role == "assistant":
                answer = text
        out.append({"question": inputs[i][1], "answer": answer})
    return out


def _usage_fields(
    out: MappedFields,
    calls: Sequence[LlmCall],
    call: LlmCall | None,
    model_of: Callable[[SpanData], str | None],
) -> None:
    """Token usage: the answering ``call``'s tokens, the sums over ``calls`` and the per-model usage."""
    by_model: dict[str | None, list[int]] = {}
    for c in calls:
        u = usage_of(c.span)
        if u is None:
            continue
        entry = by_model.setdefault(model_of(c.span), [0, 0, 0])
        entry[0] += u[0]
        entry[1] += u[1]
        entry[2] += 1
    if not by_model:
        return
    if call is not None and (u := usage_of(call.span)) is not None:
        out["prompt_tokens"], out["completion_tokens"] = u
    out["total_prompt_tokens"] = sum(e[0] for e in by_model.values())
    out["total_completion_tokens"] = sum(e[1] for e in by_model.values())
    out["usage"] = [
        {"model": m, "prompt_tokens": e[0], "completion_tokens": e[1], "calls": e[2]}
        for m, e in by_model.items()
    ]


_TEXT_KEYS = ("text", "content", "page_content", "snippet")
_TOOL_ID_KEYS = ("id", "doc_id")


def _tool_message_content(out: Any) -> Any:
    """The content of a serialized LangChain ``ToolMessage`` (``{"type": "tool", "data": {"content": …}}``, or
    the ``lc`` constructor form ``{"lc": 1, "kwargs": {"content": …}}``, possibly wrapped as
    ``{"output": …, "kwargs": …}``), else ``out`` as is."""
    v = maybe_json(out)
    if isinstance(v, Mapping) and isinstance(v.get("output"), Mapping) and len(v) <= 2:
        v = v["output"]  # OpenLLMetry's tool span: {"output": <ToolMessage>, "kwargs": {...}}
    if isinstance(v, Mapping) and "tool_name" in v and ("raw_output" in v or "blocks" in v):
        # LlamaIndex ToolOutput: the tool's own return value, else its text blocks
        if v.get("raw_output") is not None:
            return v["raw_output"]
        return message_text(v.get("blocks")) or out
    if isinstance(v, Mapping):
        inner = v.get("data") if v.get("type") == "tool" else v.get("kwargs") if v.get("lc") else None
        if isinstance(inner, Mapping) and inner.get("content") is not None:
            return inner["content"]
    return out


def tool_documents(outputs: Sequence[Any]) -> list[Document]:
    """Retrieved documents from tool-call outputs (TOOL span outputs or ``tool``-role message texts).

    An output that is a JSON list of objects with a text field (``text``, ``content``, ``page_content``,
    ``snippet``; id from ``id`` / ``doc_id``, score from ``score``, the rest as metadata) gives one document
    per object, a JSON list of non-blank strings one document per string; a serialized LangChain
    ``ToolMessage`` is read through its ``content``; any other non-blank output gives one document holding
    the whole output.
    """
    docs: list[Document] = []
    for out in outputs:
        out = _tool_message_content(out)
        v = maybe_json(out)
        if isinstance(v, list) and v and all(isinstance(i, str) and i.strip() for i in v):
            docs.extend(Document(content=i) for i in v)  # a list of passages: one document each
            continue
        if isinstance(v, list) and v and all(isinstance(i, Mapping) for i in v):
            items = [i for i in v if any(as_text(i.get(k)) for k in _TEXT_KEYS)]
            if items:
                for i in items:
                    docs.append(
                        Document(
                            id=next((as_text(i.get(k)) for k in _TOOL_ID_KEYS if as_text(i.get(k))), None),
                            content=next(t for t in (as_text(i.get(k)) for k in _TEXT_KEYS) if t),
                            score=as_float(i.get("score")),
                            metadata={
                                str(k): x
                                for k, x in i.items()
                                if k not in _TEXT_KEYS and k not in _TOOL_ID_KEYS and k != "score"
                            },
                        )
                    )
                continue
        if isinstance(out, str):
            text = as_text(out)
        elif out is None:
            text = None
        else:
            text = json.dumps(out, ensure_ascii=False, default=str)
        if text and not is_streaming_repr(text):
            docs.append(Document(content=text))
    return docs


def resolve_answer(
    out: MappedFields,
    calls: Sequence[LlmCall],
    *,
    root: SpanData | None,
    answer: str | None,
    documents: Sequence[Document],
    tool_outputs: Sequence[Any],
    model_of: Callable[[SpanData], str | None],
) -> None:
    """Fill ``out`` with what depends on the answering call (shared by every convention mapper).

    Sets ``documents`` (``documents``, else :func:`tool_documents` of ``tool_outputs``, else of the chosen
    call's ``tool`` messages; ranked), ``retrieval_seen`` when tool documents were used, ``question`` (when
    still missing: the chosen call's last user message), ``answer`` (``answer``, else the chosen call's
    output; ``None`` and ``not_evaluable = ambiguous_answer`` when the choice is ambiguous),
    ``answer_span_id``, ``answer_candidates``, ``model_context`` (the chosen call's system messages),
    ``model`` (``model_of`` the chosen call), ``turns`` (the earlier turns in the chosen call's messages,
    :func:`turns_of`) and the token usage (:func:`usage_of`): ``prompt_tokens``/``completion_tokens`` of the
    chosen call, ``total_prompt_tokens``/``total_completion_tokens`` over every call, ``usage`` per model.

    Args:
        out: the mapper's fields so far (``question`` may be set).
        calls: the trace's model calls.
        root: the root span, if present.
        answer: the explicit answer (root output; streaming reprs already removed), if any.
        documents: documents from retriever/reranker spans.
        tool_outputs: outputs of tool-call spans, in start order.
        model_of: the model name a call span reports.
    """
    docs = list(documents)
    if not docs:
        docs = tool_documents(tool_outputs)
        if docs:
            out["retrieval_seen"] = True
    choice = choose_answer_call(calls, root=root, question=out.get("question"), documents=docs, answer=answer)
    call = choice.call
    if call is None and answer is not None and calls:  # explicit answer: model/context from the last call
        call = max(calls, key=lambda c: c.span.end_unix_nano)
    if not docs and call is not None:
        docs = tool_documents([t for role, t in call.inputs if role == "tool"])
        if docs:
            out["retrieval_seen"] = True
    out["documents"] = ranked(docs)
    passages = None
    if call is not None:
        question, passages = split_prompt(last_text(call.inputs, ("user",)), out.get("question"))
        out["question"] = question
    if answer is None:
        if choice.ambiguous:
            out["not_evaluable"] = AMBIGUOUS_ANSWER
        elif call is not None:
            answer = call.output
            if call.reasoning:
                out["reasoning"] = call.reasoning
    out["answer"] = answer
    if choice.call is not None:
        out["answer_span_id"] = choice.call.span.span_id
    if choice.candidates:
        out["answer_candidates"] = choice.candidates
    if call is not None:
        system = [t for role, t in call.inputs if role in ("system", "developer")]
        if passages and not docs:
            system.append(passages)
        out["model_context"] = "\n\n".join(system) if system else None
        out["model"] = model_of(call.span)
        turns = turns_of(call.inputs)
        if turns:
            out["turns"] = turns
    _usage_fields(out, calls, call, model_of)
