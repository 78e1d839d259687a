"""Issue 23 item 18 on real recordings: the ``developer`` role (what LangChain sends an o-series model instead of
``system``) is read as the instructions/context like ``system``; a Langfuse trace without metadata ``app``
lands under a real app name (a tag ``app:<name>``, the service name the app set, the trace or root observation
name), never the SDK's default ``unknown_service:python``.

The captures are the corpus' own (``tests/conformance/captured``): the three ``system`` cases (passages in the
system message: OpenInference OpenAI, OpenLLMetry OpenAI, openai-v2 log events) with that role renamed the way
each instrumentation records a developer message, and the Langfuse 3 and 5 cases without their metadata app.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from conformance.corpus import capture_spans, check_case, expected
from ragpulse.config import Settings
from ragpulse.ingest.otlp.conventions import TraceBuilder
from ragpulse.ingest.otlp.spans import SpanData
from ragpulse.model import Trace

S = Settings()
SYSTEM_CASES = sorted(n for n, e in expected().items() if e["pattern"] == "system")
LANGFUSE_CASES = sorted(n for n in expected() if n.startswith("langfuse"))


def _build(spans: list[SpanData]) -> Trace:
    return TraceBuilder(S.otlp).build(spans[0].trace_id, spans)


def _as_developer(value: Any) -> Any:
    """``system`` → ``developer`` in a role attribute's value or in a JSON message list (request body)."""
    if value == "system":
        return "developer"
    if isinstance(value, str) and value.startswith(("[", "{")):
        try:
            doc = json.loads(value)
        except ValueError:
            return value
        changed = _developer_messages(doc)
        return json.dumps(changed) if changed != doc else value
    return value


def _developer_messages(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {
            k: ("developer" if k == "role" and v == "system" else _developer_messages(v))
            for k, v in doc.items()
        }
    if isinstance(doc, list):
        return [_developer_messages(v) for v in doc]
    return doc


def _developer(s: SpanData) -> SpanData:
    attrs = {
        k: (_as_developer(v) if k.endswith(".role") or isinstance(v, str) else v)
        for k, v in s.attributes.items()
    }
    events = tuple(
        dataclasses.replace(e, name="gen_ai.developer.message") if e.name == "gen_ai.system.message" else e
        for e in s.events
    )
    return dataclasses.replace(s, attributes=attrs, events=events)


def _roles(spans: list[SpanData]) -> str:
    """Every role-bearing value and event name of ``spans``, as one text (to see what a mutation changed)."""
    parts = [str(v) for s in spans for k, v in s.attributes.items() if "role" in k or "role" in str(v)]
    return " ".join(parts + [e.name for s in spans for e in s.events])


def test_the_corpus_has_system_cases() -> None:
    assert SYSTEM_CASES == ["oi-openai-system", "otel-v2-events-system", "traceloop-openai-system"]


@pytest.mark.parametrize("name", SYSTEM_CASES)
def test_developer_messages_are_read_like_system_messages(name: str) -> None:
    spans = capture_spans(name)
    developer = [_developer(s) for s in spans]
    assert "developer" not in _roles(spans)
    assert "developer" in _roles(developer)  # the mutation reached the instructions
    as_system, as_developer = _build(spans), _build(developer)
    # the passages the app put in the instructions are the context, as with role system
    assert as_developer.contexts == as_system.contexts
    assert (as_developer.question, as_developer.answer) == (as_system.question, as_system.answer)
    res = check_case(name, [as_developer])
    assert res.ok, res.problems


def _without_metadata_app(s: SpanData, **resource: str) -> SpanData:
    attrs = {k: v for k, v in s.attributes.items() if k != "langfuse.trace.metadata.app"}
    return dataclasses.replace(s, attributes=attrs, resource={**s.resource, **resource})


def _on_root(spans: list[SpanData], attrs: dict[str, Any]) -> list[SpanData]:
    """``spans`` with ``attrs`` added to the root span's attributes (where the Langfuse SDK puts trace-level
    attributes of an ``@observe``d function)."""
    return [
        dataclasses.replace(s, attributes={**s.attributes, **attrs}) if s.parent_span_id is None else s
        for s in spans
    ]


@pytest.mark.parametrize("name", LANGFUSE_CASES)
def test_langfuse_app_without_metadata_is_never_unknown_service(name: str) -> None:
    spans = capture_spans(name)
    assert {s.service_name for s in spans} == {"unknown_service:python"}  # the SDK's default, as recorded
    assert _build(spans).app == "hr-assistant"  # metadata app
    bare = [_without_metadata_app(s) for s in spans]
    assert _build(bare).app == "hr-assistant"  # the root observation's name (the app's @observe function)
    named = _on_root(bare, {"langfuse.trace.name": "policy-bot"})
    assert _build(named).app == "policy-bot"
    tagged = _on_root(named, {"langfuse.trace.tags": ["beta", "app:leave-desk"]})
    assert _build(tagged).app == "leave-desk"  # a tag app:<name> names the app
    served = [_without_metadata_app(s, **{"service.name": "hr-portal"}) for s in spans]
    assert _build(served).app == "hr-portal"  # the service name the app set


def test_langfuse_tags_as_json_text_and_scenario_tag() -> None:
    spans = [_without_metadata_app(s) for s in capture_spans("langfuse5-plain")]
    spans = [
        dataclasses.replace(
            s,
            attributes={
                **{k: v for k, v in s.attributes.items() if k != "langfuse.trace.metadata.scenario"},
                "langfuse.trace.tags": json.dumps(["app=leave-desk", "scenario:remote-work"]),
            },
        )
        for s in spans
    ]
    t = _build(spans)
    assert (t.app, t.scenario) == ("leave-desk", "remote-work")
