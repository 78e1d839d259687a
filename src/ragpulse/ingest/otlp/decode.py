"""Decode OTLP trace payloads (protobuf or OTLP/JSON, optionally gzip) into ``ExportTraceServiceRequest``.

OTLP/JSON follows opentelemetry-proto ``docs/specification.md`` ("JSON Protobuf Encoding"): the proto3 JSON
mapping, except that ``traceId`` / ``spanId`` / ``parentSpanId`` (also in links) are case-insensitive hex
strings (32 / 16 characters). ``google.protobuf.json_format`` would read those hex strings as base64 and
silently produce 24- and 12-byte ids, so ids are converted to bytes here before parsing. Senders in the wild
also send base64 ids: an id that is not hex of the right length is accepted as base64 when it decodes to
exactly 16 / 8 bytes, and rejected otherwise.

Other rules: 64-bit integers may be decimal strings or JSON numbers; an attribute value that does not fit
its kind (a 400-digit ``intValue``, ``doubleValue: 1e400``) is kept as text or as ``Infinity`` instead of
rejecting the span; a span or event time that is not a
``fixed64`` (negative, beyond 2**64 ns, not a number) counts as unset rather than rejecting the span; enums are
integers, names are tolerated;
unknown fields are ignored. A span that cannot be decoded (bad id, wrong types) is dropped and counted in
:attr:`DecodeResult.rejected_spans`; the rest of the request is kept (OTLP partial success).

Text is decoded leniently (:mod:`ragpulse.textclean`): invalid UTF-8 in a JSON body or in a protobuf
``string`` field, and lone surrogates (``"\\ud83d"``) in OTLP/JSON, become U+FFFD, so one cut character never
costs the spans around it. A protobuf payload with bad UTF-8 is parsed a second time with a schema whose
``string`` fields are ``bytes`` (:func:`parse_lenient`), only when the strict parse fails.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from ragpulse.errors import IngestError, PayloadTooLarge
from ragpulse.jsonutil import TooDeep, check_depth
from ragpulse.textclean import decode_utf8, has_escaped_surrogate, repair_json, repair_text

__all__ = [
    "SPAN_ID_BYTES",
    "TRACE_ID_BYTES",
    "DecodeResult",
    "decode_json",
    "decode_protobuf",
    "decompress",
    "id_to_bytes",
    "parse_lenient",
]

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8


@dataclass
class DecodeResult:
    """A decoded request plus what was dropped from it.

    Attributes:
        request: the spans that decoded cleanly.
        rejected_spans: spans dropped because they could not be decoded (bad ids, wrong types).
        errors: short descriptions of the first few problems (for ``partial_success.error_message``).
    """

    request: ExportTraceServiceRequest
    rejected_spans: int = 0
    errors: list[str] = field(default_factory=list)

    def reject(self, message: str, count: int = 1) -> None:
        """Count ``count`` rejected spans and remember ``message`` (the first 5 messages are kept)."""
        self.rejected_spans += count
        if len(self.errors) < 5:
            self.errors.append(message if len(message) <= 200 else message[:199] + "…")


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (``gzip``, ``deflate`` or identity) with a size limit.

    Args:
        body: the raw request body.
        encoding: the ``Content-Encoding`` header value (case-insensitive), ``None`` for identity.
        limit: largest allowed decompressed size, bytes.

    Raises:
        PayloadTooLarge: the decompressed body exceeds ``limit`` (decompression stops there).
        IngestError: unknown encoding or a corrupt compressed stream.
    """
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        if len(body) > limit:
            raise PayloadTooLarge(
                f"payload of {len(body)} bytes exceeds the limit of {limit} bytes", limit=limit
            )
        return body
    if enc == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif enc == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise IngestError(f"unsupported Content-Encoding {encoding!r}")
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise IngestError(f"corrupt {enc} body: {e}") from e
    if len(out) > limit:
        raise PayloadTooLarge(f"decompressed payload exceeds the limit of {limit} bytes", limit=limit)
    if not d.eof:
        raise IngestError(f"truncated {enc} body")
    return out


def decode_protobuf(data: bytes) -> DecodeResult:
    """Parse a binary ``ExportTraceServiceRequest`` and drop spans with ids of the wrong length.

    Raises:
        IngestError: the bytes are not a valid protobuf message.
    """
    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        try:
            req = parse_lenient(data)
        except (DecodeError, RuntimeError, ValueError):
            raise IngestError(f"malformed protobuf payload: {e}") from e
    result = DecodeResult(request=req)
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            keep = []
            for sp in ss.spans:
                problem = _binary_id_problem(sp)
                if problem:
                    result.reject(problem)
                else:
                    keep.append(sp)
            if len(keep) != len(ss.spans):
                del ss.spans[:]
                ss.spans.extend(keep)
    return result


