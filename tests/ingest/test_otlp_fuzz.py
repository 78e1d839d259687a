"""Property-based tests of the OTLP decoders and receiver (issue 11 items 5–7 and 10).

1. Decoders: for ≥ 500 generated OTLP/JSON documents and ≥ 500 mutated protobuf payloads (bit flips, cuts,
   cut UTF-8 characters, seeded with the issue's literal values — a lone surrogate, a cut three-byte
   character, times of year 1 / 9999 / -1, 1e400 doubles, 400-digit numbers), ``decode_json`` /
   ``decode_protobuf`` either raise :class:`IngestError` or return a request whose spans map to traces
   without raising, and every mapped trace can be written by the store (``trace_row``).
2. Receiver: generated requests through a real OTLP/HTTP socket, the real engine and PostgreSQL — every trace
   the receiver took (recorded in the journal before its 200) ends stored or dead-lettered, nothing else;
   the receiver never answers 500.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ingest.otlp_testutil import fixtures_dir
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.errors import IngestError
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.decode import decode_json, decode_protobuf
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.ingest.otlp.spans import request_to_spans
from ragpulse.model import TraceOutcome, TraceResult
from ragpulse.store import PostgresStore
from ragpulse.store.rows import trace_row
from ragpulse.testing.fakes import ScriptedJudge
from testsupport import pg_count, wait_until

_chars = st.characters(exclude_categories=())  # lone surrogates (Cs) included
_text = st.text(_chars, max_size=24)
_WEIRD_INTS = ["0", "-1", "1", "9" * 400, "-" + "9" * 400, "18446744073709551615", "18446744073709551616",
               "253402300800000000000", "1773489600", "1773489600000", "1773489600000000000", "1e400", "x"]  # fmt: skip
_int_value = st.sampled_from(_WEIRD_INTS) | st.integers().map(str) | st.integers(-(2**70), 2**70)
_double = st.floats() | st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "1e300"])
_scalar_any = st.one_of(
    _text.map(lambda t: {"stringValue": t}),
    st.booleans().map(lambda b: {"boolValue": b}),
    _int_value.map(lambda i: {"intValue": i}),
    _double.map(lambda d: {"doubleValue": d}),
    st.binary(max_size=8).map(lambda b: {"bytesValue": base64.b64encode(b).decode()}),
    st.just({}),
    _text.map(lambda t: {"bytesValue": t}),  # not base64
)
_any_value = st.recursive(
    _scalar_any,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda vs: {"arrayValue": {"values": vs}}),
        st.lists(st.tuples(_text, inner), max_size=3).map(
            lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}}
        ),
    ),
    max_leaves=6,
)
#: Attribute keys the mappers read, so the generated values reach the convention code.
_KEYS = ["openinference.span.kind", "input.value", "output.value", "llm.input_messages.0.message.role",
         "llm.input_messages.0.message.content", "llm.output_messages.0.message.content",
         "retrieval.documents.0.document.content", "retrieval.documents.0.document.id",
         "retrieval.documents.0.document.score", "retrieval.documents.0.document.metadata", "gen_ai.operation.name",
         "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.retrieval.documents", "gen_ai.tool.call.result",
         "traceloop.entity.input", "traceloop.entity.output", "traceloop.span.kind", "gen_ai.prompt.0.content",
         "gen_ai.completion.0.content", "langfuse.trace.input", "langfuse.trace.output", "langfuse.observation.type",
         "langfuse.observation.output", "metadata", "session.id", "ragpulse.run.id", "ragpulse.keywords",
         "ragpulse.attributes", "ragpulse.expected_answer"]  # fmt: skip
_KINDS = ["CHAIN", "LLM", "RETRIEVER", "TOOL", "RERANKER", "AGENT", "generation", "retriever", "tool", "chat",
          "retrieval", "execute_tool", "workflow", "task"]  # fmt: skip
_attr_value = _any_value | st.sampled_from(_KINDS).map(lambda k: {"stringValue": k})
_attributes = st.lists(
    st.tuples(st.sampled_from(_KEYS) | _text, _attr_value).map(lambda kv: {"key": kv[0], "value": kv[1]}),
    max_size=6,
)
_hex_id16 = st.sampled_from(["0af7651916cd43dd8448eb211c80319c", "5B8EFFF798038103D269B633813FC60C",
                             "00000000000000000000000000000000", "", "zz", "AAECAwQFBgcICQoLDA0ODw=="])  # fmt: skip
_random_tid = st.uuids(version=4).map(lambda u: u.hex)
_trace_id = st.one_of(_random_tid, _random_tid, _random_tid, _hex_id16, _text)  # mostly valid, fresh ids
_span_id = st.sampled_from(["b7ad6b7169203331", "00f067aa0ba902b7", "", "AAECAwQFBgc="]) | st.binary(
    min_size=8, max_size=8
).map(bytes.hex)
_time = _int_value | st.sampled_from(["-1", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
_event = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["exception", "db.query.result", "gen_ai.choice"]) | _text,
        "attributes": _attributes,
    },
    optional={"timeUnixNano": _time},
)


def _request(trace_id: st.SearchStrategy[str], span_id: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """OTLP/JSON requests whose spans take their ids from ``trace_id`` / ``span_id``."""
    span = st.fixed_dictionaries(
        {"traceId": trace_id, "spanId": span_id, "name": _text, "attributes": _attributes},
        optional={
            "parentSpanId": span_id,
            "startTimeUnixNano": _time,
            "endTimeUnixNano": _time,
            "kind": st.integers(-1, 9) | st.sampled_from(["SPAN_KIND_CLIENT", "nonsense"]),
            "status": st.fixed_dictionaries(
                {"code": st.integers(-1, 3) | st.just("STATUS_CODE_ERROR")}, optional={"message": _text}
            ),
            "events": st.lists(_event, max_size=2),
            "flags": st.integers(-1, 2**33),
        },
    )
    scope = st.fixed_dictionaries(
        {"scope": st.fixed_dictionaries({"name": _text}), "spans": st.lists(span, min_size=1, max_size=4)}
    )
    resource = st.fixed_dictionaries(
        {
            "resource": st.fixed_dictionaries({"attributes": _attributes}),
            "scopeSpans": st.lists(scope, min_size=1, max_size=2),
        }
    )
    return st.fixed_dictionaries({"resourceSpans": st.lists(resource, min_size=1, max_size=2)})


_json_request = _request(_trace_id, _span_id)
#: Mostly well-formed ids, so most generated traces are taken and the receiver's accounting is exercised.
_json_request_valid_ids = _request(_random_tid, st.uuids(version=4).map(lambda u: u.hex[:16]))


def _encode(doc: dict[str, Any]) -> bytes:
    """JSON text with raw numbers for the literal fragments (``"1e400"`` → ``1e400``) where they are ints/doubles."""
    text = json.dumps(doc)  # ensure_ascii: lone surrogates become "\\udXXX" escapes, as SDKs send them
    for lit in ("1e400", "-1e400", "1e300", "9" * 400):
        text = text.replace(f'"doubleValue": "{lit}"', f'"doubleValue": {lit}')
        text = text.replace(f'"intValue": "{lit}"', f'"intValue": {lit}')
    return text.encode()


LITERAL_JSON = [
    # the half emoji in a question, next to a healthy span
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c",'
    b'"spanId":"b7ad6b7169203331","name":"rag","attributes":[{"key":"input.value","value":'
    b'{"stringValue":"Cake \\ud83d?"}},{"key":"openinference.span.kind","value":{"stringValue":"CHAIN"}}]}]}]}]}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c",'
    b'"spanId":"b7ad6b7169203331","name":"\xe2\x82","startTimeUnixNano":"-1","endTimeUnixNano":'
    b'"253402300800000000000","attributes":[{"key":"x","value":{"doubleValue":1e400}}]}]}]}]}',
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"\\udc00"}}]},'
    b'"scopeSpans":[{"spans":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331",'
    b'"name":"r","status":{"code":2},"events":[{"name":"exception","attributes":[{"key":"exception.message",'
    b'"value":{"intValue":' + b"9" * 400 + b"}}]}]}]}]}]}",
]


def _check_request(result: Any) -> None:
    """Every trace of a decoded request maps, and its row can be built for the store."""
    spans = request_to_spans(result.request, "ragpulse").spans
    by_trace: dict[str, list[Any]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    builder = TraceBuilder(Settings().otlp)
    for tid, group in by_trace.items():
        trace = builder.build(tid, group)
        trace_row(TraceResult(trace=trace, outcome=TraceOutcome.EVALUATED), redact_text=False)


@pytest.mark.integration  # slow check (fuzzer, ~16 s CPU): the integration lane, docs/dev/testing.md
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json_request)
@example({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "0af7651916cd43dd8448eb211c80319c",
          "spanId": "b7ad6b7169203331", "name": "\ud83d", "attributes": [{"key": "input.value",
          "value": {"stringValue": "half \ud83d emoji"}}]}]}]}]})  # fmt: skip
@example({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "e3e70682c2094caca29f6fbed82c07cd",
          "spanId": "b7ad6b7169203331", "name": "", "attributes": [{"key": "traceloop.entity.input",
          "value": {"stringValue": "CHAIN"}}, {"key": "gen_ai.completion.0.content",
          "value": {"intValue": "0"}}]}]}]}]})  # fmt: skip  # found by this test: a non-text completion
def test_json_decoder_never_crashes(doc: dict[str, Any]) -> None:
    try:
        result = decode_json(_encode(doc))
    except IngestError:
        return
    _check_request(result)


def test_json_literals_decode() -> None:
    for body in LITERAL_JSON:
        result = decode_json(body)
        assert result.rejected_spans == 0
        _check_request(result)


def _seed_payloads() -> list[bytes]:
    d = fixtures_dir()
    return [(d / name).read_bytes() for name in sorted(p.name for p in d.glob("otlp-*.binpb"))]


_mutation = st.tuples(
    st.sampled_from(["flip", "cut", "cut_utf8", "insert"]), st.integers(0, 2**31), st.binary(max_size=4)
)


def _mutate(data: bytes, steps: Sequence[tuple[str, int, bytes]]) -> bytes:
    buf = bytearray(data)
    for kind, pos, extra in steps:
        if not buf:
            break
        i = pos % len(buf)
        if kind == "flip":
            buf[i] ^= 1 << (pos % 8)
        elif kind == "cut":
            del buf[i:]
        elif kind == "cut_utf8":  # overwrite the last byte of a multi-byte character: a cut character
            j = next((k for k in range(i, len(buf)) if buf[k] >= 0xE0), None)
            if j is not None and j + 2 < len(buf):
                buf[j + 2] = 0x21
        else:
            buf[i:i] = extra
    return bytes(buf)


@pytest.mark.integration  # slow check (fuzzer, ~2 s CPU): the integration lane, docs/dev/testing.md
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10), st.lists(_mutation, min_size=1, max_size=3))
def test_protobuf_decoder_never_crashes(which: int, steps: list[tuple[str, int, bytes]]) -> None:
    seeds = _seed_payloads()
    data = _mutate(seeds[which % len(seeds)], steps)
    try:
        result = decode_protobuf(data)
    except IngestError:
        return
    _check_request(result)


# -- through a real receiver, engine and PostgreSQL ----------------------------------------------------------


class _RecordingStore:
    """The real PostgresStore, recording which trace ids the OTLP journal took (the "accepted" set)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self.taken: set[str] = set()

    async def add_pending(self, source: str, items: Sequence[tuple[str, bytes]]) -> None:
        await self._store.add_pending(source, items)
        self.taken.update(k for k, _ in items)

    async def load_pending(self, source: str) -> list[tuple[str, bytes]]:
        return await self._store.load_pending(source)

    async def remove_pending(self, source: str, keys: Sequence[str]) -> None:
        await self._store.remove_pending(source, keys)

    async def dead_letter_pending(self, source: str, key: str, reason: str) -> None:
        await self._store.dead_letter_pending(source, key, reason)


