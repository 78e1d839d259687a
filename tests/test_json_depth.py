"""Issue 25 item 7: one depth limit (:data:`ragpulse.jsonutil.MAX_JSON_DEPTH`, 64) with one reason, ``too_deep``,
at every JSON entry point: the shared parser, Kafka events, OTLP/JSON and test-set files (the portal's API and
import are tested in tests/portal/test_case_ids_and_writes.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragpulse.errors import IngestError
from ragpulse.ingest.events import EventRejected, parse_event
from ragpulse.ingest.otlp.decode import decode_json
from ragpulse.jsonutil import MAX_JSON_DEPTH, TooDeep, check_depth, strict_loads
from ragpulse.runs.testset_files import TestSetError, read_cases

TOO_DEEP = "too_deep: JSON nested deeper than 64 levels"


def nested(levels: int) -> Any:
    """``levels`` nested arrays around 1 (``nested(2)`` is ``[[1]]``); built without recursion."""
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def test_the_limit_is_64_levels_and_the_reason_is_too_deep() -> None:
    assert MAX_JSON_DEPTH == 64
    assert strict_loads(json.dumps(nested(64))) == nested(64)
    with pytest.raises(TooDeep) as e:
        strict_loads(json.dumps(nested(65)))
    assert str(e.value) == TOO_DEEP
    with pytest.raises(TooDeep):  # the parser's own stack overflow is the same reason
        strict_loads("[" * 50_000 + "]" * 50_000)
    assert check_depth({"a": nested(63)}) == {"a": nested(63)}
    with pytest.raises(TooDeep):
        check_depth({"a": nested(64)})


def _event(levels: int) -> bytes:
    # event (1) → attributes (2) → the value: levels in all
    return json.dumps(
        {"traceId": "t-deep", "question": "q?", "answer": "a.", "attributes": {"x": nested(levels - 2)}}
    ).encode()


def test_kafka_event_at_the_limit_is_taken_one_above_is_rejected_too_deep() -> None:
    assert parse_event(_event(64)).trace_id == "t-deep"
    with pytest.raises(EventRejected) as e:
        parse_event(_event(65))
    assert e.value.reason == TOO_DEEP
    with pytest.raises(EventRejected) as e:
        parse_event(("[" * 50_000 + "]" * 50_000).encode())
    assert e.value.reason == TOO_DEEP


def test_otlp_json_at_the_limit_decodes_one_above_is_too_deep() -> None:
    ok = decode_json(json.dumps({"resourceSpans": [], "x": nested(63)}))
    assert len(ok.request.resource_spans) == 0
    with pytest.raises(IngestError) as e:
        decode_json(json.dumps({"resourceSpans": [], "x": nested(64)}))
    assert str(e.value) == TOO_DEEP


def test_test_set_files_reject_the_deep_row_with_too_deep() -> None:
    row_ok = json.dumps({"id": "ok", "question": "q?", "meta": nested(63)})
    row_deep = json.dumps({"id": "deep", "question": "q?", "meta": nested(64)})
    got = read_cases(f"{row_ok}\n{row_deep}\n", "jsonl", label="body", collect=True)
    assert [c.id for _, c in got.cases] == ["ok"]
    assert [(p.line, p.reason) for p in got.rejected] == [(2, TOO_DEEP)]
    with pytest.raises(TestSetError) as e:  # a JSON document: the outer array is level 1
        read_cases(json.dumps([{"id": "d", "question": "q?", "meta": nested(63)}]), "json", label="body")
    assert str(e.value) == f"body:1: {TOO_DEEP}"
