"""The recorded conformance corpus through the real OTLP/HTTP receiver (issue 23).

Every capture in ``tests/conformance/captured/`` was recorded by ``record.py`` from a real instrumentation
library; ``expected.json`` holds what the app asked, retrieved and got back. Each case must map to that
question, those documents and that answer, and the offline judges must give the scripted verdicts. The
matrix in ``docs/otlp.md`` is regenerated from this run (``REGEN_CONFORMANCE_DOCS=1`` rewrites it; not a ``RAGPULSE_*`` name, which the test session clears).
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from conformance.corpus import (
    CAPTURED,
    SCOPE_PACKAGES,
    CaseResult,
    capture_scopes,
    check_case,
    expected,
    freeze_versions,
    manifest,
    matrix,
    replay_corpus,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "otlp.md"
BEGIN, END = "<!-- conformance-matrix:begin -->", "<!-- conformance-matrix:end -->"

#: Cases that do not map right yet, with the reason (kept honest by ``strict``: a fix makes them XPASS).
KNOWN: dict[str, str] = {}


@cache
def results() -> dict[str, CaseResult]:
    traces = replay_corpus()
    return {name: check_case(name, ts) for name, ts in traces.items()}


@pytest.mark.parametrize("name", sorted(expected()))
def test_case_maps_and_judges_right(name: str) -> None:
    if name in KNOWN:
        pytest.xfail(KNOWN[name])
    r = results()[name]
    assert r.ok, r.problems


@pytest.mark.parametrize("name", sorted(expected()))
def test_capture_scopes_match_manifest(name: str) -> None:
    """Scope names are known instrumentation packages and their versions are the installed ones; the
    resource's ``telemetry.sdk.version`` is the recorder venv's ``opentelemetry-sdk``."""
    man = manifest()
    freeze = freeze_versions(man["cases"][name]["group"], man)
    scopes = capture_scopes(name)
    assert scopes
    for scope, version in scopes:
        assert scope in SCOPE_PACKAGES, scope
        pkg = SCOPE_PACKAGES[scope]
        if pkg and version:
            assert freeze[pkg] == version, (scope, version, freeze[pkg])
    req = ExportTraceServiceRequest.FromString((CAPTURED / f"{name}.binpb").read_bytes())
    for rs in req.resource_spans:
        attrs = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
        assert attrs["telemetry.sdk.name"] == "opentelemetry"
        assert attrs["telemetry.sdk.language"] == "python"
        assert attrs["telemetry.sdk.version"] == freeze["opentelemetry-sdk"]


def test_docs_matrix_is_current() -> None:
    table = matrix(list(results().values()))
    text = DOCS.read_text("utf-8")
    block = f"{BEGIN}\n{table}\n{END}"
    current = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, re.DOTALL)
    if os.environ.get("REGEN_CONFORMANCE_DOCS") == "1":
        new = text.replace(current.group(0), block) if current else text.rstrip() + "\n\n" + block + "\n"
        DOCS.write_text(new, "utf-8")
        return
    assert current is not None, "docs/otlp.md has no conformance matrix: REGEN_CONFORMANCE_DOCS=1 pytest ..."
    assert current.group(0) == block, (
        "docs/otlp.md's conformance matrix is stale: REGEN_CONFORMANCE_DOCS=1 pytest tests/conformance"
    )


@pytest.mark.parametrize("name", ["oi-langchain-condense", "traceloop-langchain-condense"])
def test_follow_up_carries_session_turns_and_tokens(name: str) -> None:
    """The LangChain condense captures (OpenInference and Traceloop): both turns in the app's session, the
    follow-up with the first turn as its history (from the answering call's messages), the answering call's
    tokens (120/17) and the sums over the condense and answer calls (40+120 / 8+17)."""
    traces = replay_corpus([name])[name]
    first, follow = traces
    exp = expected()[name]["turns"]
    assert first.session_id == follow.session_id == exp[0]["session_id"]
    assert "session_id" not in follow.attributes
    assert first.turns == ()
    assert [(t.question, t.answer) for t in follow.turns] == [
        (
            "How long is parental leave?",
            "Parental leave is sixteen weeks at full pay for all permanent employees.",
        )
    ]
    assert (follow.model, follow.prompt_tokens, follow.completion_tokens) == ("gpt-4o-mini", 120, 17)
    assert (follow.total_prompt_tokens, follow.total_completion_tokens) == (160, 25)
    assert [(u.model, u.prompt_tokens, u.completion_tokens, u.calls) for u in follow.usage] == [
        ("gpt-4o-mini", 160, 25, 2)
    ]
