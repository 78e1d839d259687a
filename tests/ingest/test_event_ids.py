"""Issue 25 item 1: a Kafka event's ``traceId``/``testCaseId`` is data that ends up in portal links: a control
character or a ``.``/``..`` path segment is rejected (dead-lettered with reason ``bad_id``), other ids are kept."""

from __future__ import annotations

import json

import pytest

from ragpulse.ingest.events import EventRejected, parse_event


def _event(**fields: str) -> bytes:
    return json.dumps({"question": "q?", "answer": "a.", **fields}).encode()


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("traceId", "../test-sets/victim-set/delete?x=", "bad_id: /traceId: has a '.' or '..' path segment"),
        ("traceId", "a/./b", "bad_id: /traceId: has a '.' or '..' path segment"),
        ("traceId", "t\n1", "bad_id: /traceId: contains a control character"),
        ("testCaseId", "..", "bad_id: /testCaseId: has a '.' or '..' path segment"),
        (
            "traceId",
            "t-\u202e1-t",
            "bad_id: /traceId: contains a bidirectional control character (U+202A–U+202E, U+2066–U+2069)",
        ),
    ],
)
def test_path_like_ids_are_rejected_with_bad_id(field: str, value: str, reason: str) -> None:
    fields = {"traceId": "t-1", field: value}
    if field == "testCaseId":
        fields["runId"] = "r1"
    with pytest.raises(EventRejected) as e:
        parse_event(_event(**fields))
    assert e.value.reason == reason
    assert e.value.code == "bad_id"


@pytest.mark.parametrize("tid", ["a/b", "a%2Fb", "ü", "..x", "x..", "hr/leave-1"])
def test_other_ids_are_kept_as_given(tid: str) -> None:
    assert parse_event(_event(traceId=tid)).trace_id == tid
