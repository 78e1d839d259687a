"""Record the conformance corpus: real instrumentation libraries, small RAG apps, captured OTLP requests.

Run by hand (``docs/dev/testing.md``)::

    .venv/bin/python tests/conformance/record.py            # every case
    .venv/bin/python tests/conformance/record.py oi-openai-prompt traceloop-langchain-plain

For each venv group in :data:`VENVS` the recorder creates ``.recorder-venv[-<group>]`` in the repository
(git-ignored) and ``pip install``\\ s the pinned requirements. Each case runs one app of ``apps/`` as a
subprocess under its group's venv, with ``OPENAI_BASE_URL`` pointing at a
:class:`~ragpulse.testing.openai_server.ScriptedOpenAIServer` (answers scripted per case) and
``OTEL_EXPORTER_OTLP_ENDPOINT`` at a loopback capture server that stores every OTLP/HTTP export request
(``/v1/traces`` and ``/v1/logs``). Written to ``tests/conformance/captured/``:

- ``<case>.binpb``: the trace export requests concatenated (protobuf concatenation merges repeated fields, so
  the file is one ``ExportTraceServiceRequest``) and ``<case>.json``, its OTLP/JSON form;
- ``<case>.logs.binpb`` / ``<case>.logs.json``: the same for log export requests, when the app sent any;
- ``expected.json``: per case, from the app's own record (``RECORD_OUT``: per turn the question it asked,
  the documents its retriever returned or it pasted into the prompt, the answer and usage the server gave
  it) plus the verdicts the case was scripted for (``faithful``) and the session id the app set;
- ``manifest.json``: the recorder command, per venv group the exact ``pip freeze``, per case its group, app
  and arguments.

Nothing here reads ragpulse's mapping: expected values come from the apps.
"""

from __future__ import annotations

import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ragpulse.testing.openai_server import RecordedRequest, Reply, ScriptedOpenAIServer

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUT = HERE / "captured"
APPS = HERE / "apps"

#: venv group → pinned requirements (the instrumentation under test and what its apps need).
VENVS: dict[str, list[str]] = {
    "main": [
        "openai==3.60.0",
        "openinference-instrumentation-openai==0.1.66",
        "openinference-instrumentation-langchain==0.1.80",
        "langchain-core==1.8.3",
        "langchain-openai==1.8.1",
        "traceloop-sdk==0.62.4",
        "langchain==1.5.2",
        "opentelemetry-sdk==1.45.1",
        "opentelemetry-exporter-otlp-proto-http==1.45.1",
        "langfuse==5.2.0",
    ],
    # its own venv: opentelemetry-util-genai as openai-v2 needs it (traceloop-sdk pins an older one)
    "otelv2": [
        "openai==3.60.0",
        # 2.4b0 (newest) imports opentelemetry.util.genai.instruments, which no util-genai release has
        "opentelemetry-instrumentation-openai-v2==2.3b0",
        "opentelemetry-util-genai==1.2b0",
        "wrapt<2",  # 2.3b0 calls wrap_function_wrapper(module=...), which wrapt 2 renamed
        "httpx",  # openai-v2 imports httpx; openai 3 no longer brings it
        "opentelemetry-sdk==1.45.1",
        "opentelemetry-exporter-otlp-proto-http==1.45.1",
    ],
    "langfuse3": ["langfuse==3.15.0", "openai==3.60.0"],
    "haystack": [
        "haystack-ai==3.4.1",
        "openinference-instrumentation-haystack==0.1.46",
        "opentelemetry-sdk==1.45.1",
        "opentelemetry-exporter-otlp-proto-http==1.45.1",
    ],
    "dspy": [
        "dspy==3.4.1",
        "openinference-instrumentation-dspy==0.1.48",
        "opentelemetry-sdk==1.45.1",
        "opentelemetry-exporter-otlp-proto-http==1.45.1",
    ],
    "llamaindex": [
        "llama-index-core==0.14.25",
        "llama-index-llms-openai",
        "openinference-instrumentation-llama-index==4.6.1",
        "opentelemetry-sdk==1.45.1",
        "opentelemetry-exporter-otlp-proto-http==1.45.1",
    ],
}