def _lenient_file(fd: Any, pool: descriptor_pool.DescriptorPool, done: set[str]) -> None:
    """Add ``fd`` (and its dependencies) to ``pool`` with every ``string`` field turned into ``bytes``."""
    if fd.name in done:
        return
    for dep in fd.dependencies:
        _lenient_file(dep, pool, done)
    proto = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(proto)
    todo = list(proto.message_type)
    while todo:
        msg = todo.pop()
        todo.extend(msg.nested_type)
        for f in msg.field:
            if f.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
    pool.Add(proto)
    done.add(fd.name)


_LENIENT_POOL = descriptor_pool.DescriptorPool()
_lenient_file(ExportTraceServiceRequest.DESCRIPTOR.file, _LENIENT_POOL, set())
_LENIENT_REQUEST = message_factory.GetMessageClass(
    _LENIENT_POOL.FindMessageTypeByName(ExportTraceServiceRequest.DESCRIPTOR.full_name)
)


def _copy_lenient(src: Message, dst: Message) -> None:
    """Copy ``src`` (lenient schema: strings as bytes) into ``dst`` (the real schema), decoding text fields as
    UTF-8 with U+FFFD for invalid sequences."""
    desc: Descriptor = dst.DESCRIPTOR
    for f, value in src.ListFields():
        target = desc.fields_by_name[f.name]
        if target.type == FieldDescriptor.TYPE_MESSAGE:
            if f.is_repeated:
                box = getattr(dst, f.name)
                for item in value:
                    _copy_lenient(item, box.add())
            else:
                _copy_lenient(value, getattr(dst, f.name))
        elif target.type == FieldDescriptor.TYPE_STRING:
            if f.is_repeated:
                getattr(dst, f.name).extend(decode_utf8(v) for v in value)
            else:
                setattr(dst, f.name, decode_utf8(value))
        elif f.is_repeated:
            getattr(dst, f.name).extend(value)
        else:
            setattr(dst, f.name, value)


def parse_lenient(data: bytes) -> ExportTraceServiceRequest:
    """Parse a binary ``ExportTraceServiceRequest`` whose ``string`` fields may hold invalid UTF-8 (replaced
    by U+FFFD). Slower than ``ParseFromString``: used only after the strict parse failed.

    Raises:
        DecodeError: the bytes are not a protobuf message even with lenient strings.
    """
    loose = _LENIENT_REQUEST()
    loose.ParseFromString(data)
    req = ExportTraceServiceRequest()
    _copy_lenient(loose, req)
    return req


def _binary_id_problem(sp: Span) -> str | None:
    if len(sp.trace_id) != TRACE_ID_BYTES or not any(sp.trace_id):
        return f"span {sp.name!r}: trace id must be {TRACE_ID_BYTES} non-zero bytes"
    if len(sp.span_id) != SPAN_ID_BYTES or not any(sp.span_id):
        return f"span {sp.name!r}: span id must be {SPAN_ID_BYTES} non-zero bytes"
    if sp.parent_span_id and len(sp.parent_span_id) != SPAN_ID_BYTES:
        return f"span {sp.name!r}: parent span id must be {SPAN_ID_BYTES} bytes"
    return None


def id_to_bytes(value: Any, size: int) -> bytes:
    """Decode an OTLP/JSON id: hex of ``2*size`` characters, else base64 decoding to ``size`` bytes.

    ``""`` and ``None`` give ``b""`` (an absent id, e.g. no parent).

    Raises:
        ValueError: neither form fits.
    """
    if value is None or value == "":
        return b""
    if not isinstance(value, str):
        raise ValueError(f"id must be a string, got {type(value).__name__}")
    v = value.strip()
    if len(v) == 2 * size:
        try:
            return bytes.fromhex(v)
        except ValueError:
            pass
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        try:
            raw = base64.urlsafe_b64decode(v + "=" * (-len(v) % 4))
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"id {v[:40]!r} is neither {2 * size} hex characters nor base64") from e
    if len(raw) != size:
        raise ValueError(f"id {v[:40]!r} is neither {2 * size} hex characters nor base64 of {size} bytes")
    return raw


