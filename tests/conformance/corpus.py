"""Replay the recorded conformance corpus (``tests/conformance/captured/``) through the real OTLP/HTTP
receiver and compare what ragpulse maps with what the recording apps did (``expected.json``).

:func:`replay_corpus` posts every capture (``<case>.binpb`` to ``/v1/traces``, ``<case>.logs.binpb`` to
``/v1/logs`` when present) to an :class:`~ragpulse.ingest.otlp.receivers.OtlpReceivers` on a loopback
port and collects the traces handed to the sink; :func:`check_case` compares them turn by turn (traces in
start order) and runs the offline judges. :func:`matrix` renders the result table for ``docs/otlp.md``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragpulse.config import Settings
from ragpulse.ingest.otlp.logs import decode_logs_protobuf
from ragpulse.ingest.otlp.receivers import OtlpReceivers
from ragpulse.ingest.otlp.spans import SpanData, request_to_spans
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.judges.answer.relevancy import HeuristicRelevancyJudge
from ragpulse.model import JudgementStatus, Trace
from ragpulse.protocols import AckCallback

CAPTURED = Path(__file__).resolve().parent / "captured"
PROTOBUF = {"content-type": "application/x-protobuf"}


def expected() -> dict[str, Any]:
    """``expected.json``: case name → ``{group, pattern, case, turns: [{question, documents, documents_in,
    answer, usage, session_id, faithful}], requests, app}`` (written by ``record.py``)."""
    data: dict[str, Any] = json.loads((CAPTURED / "expected.json").read_text("utf-8"))
    return data


def manifest() -> dict[str, Any]:
    """``manifest.json``: ``recorder`` command, ``venvs`` (group → requirements, pip freeze), ``cases``."""
    data: dict[str, Any] = json.loads((CAPTURED / "manifest.json").read_text("utf-8"))
    return data


def capture_spans(name: str) -> list[SpanData]:
    """The spans of capture ``name`` decoded in process (``<name>.binpb``, plus the carrier spans of
    ``<name>.logs.binpb`` when present), for tests that change a recording before mapping it."""
    req = ExportTraceServiceRequest.FromString((CAPTURED / f"{name}.binpb").read_bytes())
    spans = request_to_spans(req, "ragpulse").spans
    logs = CAPTURED / f"{name}.logs.binpb"
    if logs.exists():
        spans += request_to_spans(decode_logs_protobuf(logs.read_bytes()).traces.request, "ragpulse").spans
    return spans


class _Sink:
    def __init__(self) -> None:
        self.traces: list[Trace] = []
        self.changed = asyncio.Event()

    async def submit(self, trace: Trace, ack: AckCallback | None = None) -> None:
        self.traces.append(trace)
        self.changed.set()

    def has_room(self) -> bool:
        return True


async def _replay(names: list[str]) -> dict[str, list[Trace]]:
    settings = Settings(
        otlp_grpc_address="",
        otlp_http_address="127.0.0.1:0",
        otlp_root_grace_s=0.05,
        otlp_idle_timeout_s=0.5,
    )
    sink = _Sink()
    out: dict[str, list[Trace]] = {}
    async with OtlpReceivers(settings.otlp, sink) as r, httpx.AsyncClient() as client:
        base = f"http://127.0.0.1:{r.http_port}"
        for name in names:
            want = len(expected()[name]["turns"])
            before = len(sink.traces)
            logs = CAPTURED / f"{name}.logs.binpb"
            if logs.exists():
                resp = await client.post(f"{base}/v1/logs", content=logs.read_bytes(), headers=PROTOBUF)
                # 404: a ragpulse without a logs receiver (to measure the corpus before it); the case then fails
                assert resp.status_code in (200, 404), (name, resp.status_code, resp.content[:200])
            body = (CAPTURED / f"{name}.binpb").read_bytes()
            resp = await client.post(f"{base}/v1/traces", content=body, headers=PROTOBUF)
            assert resp.status_code == 200, (name, resp.status_code, resp.content[:200])
            async with asyncio.timeout(5):
                while len(sink.traces) - before < want:
                    sink.changed.clear()
                    await sink.changed.wait()
            await asyncio.sleep(0.1)  # a stray extra trace would show up here
            out[name] = sorted(
                sink.traces[before:], key=lambda t: (t.start_time is None, t.start_time or t.end_time)
            )
    return out


def replay_corpus(names: list[str] | None = None) -> dict[str, list[Trace]]:
    """Every capture (or ``names``) through a real OTLP/HTTP receiver; case name → traces in start order."""
    return asyncio.run(_replay(sorted(names or expected())))


@dataclass
class CaseResult:
    """One case's comparison: per field, whether every turn mapped right, and the mismatches."""

    name: str
    question: bool = True
    documents: bool = True
    answer: bool = True
    judged: bool = True
    app: bool = True
    tokens: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.question and self.documents and self.answer and self.judged and self.app and self.tokens