def venv_dir(group: str) -> Path:
    return REPO / (".recorder-venv" if group == "main" else f".recorder-venv-{group}")


def ensure_venv(group: str) -> Path:
    """Create the group's venv when missing and install its pinned requirements; returns its python."""
    d = venv_dir(group)
    py = d / "bin" / "python"
    if not py.exists():
        venv.create(d, with_pip=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *VENVS[group]], check=True)
    return py


def pip_freeze(py: Path) -> list[str]:
    out = subprocess.run([str(py), "-m", "pip", "freeze"], check=True, capture_output=True, text=True)
    return sorted(line for line in out.stdout.splitlines() if line.strip())


class Capture:
    """A loopback OTLP/HTTP capture server: stores ``(path, body)`` of every POST, answers an empty 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, bytes]] = []
        lock = threading.Lock()
        store = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding", "").lower() == "gzip":
                    body = gzip.decompress(body)
                with lock:
                    store.append((self.path, body))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Capture:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


FAITHFUL_REMOTE = "Employees on probation may work remotely up to two days per week with manager approval."
UNFAITHFUL_REMOTE = "Probation staff get unlimited remote work and a monthly travel stipend of 500 euros."
Q_REMOTE = "How many days per week can I work remotely while on probation?"
Q_LEAVE = "How long is parental leave?"
A_LEAVE = "Parental leave is sixteen weeks at full pay for all permanent employees."
Q_LEAVE_2 = "Is it paid in full?"
CONDENSED_2 = "Is parental leave paid in full?"
A_LEAVE_2 = "Yes, parental leave is paid at full pay for all permanent employees."
Q_VPN = "How often must the VPN client be updated?"
A_VPN = "The VPN client must be updated every ninety days by the IT service desk."
THINK = (
    "<think>The user asks about the VPN. Maybe quarterly, maybe monthly; the passage says ninety days, "
    "so I should quote it and mention the service desk.</think>\n"
)


def case(
    name: str,
    group: str,
    app: str,
    args: list[str],
    *,
    pattern: str,
    turns: list[str],
    answers: list[str],
    faithful: list[bool],
    rules: list[tuple[str, str]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One case: the app, its arguments and environment case, and the scripted server's behaviour.

    ``answers[i]`` answers the request whose prompt holds ``turns[i]`` (the last such turn wins); ``rules``
    (``(substring, reply)``) are tried first, e.g. for a condense-question call.
    """
    return {
        "name": name,
        "group": group,
        "app": app,
        "args": args,
        "case": {"pattern": pattern, "turns": turns, **extra},
        "answers": answers,
        "faithful": faithful,
        "rules": rules or [],
    }


def _openai_cases(stack: str, inst: str, group: str = "main") -> list[dict[str, Any]]:
    app = "openai_app.py"
    out = [
        case(
            f"{stack}-prompt",
            group,
            app,
            [inst],
            pattern="prompt",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
        ),
        case(
            f"{stack}-prompt-unfaithful",
            group,
            app,
            [inst],
            pattern="prompt",
            turns=[Q_REMOTE],
            answers=[UNFAITHFUL_REMOTE],
            faithful=[False],
        ),
        case(
            f"{stack}-system",
            group,
            app,
            [inst],
            pattern="system",
            turns=[Q_LEAVE],
            answers=[A_LEAVE],
            faithful=[True],
        ),
        case(
            f"{stack}-stream",
            group,
            app,
            [inst],
            pattern="stream",
            turns=[Q_VPN],
            answers=[A_VPN],
            faithful=[True],
        ),
    ]
    if True:
        out += [
            case(
                f"{stack}-reasoning",
                group,
                app,
                [inst],
                pattern="prompt",
                turns=[Q_VPN],
                answers=[THINK + A_VPN],
                faithful=[True],
                strip_think=True,
            ),
            case(
                f"{stack}-two-services",
                group,
                app,
                [inst],
                pattern="prompt",
                turns=[Q_REMOTE],
                answers=[FAITHFUL_REMOTE],
                faithful=[True],
                two_services=True,
            ),
        ]
    return out