#: proto field names of the id fields → their JSON names (protobuf's JSON parser accepts both spellings).
_CAMEL = {"trace_id": "traceId", "span_id": "spanId", "parent_span_id": "parentSpanId"}


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


_TIME_KEYS = ("startTimeUnixNano", "endTimeUnixNano", "start_time_unix_nano", "end_time_unix_nano")


def _time_or_unset(value: Any) -> Any:
    """A ``fixed64`` time as sent when it fits (0 … 2**64-1 ns), else ``0`` (unset): a negative, huge or
    non-numeric time must not cost the span (the trace then has no time, or the plausibility rule replaces it)."""
    if isinstance(value, bool):
        return 0
    try:
        n = int(value) if isinstance(value, int | str) else int(float(value))
    except (TypeError, ValueError, OverflowError):
        return 0
    return n if 0 <= n < 2**64 else 0


def _event_time_checked(event: dict[str, Any]) -> dict[str, Any]:
    """A span event with its time under the one JSON name ``timeUnixNano`` (either key style accepted), range-checked
    as :func:`_time_or_unset` does; the proto-style key is dropped so the parser never sees the unchecked value."""
    rest = {k: v for k, v in event.items() if k not in ("timeUnixNano", "time_unix_nano")}
    return {**rest, "timeUnixNano": _time_or_unset(event.get("timeUnixNano", event.get("time_unix_nano", 0)))}


def _span_from_json(obj: Any) -> Span:
    """Parse one OTLP/JSON span object (ids converted first). Raises ValueError/ParseError."""
    if not isinstance(obj, dict):
        raise ValueError("span is not an object")
    d = {_CAMEL.get(k, k): v for k, v in obj.items()}
    for key in _TIME_KEYS:
        if key in d:
            d[key] = _time_or_unset(d[key])
    events = d.get("events")
    if isinstance(events, list):
        d["events"] = [_event_time_checked(e) if isinstance(e, dict) else e for e in events]
    trace_id = id_to_bytes(d.get("traceId"), TRACE_ID_BYTES)
    span_id = id_to_bytes(d.get("spanId"), SPAN_ID_BYTES)
    if not trace_id or not any(trace_id):
        raise ValueError("missing or all-zero traceId")
    if not span_id or not any(span_id):
        raise ValueError("missing or all-zero spanId")
    d["traceId"] = _b64(trace_id)
    d["spanId"] = _b64(span_id)
    d["parentSpanId"] = _b64(id_to_bytes(d.get("parentSpanId"), SPAN_ID_BYTES))
    links = d.get("links")
    if isinstance(links, list):
        fixed = []
        for link in links:
            if isinstance(link, dict):
                ln = {_CAMEL.get(k, k): v for k, v in link.items()}
                ln["traceId"] = _b64(id_to_bytes(ln.get("traceId"), TRACE_ID_BYTES))
                ln["spanId"] = _b64(id_to_bytes(ln.get("spanId"), SPAN_ID_BYTES))
                fixed.append(ln)
            else:
                fixed.append(link)
        d["links"] = fixed
    span = Span()
    _parse_lenient_dict(d, span)
    return span


def _parse_lenient_dict(d: Any, msg: Message) -> None:
    """``json_format.ParseDict`` into ``msg``; when that fails, once more after :func:`_loosen_any_values`
    (an ``AnyValue`` that does not fit its kind is kept as text)."""
    try:
        json_format.ParseDict(d, msg, ignore_unknown_fields=True)
    except json_format.ParseError:
        msg.Clear()
        json_format.ParseDict(_loosen_any_values(d), msg, ignore_unknown_fields=True)


def _fits_int64(v: Any) -> bool:
    try:
        n = int(v) if isinstance(v, int | str) and not isinstance(v, bool) else None
    except ValueError:
        return False
    return n is not None and -(2**63) <= n < 2**63


def _fits_double(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int | float):
        return True
    if isinstance(v, str):
        try:
            float(v)
        except ValueError:
            return False
        return True
    return False