_S = Settings()


def check_case(name: str, traces: list[Trace]) -> CaseResult:
    """Compare ``traces`` (start order) with the case's turns; judge with the offline judges.

    Reasoning: when the app's reply started with ``<think>…</think>`` (``app.raw_answer``), the answer is the
    final text only and the reasoning is kept in the trace's ``attributes["reasoning"]``.

    Documents: for ``documents_in == "retriever"`` the trace's documents must be the app's, ids and texts in
    order (ids: the app's document ids, or, for an instrumentation that does not export them, the ``source``
    metadata the app gave each document); for ``prompt``/``system`` (passages pasted into a message) every passage text must be in the context
    ragpulse judges against (``Trace.contexts``). Verdicts: a faithful turn passes heuristic faithfulness and
    relevancy, an unfaithful one fails faithfulness; a ``not_evaluable`` trace is not judged (a miss). App and
    session: the trace's ``app`` is the app's service (``hr-assistant``; Langfuse: its metadata ``app``), its
    ``session_id`` the session the app set, if any, and its ``turns`` (when the answering call carried the
    history) the case's earlier turns, questions and answers in order. Tokens: the usage the app recorded is
    the answering call's tokens (``prompt_tokens``/``completion_tokens``), or for an agent, which sums every
    model call of its loop, the trace's totals; the totals are the sum of the per-model ``usage``.
    """
    exp = expected()[name]
    res = CaseResult(name)
    if len(traces) > len(exp["turns"]):
        # traces that are no request (OpenLLMetry's one-span "create_agent" trace when an agent is built) map to
        # neither question nor answer and are not judged (not_evaluable): they do not count as turns
        traces = [t for t in traces if t.question is not None or t.answer is not None]
    if len(traces) != len(exp["turns"]):
        res.question = res.documents = res.answer = res.judged = False
        res.problems.append(f"{len(traces)} traces for {len(exp['turns'])} turns")
        return res
    app = exp["case"].get("service", "hr-assistant")  # the apps' service / Langfuse metadata app
    for i, (t, turn) in enumerate(zip(traces, exp["turns"], strict=True)):
        session = t.session_id
        if t.app != app or (turn["session_id"] is not None and session != turn["session_id"]):
            res.app = False
            res.problems.append(f"turn {i} app {t.app!r} session {session!r}")
        earlier = [(u["question"], u["answer"]) for u in exp["turns"][:i]]
        got_turns = [(u.question, u.answer) for u in t.turns]
        if got_turns and got_turns != earlier[-len(got_turns) :]:
            res.app = False
            res.problems.append(f"turn {i} turns {got_turns!r}")
        usage = turn["usage"]
        if usage is not None:
            want_tokens = (usage["prompt_tokens"], usage["completion_tokens"])
            agent = exp["case"]["pattern"] == "agent"
            tokens = (
                (t.total_prompt_tokens, t.total_completion_tokens)
                if agent
                else (t.prompt_tokens, t.completion_tokens)
            )
            summed = (sum(u.prompt_tokens for u in t.usage), sum(u.completion_tokens for u in t.usage))
            if tokens != want_tokens or summed != (t.total_prompt_tokens, t.total_completion_tokens):
                res.tokens = False
                res.problems.append(f"turn {i} tokens {tokens} (usage {summed}), app recorded {want_tokens}")
        if t.question != turn["question"]:
            res.question = False
            res.problems.append(f"turn {i} question {t.question!r}")
        if t.answer != turn["answer"]:
            res.answer = False
            res.problems.append(f"turn {i} answer {t.answer!r}")
        raw = exp["app"].get("raw_answer")  # a reply with <think>…</think>: the reasoning stays on the trace
        if (
            raw
            and t.attributes.get("reasoning") != raw.split("<think>", 1)[-1].split("</think>", 1)[0].strip()
        ):
            res.answer = False
            res.problems.append(f"turn {i} reasoning {t.attributes.get('reasoning')!r}")
        if turn["documents_in"] == "retriever":
            got = [(d.id, d.content) for d in t.documents]
            want = [(d["id"], d["text"]) for d in turn["documents"]]
            # an instrumentation that does not export the document id leaves the app's metadata "source"
            alt = [(d.get("source", d["id"]), d["text"]) for d in turn["documents"]]
            if got not in (want, alt):
                res.documents = False
                res.problems.append(f"turn {i} documents {got!r}")
        else:
            ctx = "\n".join(t.contexts)
            if not all(d["text"] in ctx for d in turn["documents"]):
                res.documents = False
                res.problems.append(f"turn {i} context {ctx[:200]!r}")
        if t.not_evaluable or t.error:
            res.judged = False
            res.problems.append(f"turn {i} not_evaluable {t.not_evaluable} error {t.error}")
            continue
        faith = HeuristicFaithfulnessJudge(_S, {}).evaluate(t)
        rel = HeuristicRelevancyJudge(_S, {}).evaluate(t)
        if faith.status is not JudgementStatus.OK or rel.status is not JudgementStatus.OK:
            res.judged = False
            res.problems.append(f"turn {i} judges {faith.status}/{rel.status}: {faith.reason} / {rel.reason}")
        elif turn["faithful"] and not (faith.passed and rel.passed):
            res.judged = False
            res.problems.append(f"turn {i} faithful case judged faith={faith.score} rel={rel.score}")
        elif not turn["faithful"] and faith.passed:
            res.judged = False
            res.problems.append(f"turn {i} unfaithful case passed faithfulness ({faith.score})")
    return res