def _langchain_cases(stack: str, inst: str) -> list[dict[str, Any]]:
    app = "langchain_app.py"
    condense = [("standalone question", CONDENSED_2)]
    return [
        case(
            f"{stack}-plain",
            "main",
            app,
            [inst],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
        ),
        case(
            f"{stack}-plain-unfaithful",
            "main",
            app,
            [inst],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[UNFAITHFUL_REMOTE],
            faithful=[False],
        ),
        case(
            f"{stack}-condense",
            "main",
            app,
            [inst],
            pattern="condense",
            turns=[Q_LEAVE, Q_LEAVE_2],
            answers=[A_LEAVE, A_LEAVE_2],
            faithful=[True, True],
            rules=condense,
        ),
        case(
            f"{stack}-stream",
            "main",
            app,
            [inst],
            pattern="stream",
            turns=[Q_VPN],
            answers=[A_VPN],
            faithful=[True],
        ),
        case(
            f"{stack}-two-services",
            "main",
            app,
            [inst],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
            two_services=True,
        ),
        case(
            f"{stack}-agent",
            "main",
            app,
            [inst],
            pattern="agent",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
            tool_call="search_kb",
        ),
        case(
            f"{stack}-agent-unfaithful",
            "main",
            app,
            [inst],
            pattern="agent",
            turns=[Q_REMOTE],
            answers=[UNFAITHFUL_REMOTE],
            faithful=[False],
            tool_call="search_kb",
        ),
    ]


def _langfuse_cases(stack: str, group: str) -> list[dict[str, Any]]:
    app = "langfuse_app.py"
    return [
        case(
            f"{stack}-plain",
            group,
            app,
            [],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
        ),
        case(
            f"{stack}-plain-unfaithful",
            group,
            app,
            [],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[UNFAITHFUL_REMOTE],
            faithful=[False],
        ),
    ]


def _llamaindex_cases(stack: str, inst: str) -> list[dict[str, Any]]:
    app = "llamaindex_app.py"
    condense = [("Standalone question", CONDENSED_2), ("standalone question", CONDENSED_2)]
    return [
        case(
            f"{stack}-agent",
            "llamaindex",
            app,
            [inst],
            pattern="agent",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
            tool_call="search_kb",
        ),
        case(
            f"{stack}-plain",
            "llamaindex",
            app,
            [inst],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
        ),
        case(
            f"{stack}-plain-unfaithful",
            "llamaindex",
            app,
            [inst],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[UNFAITHFUL_REMOTE],
            faithful=[False],
        ),
        case(
            f"{stack}-stream",
            "llamaindex",
            app,
            [inst],
            pattern="stream",
            turns=[Q_VPN],
            answers=[A_VPN],
            faithful=[True],
        ),
        case(
            f"{stack}-condense",
            "llamaindex",
            app,
            [inst],
            pattern="condense",
            turns=[Q_LEAVE, Q_LEAVE_2],
            answers=[A_LEAVE, A_LEAVE_2],
            faithful=[True, True],
            rules=condense,
        ),
    ]


def _haystack_cases(stack: str, inst: str) -> list[dict[str, Any]]:
    app = "haystack_app.py"
    return [
        case(
            f"{stack}-plain",
            "haystack",
            app,
            [inst],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
        ),
        case(
            f"{stack}-plain-unfaithful",
            "haystack",
            app,
            [inst],
            pattern="plain",
            turns=[Q_REMOTE],
            answers=[UNFAITHFUL_REMOTE],
            faithful=[False],
        ),
        case(
            f"{stack}-prompt",
            "haystack",
            app,
            [inst],
            pattern="prompt",
            turns=[Q_VPN],
            answers=[A_VPN],
            faithful=[True],
        ),
    ]