class _Server:
    """Engine + OTLP receivers + PostgreSQL in a background thread with its own event loop."""

    def __init__(self, pg_url: str) -> None:
        self.pg_url = pg_url
        self.port = 0
        self.recording: _RecordingStore | None = None
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._main(),), daemon=True
        )

    async def _main(self) -> None:
        settings = Settings(
            otlp_grpc_address="",
            otlp_http_address="127.0.0.1:0",
            otlp_root_grace_s=0.0,
            otlp_idle_timeout_s=0.2,
        )
        store = await PostgresStore.connect(self.pg_url, settings.store)
        self.recording = _RecordingStore(store)
        self._stop = asyncio.Event()
        try:
            async with (
                Engine({"relevancy": ScriptedJudge("relevancy")}, store, settings.engine) as engine,
                OtlpReceivers(settings.otlp, engine, pending=self.recording) as r,
            ):
                self.port = r.http_port or 0
                self._ready.set()
                await self._stop.wait()
                await engine.drain(60)
        finally:
            await store.close()

    def __enter__(self) -> _Server:
        self._thread.start()
        assert self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(90)


@pytest.fixture
def server(pg_url: str) -> Iterator[_Server]:
    with _Server(pg_url) as s:
        yield s


async def _ids(url: str, sql: str) -> set[str]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return {str(r[0]) for r in await conn.fetch(sql)}
    finally:
        await conn.close()