def _is_base64(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    try:
        base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        try:
            base64.urlsafe_b64decode(v + "=" * (-len(v) % 4))
        except (binascii.Error, ValueError):
            return False
    return True


def _loosen_any_values(obj: Any) -> Any:
    """``obj`` with every ``AnyValue`` whose ``intValue`` / ``doubleValue`` / ``boolValue`` /
    ``stringValue`` does not fit its kind (a 400-digit integer, ``1e400``, a list) turned into a ``stringValue``
    holding the value's JSON text, and non-finite doubles spelled as proto3 JSON wants them."""
    if isinstance(obj, list):
        return [_loosen_any_values(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: _loosen_any_values(v) for k, v in obj.items()}
    if "intValue" in out and not _fits_int64(out["intValue"]):
        return {"stringValue": json.dumps(out["intValue"], default=str)}
    if "doubleValue" in out:
        v = out["doubleValue"]
        if isinstance(v, float) and not math.isfinite(v):
            return {"doubleValue": "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")}
        if not _fits_double(v):
            return {"stringValue": json.dumps(v, default=str)}
    if "bytesValue" in out and not _is_base64(out["bytesValue"]):
        return {
            "stringValue": out["bytesValue"]
            if isinstance(out["bytesValue"], str)
            else json.dumps(out["bytesValue"], default=str)
        }
    if "boolValue" in out and not isinstance(out["boolValue"], bool):
        return {"stringValue": json.dumps(out["boolValue"], default=str)}
    if "stringValue" in out and not isinstance(out["stringValue"], str):
        return {"stringValue": json.dumps(out["stringValue"], default=str)}
    return out


def _as_list(obj: Any, what: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise IngestError(f"{what} must be a list")
    return obj


def decode_json(data: bytes | str) -> DecodeResult:
    """Parse an OTLP/JSON ``ExportTraceServiceRequest`` (see the module docstring for the rules).

    Keys may be lowerCamelCase (spec) or the proto field names (``resource_spans``, ``trace_id``), which
    ``json_format`` also accepts. Spans that fail to decode are dropped and counted.

    Raises:
        IngestError: the payload is not JSON, is nested deeper than
            :data:`~ragpulse.jsonutil.MAX_JSON_DEPTH` (the message starts ``too_deep``), or its top level /
            resource / scope structure is malformed.
    """
    try:
        return _decode_json(data)
    except TooDeep as e:  # e.g. "[[[[…" or 5,000 nested arrayValues: bad input, not a server fault
        raise IngestError(str(e)) from e
    except RecursionError as e:
        raise IngestError(str(TooDeep())) from e


def _decode_json(data: bytes | str) -> DecodeResult:
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = decode_utf8(data)
    else:
        text = repair_text(data)
    try:
        doc = check_depth(json.loads(text, strict=False))  # a raw control character is not worth a request
    except TooDeep:
        raise
    except ValueError as e:
        raise IngestError(f"malformed JSON payload: {e}") from e
    if has_escaped_surrogate(text):
        doc = repair_json(doc)
    if not isinstance(doc, dict):
        raise IngestError("OTLP/JSON payload must be an object")
    req = ExportTraceServiceRequest()
    result = DecodeResult(request=req)
    for rs_obj in _as_list(doc.get("resourceSpans", doc.get("resource_spans")), "resourceSpans"):
        if not isinstance(rs_obj, dict):
            raise IngestError("resourceSpans entries must be objects")
        rs = ResourceSpans()
        try:
            if rs_obj.get("resource") is not None:
                _parse_lenient_dict(rs_obj["resource"], rs.resource)
            rs.schema_url = str(rs_obj.get("schemaUrl", rs_obj.get("schema_url", "")) or "")
        except (json_format.ParseError, TypeError, ValueError) as e:
            raise IngestError(f"malformed resource: {e}") from e
        for ss_obj in _as_list(rs_obj.get("scopeSpans", rs_obj.get("scope_spans")), "scopeSpans"):
            if not isinstance(ss_obj, dict):
                raise IngestError("scopeSpans entries must be objects")
            ss = ScopeSpans()
            try:
                if ss_obj.get("scope") is not None:
                    _parse_lenient_dict(ss_obj["scope"], ss.scope)
                ss.schema_url = str(ss_obj.get("schemaUrl", ss_obj.get("schema_url", "")) or "")
            except (json_format.ParseError, TypeError, ValueError) as e:
                raise IngestError(f"malformed scope: {e}") from e
            for i, sp_obj in enumerate(_as_list(ss_obj.get("spans"), "spans")):
                try:
                    ss.spans.append(_span_from_json(sp_obj))
                except (json_format.ParseError, TypeError, ValueError) as e:
                    name = sp_obj.get("name") if isinstance(sp_obj, dict) else None
                    result.reject(f"span {name or i!r}: {e}")
            rs.scope_spans.append(ss)
        req.resource_spans.append(rs)
    return result