def _dspy_cases(stack: str, inst: str) -> list[dict[str, Any]]:
    app = "dspy_app.py"
    return [
        case(
            f"{stack}-prompt",
            "dspy",
            app,
            [inst],
            pattern="prompt",
            turns=[Q_REMOTE],
            answers=[FAITHFUL_REMOTE],
            faithful=[True],
            dspy=True,
        ),
        case(
            f"{stack}-prompt-unfaithful",
            "dspy",
            app,
            [inst],
            pattern="prompt",
            turns=[Q_REMOTE],
            answers=[UNFAITHFUL_REMOTE],
            faithful=[False],
            dspy=True,
        ),
        case(
            f"{stack}-react",
            "dspy",
            app,
            [inst],
            pattern="react",
            turns=[Q_VPN],
            answers=[A_VPN],
            faithful=[True],
            dspy=True,
        ),
    ]


def _dspy_reply(req: RecordedRequest, c: dict[str, Any], answer: str) -> Reply:
    """DSPy's chat-adapter format: a ReAct step (search once, then finish) or a reasoning + answer."""
    system = next((str(m.get("content")) for m in req.messages if m.get("role") == "system"), "")
    user = req.user_text
    if "next_tool_name" in system:
        if "observation_0" in user:
            fields = {
                "next_thought": "I have the passage.",
                "next_tool_name": "finish",
                "next_tool_args": "{}",
            }
        else:
            args = json.dumps({"query": c["case"]["turns"][-1]})
            fields = {
                "next_thought": "Search the knowledge base.",
                "next_tool_name": "search_kb",
                "next_tool_args": args,
            }
    else:
        fields = {"reasoning": "The passages answer the question.", "answer": answer}
    text = "\n\n".join(f"[[ ## {k} ## ]]\n{v}" for k, v in fields.items()) + "\n\n[[ ## completed ## ]]"
    return Reply(text, prompt_tokens=150, completion_tokens=len(text) // 4)


CASES: list[dict[str, Any]] = [
    *_openai_cases("oi-openai", "oi"),
    *_openai_cases("traceloop-openai", "traceloop"),
    *_openai_cases("otel-v2-events", "otel-v2", "otelv2"),
    *_langchain_cases("oi-langchain", "oi"),
    *_langchain_cases("traceloop-langchain", "traceloop"),
    *_langfuse_cases("langfuse5", "main"),
    *_langfuse_cases("langfuse3", "langfuse3"),
    *_llamaindex_cases("oi-llamaindex", "oi"),
    *_haystack_cases("oi-haystack", "oi"),
    *_dspy_cases("oi-dspy", "oi"),
]


def responder(c: dict[str, Any]) -> Any:
    """The scripted server's answer for case ``c``: a rule's reply, else the answer of the last turn whose
    question the prompt holds, else the first answer."""

    tool = c["case"].get("tool_call")

    def answer(req: RecordedRequest) -> Reply | str:
        text = req.prompt_text
        if tool and not any(m.get("role") == "tool" for m in req.messages):
            return _tool_call_reply(req, tool, c["case"]["turns"][-1])
        for needle, reply in c["rules"]:
            if needle in text:
                return Reply(reply, prompt_tokens=40, completion_tokens=8)
        chosen = c["answers"][0]
        for question, ans in zip(c["case"]["turns"], c["answers"], strict=True):
            if question in text:
                chosen = ans
        if c["case"].get("dspy"):
            return _dspy_reply(req, c, chosen)
        return Reply(chosen, prompt_tokens=120, completion_tokens=len(chosen) // 4)

    return answer


def _tool_call_reply(req: RecordedRequest, tool: str, query: str) -> Reply:
    """A reply asking to call ``tool`` with ``{"query": query}`` (an agent's first step; streamed when asked)."""
    return Reply(
        tool_calls=({"id": f"call_{req.index}", "name": tool, "arguments": {"query": query}},),
        prompt_tokens=90,
        completion_tokens=12,
    )


def _merge(bodies: list[bytes], cls: type[Any]) -> Any:
    msg = cls()
    for b in bodies:
        part = cls()
        part.ParseFromString(b)
        msg.MergeFrom(part)
    return msg


def record(c: dict[str, Any], py: Path) -> dict[str, Any]:
    """Run case ``c`` with ``py`` and write its captures; returns its ``expected.json`` entry."""
    name = c["name"]
    out_file = OUT / f"{name}.app.json"
    with ScriptedOpenAIServer(responder(c)) as server, Capture() as cap:
        server.stream_chunk_chars = 12
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OTEL_", "OPENAI_", "TRACELOOP_", "LANGFUSE_"))
        }
        env |= {
            "RECORD_CASE": json.dumps(c["case"]),
            "RECORD_OUT": str(out_file),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-recorder",
            "OTEL_EXPORTER_OTLP_ENDPOINT": cap.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "TRACELOOP_TELEMETRY": "false",
            "TRACELOOP_BASE_URL": cap.endpoint,
            "PYTHONPATH": str(APPS),
            "LANGFUSE_HOST": cap.endpoint,
            "LANGFUSE_BASE_URL": cap.endpoint,
            "LANGFUSE_PUBLIC_KEY": "pk-lf-recorder",
            "LANGFUSE_SECRET_KEY": "sk-lf-recorder",
        }
        proc = subprocess.run(
            [str(py), str(APPS / c["app"]), *c["args"]], env=env, capture_output=True, text=True, timeout=300
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: app failed\n{proc.stdout}\n{proc.stderr}")
        time.sleep(0.2)
        requests = list(cap.requests)
    app_record = json.loads(out_file.read_text("utf-8"))
    out_file.unlink()
    traces = [b for p, b in requests if p.endswith("/v1/traces")]
    logs = [b for p, b in requests if p.endswith("/v1/logs")]
    if not traces:
        raise RuntimeError(f"{name}: no trace export captured ({[p for p, _ in requests]})")
    treq = _merge(traces, ExportTraceServiceRequest)
    (OUT / f"{name}.binpb").write_bytes(treq.SerializeToString())
    (OUT / f"{name}.json").write_text(json_format.MessageToJson(treq, indent=1) + "\n", "utf-8")
    if logs:
        lreq = _merge(logs, ExportLogsServiceRequest)
        (OUT / f"{name}.logs.binpb").write_bytes(lreq.SerializeToString())
        (OUT / f"{name}.logs.json").write_text(json_format.MessageToJson(lreq, indent=1) + "\n", "utf-8")
    turns = app_record.pop("turns")
    for t, faithful in zip(turns, c["faithful"], strict=True):
        t["faithful"] = faithful
    return {
        "group": c["group"],
        "pattern": c["case"]["pattern"],
        "case": c["case"],
        "turns": turns,
        "requests": {"traces": len(traces), "logs": len(logs)},
        "app": app_record,
    }


def main(argv: list[str]) -> int:
    wanted = set(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    expected_path = OUT / "expected.json"
    manifest_path = OUT / "manifest.json"
    expected: dict[str, Any] = json.loads(expected_path.read_text("utf-8")) if expected_path.exists() else {}
    manifest: dict[str, Any] = (
        json.loads(manifest_path.read_text("utf-8")) if manifest_path.exists() else {"venvs": {}, "cases": {}}
    )
    manifest["recorder"] = "python tests/conformance/record.py [CASE ...]  (no case: every case)"
    pythons: dict[str, Path] = {}
    failed = []
    for c in CASES:
        if wanted and c["name"] not in wanted:
            continue
        group = c["group"]
        if group not in pythons:
            pythons[group] = ensure_venv(group)
            manifest["venvs"][group] = {"requirements": VENVS[group], "freeze": pip_freeze(pythons[group])}
        try:
            expected[c["name"]] = record(c, pythons[group])
        except Exception as e:  # one broken app must not lose the others' recordings
            print(f"FAILED {c['name']}: {e}", file=sys.stderr)
            failed.append(c["name"])
            continue
        manifest["cases"][c["name"]] = {
            "group": group,
            "app": c["app"],
            "args": c["args"],
            "command": f"python tests/conformance/record.py {c['name']}",
        }
        print(f"recorded {c['name']}", file=sys.stderr)
    expected_path.write_text(
        json.dumps(expected, indent=1, sort_keys=True, ensure_ascii=False) + "\n", "utf-8"
    )
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", "utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
