"""Property-based tests of the Kafka decoder and consume loop (issue 11 items 5–7).

Every message ends as a stored trace or a dead letter: :func:`parse_event` returns a storable trace or raises
:class:`EventRejected`, never anything else, for ≥ 500 generated messages seeded with the literal values of the
issue (``latencyMs`` ``1e400``/``1e300``/400 digits with a timestamp, ``0001-01-01T00:00:00Z``, ``-1``, year
9999, epoch seconds, a lone surrogate, a cut UTF-8 character). Then the same kind of stream runs through a real
broker, the real engine and PostgreSQL: stored + dead-lettered = sent, and the consume loop lives on.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ingest.kafka_testutil import committed, create_topic, event, produce, read_topic
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.ingest.events import EventRejected, parse_event
from ragpulse.ingest.kafka import KafkaSource
from ragpulse.ingest.timestamps import is_plausible
from ragpulse.model import Source, TraceOutcome, TraceResult
from ragpulse.store import PostgresStore
from ragpulse.store.rows import trace_row
from ragpulse.testing.fakes import ScriptedJudge
from ragpulse.textclean import needs_cleaning
from testsupport import pg_count, wait_until

#: Literal values from the issue, as raw JSON fragments (numbers a JSON encoder would never write).
WEIRD_NUMBERS = ["1e400", "1e300", "-1e400", "9" * 400, "-" + "9" * 400, "-1", "0", "1e-400", "1773489600",
                 "1773489600000", "1773489600000000", "1773489600000000000", "253402300800000", "4e18", "-0.0"]  # fmt: skip
WEIRD_TIMES = ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00+01:00",
               "9999-12-31T23:59:59-01:00", "2026-03-14T12:00:00Z", "1999-12-31T23:59:59Z", "yesterday", "",
               "2026-13-40T00:00:00Z", "2026-03-14", "2026-03-14T12:00:00.123456789Z"]  # fmt: skip
LITERAL_MESSAGES = [
    b'{"traceId": "lit-1", "question": "q", "answer": "a", "latencyMs": 1e400, "timestamp": 1773489600000}',
    b'{"traceId": "lit-2", "question": "q", "answer": "a", "latencyMs": 1e300, "timestamp": 1773489600000}',
    b'{"traceId": "lit-3", "question": "q", "answer": "a", "latencyMs": ' + b"9" * 400 + b', "timestamp": 1}',
    b'{"traceId": "lit-4", "question": "q", "answer": "a", "timestamp": "0001-01-01T00:00:00Z", "latencyMs": 5}',
    b'{"traceId": "lit-5", "question": "q", "answer": "a", "timestamp": -1}',
    b'{"traceId": "lit-6", "question": "q", "answer": "a", "timestamp": "9999-12-31T23:59:59Z"}',
    b'{"traceId": "lit-7", "question": "q", "answer": "a", "timestamp": 1773489600}',
    b'{"traceId": "lit-8", "question": "Cake \\ud83d?", "answer": "half \\udc00 emoji"}',
    b'{"traceId": "lit-9\\ud83d", "question": "caf\xc3", "answer": "\xe2\x82"}',
    b'{"traceId": "lit-10", "question": "q\\u0000", "answer": "a", "contexts": ["\\ud800", null]}',
]

_chars = st.characters(exclude_categories=())  # surrogates (Cs) included
_text = st.text(_chars, max_size=30)
_json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


def _frag(value: object) -> str:
    return json.dumps(value)  # ensure_ascii: a lone surrogate becomes a "\udXXX" escape, as SDKs send it


_number_frag = (
    st.sampled_from(WEIRD_NUMBERS)
    | st.integers().map(str)
    | st.floats(allow_nan=False).map(
        lambda f: "1e400" if f == float("inf") else "-1e400" if f == float("-inf") else repr(f)
    )
)
_time_frag = st.sampled_from(WEIRD_TIMES).map(_frag) | _number_frag | _json_value.map(_frag)
_text_frag = _text.map(_frag) | _json_value.map(_frag)
_FIELDS = {
    "question": _text_frag,
    "answer": _text_frag,
    "timestamp": _time_frag,
    "latencyMs": _number_frag | _json_value.map(_frag),
    "latency_ms": _number_frag,
    "contexts": st.lists(_text | st.none(), max_size=3).map(_frag) | _json_value.map(_frag),
    "retrievedDocIds": st.lists(_text | st.integers() | st.none(), max_size=3).map(_frag),
    "documents": st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "id": _json_value,
                "content": _json_value,
                "text": _text,
                "score": _json_value,
                "metadata": _json_value,
            },
        ),
        max_size=3,
    ).map(_frag),
    "keywords": _json_value.map(_frag),
    "attributes": _json_value.map(_frag),
    "app": _text_frag,
    "spanId": _text_frag,
    "error": _json_value.map(_frag),
}


@st.composite
def _event_fields(draw: st.DrawFn) -> dict[str, str]:
    names = draw(st.lists(st.sampled_from(sorted(_FIELDS)), unique=True, max_size=len(_FIELDS)))
    return {n: draw(_FIELDS[n]) for n in names}


def _event_bytes(trace_id: str, fields: dict[str, str]) -> bytes:
    body = ", ".join(f'"{k}": {v}' for k, v in {"traceId": trace_id, **fields}.items())
    return ("{" + body + "}").encode("utf-8", "surrogatepass")


@st.composite
def _messages(draw: st.DrawFn) -> bytes:
    """A message: a generated event (sometimes cut or with a bad byte), or raw bytes."""
    kind = draw(st.sampled_from(["event", "event", "event", "corrupt", "binary"]))
    if kind == "binary":
        return draw(st.binary(max_size=200))
    tid = draw(
        st.one_of(_text.map(_frag), st.integers().map(str), st.sampled_from(['""', '" "', "null", "[]"]))
    )
    raw = _event_bytes(tid, draw(_event_fields()))
    if kind == "corrupt" and raw:
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"", b'"'])) + raw[i + 1 :]
    return raw


def _check_storable(raw: bytes) -> None:
    """The decoder's contract: a storable, clean trace, or EventRejected — nothing else."""
    now = datetime.now(UTC)
    try:
        t = parse_event(raw, received_at=now)
    except EventRejected as e:
        # the codes events.py documents
        assert e.code in ("not_json", "schema", "too_large", "too_deep", "bad_id")
        return
    assert t.source is Source.KAFKA
    for text in (t.trace_id, t.question, t.answer, t.context, *t.contexts):
        assert text is None or not needs_cleaning(text), text
    if t.end_time is not None:
        assert is_plausible(t.end_time, now)
    row = trace_row(TraceResult(trace=t, outcome=TraceOutcome.EVALUATED), redact_text=False)
    for cell in row:
        if isinstance(cell, str):
            cell.encode("utf-8")  # PostgreSQL takes only what encodes