def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def matrix(results: list[CaseResult]) -> str:
    """The conformance matrix (Markdown): stack, versions, pattern → question / documents / answer / judged."""
    exp = expected()
    man = manifest()
    lines = [
        "| case | instrumentation (version) | pattern | question | documents | answer | app / session | tokens "
        "| judged |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: r.name):
        versions = ", ".join(scope_versions(r.name, man))
        case = exp[r.name]["case"]
        pattern = case["pattern"]
        pattern += " (two services)" if case.get("two_services") else ""
        pattern += " (reasoning)" if case.get("strip_think") else ""
        pattern += " (unfaithful)" if not exp[r.name]["turns"][0]["faithful"] else ""
        cells = [
            _mark(r.question),
            _mark(r.documents),
            _mark(r.answer),
            _mark(r.app),
            _mark(r.tokens),
            _mark(r.judged),
        ]
        lines.append(f"| `{r.name}` | {versions} | {pattern} | " + " | ".join(cells) + " |")
    n_ok = sum(r.ok for r in results)
    lines.append("")
    lines.append(f"{n_ok} of {len(results)} cases map and judge right.")
    return "\n".join(lines)


#: Instrumentation scope name prefix → the package that emits it (the scope version is the package's).
SCOPE_PACKAGES = {
    "openinference.instrumentation.openai": "openinference-instrumentation-openai",
    "openinference.instrumentation.langchain": "openinference-instrumentation-langchain",
    "openinference.instrumentation.llama_index": "openinference-instrumentation-llama-index",
    "openinference.instrumentation.dspy": "openinference-instrumentation-dspy",
    "openinference.instrumentation.haystack": "openinference-instrumentation-haystack",
    "opentelemetry.instrumentation.openai_v2": "opentelemetry-instrumentation-openai-v2",
    "opentelemetry.instrumentation.openai.v1": "opentelemetry-instrumentation-openai",
    "opentelemetry.instrumentation.langchain": "opentelemetry-instrumentation-langchain",
    "opentelemetry.instrumentation.llamaindex": "opentelemetry-instrumentation-llamaindex",
    "langfuse-sdk": "langfuse",
    "gateway.http": "",  # the recorder apps' own front service (a plain SDK tracer, no package)
}


def freeze_versions(group: str, man: dict[str, Any]) -> dict[str, str]:
    """Package name (lower case) → version from the group's ``pip freeze``."""
    out = {}
    for line in man["venvs"][group]["freeze"]:
        if "==" in line:
            pkg, ver = line.split("==", 1)
            out[pkg.lower().replace("_", "-")] = ver
    return out


def capture_scopes(name: str) -> set[tuple[str, str]]:
    """``(scope name, scope version)`` of every span and log record in a capture."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest.FromString((CAPTURED / f"{name}.binpb").read_bytes())
    scopes = {(ss.scope.name, ss.scope.version) for rs in req.resource_spans for ss in rs.scope_spans}
    logs = CAPTURED / f"{name}.logs.binpb"
    if logs.exists():
        lreq = ExportLogsServiceRequest.FromString(logs.read_bytes())
        scopes |= {(sl.scope.name, sl.scope.version) for rl in lreq.resource_logs for sl in rl.scope_logs}
    return scopes


def scope_versions(name: str, man: dict[str, Any]) -> list[str]:
    """``package version`` of the instrumentation packages a capture's scopes come from (freeze versions)."""
    freeze = freeze_versions(man["cases"][name]["group"], man)
    out = set()
    for scope, _ in capture_scopes(name):
        pkg = SCOPE_PACKAGES.get(scope)
        if pkg:
            out.add(f"{pkg} {freeze.get(pkg, '?')}")
    return sorted(out)
