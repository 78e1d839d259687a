"""OTLP/JSON attribute values that do not fit their kind keep the span: each is kept as the text of the value
(or a non-finite double in proto3's spelling), and a value that fits is kept as sent — checked at the edges of
each kind (int64's range, base64, JSON types), where the mutation run found no test looking."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from ragpulse.ingest.otlp.decode import decode_json

TID = "0af7651916cd43dd8448eb211c80319c"
SID = "b7ad6b7169203331"


def _decoded(value: Any, *, rest: dict[str, Any] | None = None) -> dict[str, Any]:
    """The AnyValue that ``decode_json`` made of attribute ``a`` = ``value`` (next to ``rest``, one attribute
    that does not fit, so the span takes the lenient path)."""
    attributes = [{"key": "a", "value": value}]
    if rest is not None:
        attributes.append({"key": "misfit", "value": rest})
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {"spans": [{"traceId": TID, "spanId": SID, "name": "s", "attributes": attributes}]}
                ]
            }
        ]
    }
    result = decode_json(json.dumps(doc))
    assert result.rejected_spans == 0, result.errors
    (span,) = result.request.resource_spans[0].scope_spans[0].spans
    got: dict[str, Any] = MessageToDict(span.attributes[0].value)
    return got


MISFIT = {"intValue": "not a number"}


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ({"intValue": str(2**63 - 1)}, {"intValue": str(2**63 - 1)}),
        ({"intValue": str(-(2**63))}, {"intValue": str(-(2**63))}),
        ({"intValue": str(2**63)}, {"stringValue": json.dumps(str(2**63))}),
        ({"intValue": str(-(2**63) - 1)}, {"stringValue": json.dumps(str(-(2**63) - 1))}),
        ({"intValue": 7}, {"intValue": "7"}),
        ({"intValue": "seven"}, {"stringValue": '"seven"'}),
        ({"intValue": True}, {"stringValue": "true"}),
        ({"intValue": 1.5}, {"stringValue": "1.5"}),
        ({"doubleValue": 0.25}, {"doubleValue": 0.25}),
        ({"doubleValue": "0.5"}, {"doubleValue": 0.5}),
        ({"doubleValue": 3}, {"doubleValue": 3.0}),
        ({"doubleValue": "half"}, {"stringValue": '"half"'}),
        ({"doubleValue": False}, {"stringValue": "false"}),
        ({"doubleValue": [1]}, {"stringValue": "[1]"}),
        ({"bytesValue": "aGk="}, {"bytesValue": "aGk="}),
        ({"bytesValue": "aGk"}, {"bytesValue": "aGk="}),  # url-safe base64 without padding is still bytes
        ({"bytesValue": "not base64!"}, {"stringValue": "not base64!"}),
        ({"bytesValue": 12}, {"stringValue": "12"}),
        ({"boolValue": True}, {"boolValue": True}),
        ({"boolValue": "yes"}, {"stringValue": '"yes"'}),
        ({"stringValue": "text"}, {"stringValue": "text"}),
        ({"stringValue": 5}, {"stringValue": "5"}),
        ({"stringValue": {"k": 1}}, {"stringValue": '{"k": 1}'}),
        (
            {"arrayValue": {"values": [{"intValue": str(2**63)}, {"boolValue": False}]}},
            {"arrayValue": {"values": [{"stringValue": json.dumps(str(2**63))}, {"boolValue": False}]}},
        ),
        (
            {"kvlistValue": {"values": [{"key": "n", "value": {"stringValue": 1}}]}},
            {"kvlistValue": {"values": [{"key": "n", "value": {"stringValue": "1"}}]}},
        ),
    ],
)
def test_a_value_that_fits_is_kept_one_that_does_not_becomes_its_text(
    value: dict[str, Any], kept: dict[str, Any]
) -> None:
    assert _decoded(value, rest=MISFIT) == kept


@pytest.mark.parametrize(
    ("literal", "spelled"), [("1e400", "Infinity"), ("-1e400", "-Infinity"), ("NaN", "NaN")]
)
def test_non_finite_doubles_are_kept_as_proto3_spells_them(literal: str, spelled: str) -> None:
    doc_text = json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": TID,
                                    "spanId": SID,
                                    "name": "s",
                                    "attributes": [{"key": "a", "value": {"doubleValue": "@"}}],
                                }
                            ]
                        }
                    ]
                }
            ]
        }
    ).replace('"@"', literal)
    result = decode_json(doc_text)
    assert result.rejected_spans == 0
    (span,) = result.request.resource_spans[0].scope_spans[0].spans
    assert MessageToDict(span.attributes[0].value) == {"doubleValue": spelled}


def test_the_misfit_itself_is_kept_as_text() -> None:
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": TID,
                                "spanId": SID,
                                "name": "s",
                                "attributes": [{"key": "misfit", "value": MISFIT}],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    (span,) = decode_json(json.dumps(doc)).request.resource_spans[0].scope_spans[0].spans
    assert MessageToDict(span.attributes[0].value) == {"stringValue": '"not a number"'}