@pytest.mark.integration  # slow check (fuzzer, ~3 s CPU): the integration lane, docs/dev/testing.md
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(_messages())
@example(LITERAL_MESSAGES[0])
@example(LITERAL_MESSAGES[1])
@example(LITERAL_MESSAGES[2])
@example(LITERAL_MESSAGES[3])
@example(LITERAL_MESSAGES[4])
@example(LITERAL_MESSAGES[5])
@example(LITERAL_MESSAGES[6])
@example(LITERAL_MESSAGES[7])
@example(LITERAL_MESSAGES[8])
@example(LITERAL_MESSAGES[9])
def test_decoder_never_raises_anything_but_event_rejected(raw: bytes) -> None:
    _check_storable(raw)


def _generated_stream(n: int) -> list[bytes]:
    """``n`` generated messages (deterministic), each event with its own trace id prefix."""
    out: list[bytes] = []

    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(_event_fields(), st.booleans(), _messages())
    def collect(fields: dict[str, str], use_event: bool, raw: bytes) -> None:
        if len(out) < n:
            out.append(_event_bytes(_frag(f"fz-{len(out)}"), fields) if use_event else raw)

    collect()
    return out


@pytest.mark.slow
async def test_fuzzed_stream_stored_plus_dead_lettered_equals_sent(
    kafka_bootstrap: str, topic: str, pg_url: str
) -> None:
    await create_topic(kafka_bootstrap, topic, 2)
    values = [event(0), *LITERAL_MESSAGES, *_generated_stream(520), event(1)]
    sent = await produce(kafka_bootstrap, topic, values)
    s = Settings(
        kafka_bootstrap_servers=kafka_bootstrap,
        kafka_topics=[topic],
        kafka_group_id=f"g-{uuid.uuid4().hex[:8]}",
        store_database_url=pg_url,
        engine_shutdown_deadline_s=5.0,
    )
    store = await PostgresStore.connect(pg_url, s.store)
    try:
        async with Engine({"keyword": ScriptedJudge("keyword", 1.0)}, store, s.engine) as engine:
            async with KafkaSource(s.kafka, engine, commit_interval_s=0.2) as src:
                await wait_until(
                    lambda: engine.stats.stored + engine.stats.failed + src.stats["dead_lettered"] >= sent,
                    120,
                    "every message stored or dead-lettered",
                    interval_s=0.1,
                )
                assert not src._task.done()  # type: ignore[union-attr]  # the consume loop lives on
                dead = src.stats["dead_lettered"]
            assert engine.stats.failed == 0
            assert engine.stats.stored + dead == sent
    finally:
        await store.close()
    dlq = await read_topic(kafka_bootstrap, f"{topic}.dlq", dead)
    reasons = {dict(r.headers)["ragpulse.dlq.reason"].decode().split(":", 1)[0] for r in dlq}
    assert reasons <= {"not_json", "schema", "bad_id", "too_deep"}  # no internal_error, no not_stored
    stored_ids = {parse_event(v).trace_id for v in values if _parses(v)}
    assert await pg_count(pg_url, "SELECT count(*) FROM traces") == len(stored_ids)
    for lit in ("lit-2", "lit-3", "lit-4", "lit-5", "lit-6", "lit-7", "lit-8", "lit-10"):
        assert await pg_count(pg_url, f"SELECT count(*) FROM traces WHERE trace_id = '{lit}'") == 1
    offs = await committed(kafka_bootstrap, s.kafka.group_id, topic, 2)
    assert sum(v or 0 for v in offs.values()) == sent  # every partition committed to its end


def _parses(raw: bytes) -> bool:
    try:
        parse_event(raw)
    except EventRejected:
        return False
    return True