def test_receiver_accepted_equals_stored_plus_dead_lettered(server: _Server, pg_url: str) -> None:
    statuses: list[int] = []
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as client:

        @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
        @given(_json_request_valid_ids | _json_request)
        def post(doc: dict[str, Any]) -> None:
            resp = client.post(
                "/v1/traces", content=_encode(doc), headers={"Content-Type": "application/json"}
            )
            statuses.append(resp.status_code)
            assert resp.status_code in (200, 400)

        post()
        for body in LITERAL_JSON:
            statuses.append(
                client.post(
                    "/v1/traces", content=body, headers={"Content-Type": "application/json"}
                ).status_code
            )
    assert server.recording is not None
    taken = set(server.recording.taken)
    assert len(taken) >= 50, f"only {len(taken)} traces taken: the property says little"

    async def settled() -> tuple[set[str], set[str]]:
        async def drained() -> bool:
            return await pg_count(pg_url, "SELECT count(*) FROM pending_inputs") == 0

        await wait_until(drained, 30, "every pending trace stored or dead-lettered", interval_s=0.1)
        stored = await _ids(pg_url, "SELECT trace_id FROM traces")
        dead = await _ids(pg_url, "SELECT meta->>'key' FROM dead_letters WHERE source = 'otlp'")
        return stored, dead

    stored, dead = asyncio.run(settled())
    assert 500 not in statuses
    assert stored & dead == set()
    assert taken == stored | dead
