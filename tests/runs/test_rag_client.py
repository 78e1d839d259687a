"""RagClient against a real HTTP server on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from ragpulse.config import Settings, load_settings
from ragpulse.runs.rag_client import RagClient, RagEndpointError
from testsupport import serve_http

SEEN: list[dict[str, Any]] = []


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        SEEN.append({"body": body, "auth": self.headers.get("authorization")})
        q = body.get("question", "")
        status, payload = 200, b""
        if q == "text":
            payload = b"not json"
        elif q == "noanswer":
            payload = json.dumps({"contexts": []}).encode()
        elif q == "404":
            status = 404
        elif q == "503":
            status, payload = 503, json.dumps({"error": {"message": "index offline:\x00 shard 3"}}).encode()
        elif q == "502":
            status, payload = 502, b"<html>Bad gateway\n  upstream  " + b"x" * 400 + b"</html>"
        else:
            payload = json.dumps(
                {"answer": "A", "contexts": ["c1", {"text": "c2", "id": 7}], "doc_ids": ["d1", None]}
            ).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    with serve_http(_Handler) as base:
        SEEN.clear()
        yield f"{base}/rag"


async def test_answer_contexts_ids_and_bearer(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGPULSE_RAG_ENDPOINT_API_KEY", "sk-rag")
    async with RagClient(load_settings(rag_endpoint_url=url)) as rag:
        got = await rag.ask("hello")
    assert (got.answer, got.contexts, got.doc_ids) == ("A", ("c1", "c2"), ("d1", None))
    assert got.latency_s > 0
    assert SEEN == [{"body": {"question": "hello"}, "auth": "Bearer sk-rag"}]


@pytest.mark.parametrize(
    ("question", "message", "retriable"),
    [
        ("text", "rag_endpoint_error: reply is not JSON", False),
        ("noanswer", "rag_endpoint_error: reply has no string 'answer'", False),
        ("404", "rag_endpoint_error: HTTP 404", False),
        # what the endpoint said comes along (the run page and report show it), cleaned and cut
        ("503", "rag_endpoint_error: HTTP 503: index offline: shard 3", True),
        ("502", "rag_endpoint_error: HTTP 502: <html>Bad gateway upstream " + "x" * 273 + "…", True),
    ],
)
async def test_errors(url: str, question: str, message: str, retriable: bool) -> None:
    async with RagClient(Settings(rag_endpoint_url=url)) as rag:
        with pytest.raises(RagEndpointError) as ei:
            await rag.ask(question)
    assert str(ei.value) == message
    assert ei.value.retriable is retriable


async def test_connection_refused_is_retriable() -> None:
    async with RagClient(Settings(rag_endpoint_url="http://127.0.0.1:9/none")) as rag:
        with pytest.raises(RagEndpointError) as ei:
            await rag.ask("q")
    assert str(ei.value).startswith("rag_endpoint_error: ConnectError")
    assert ei.value.retriable


def test_needs_url() -> None:
    with pytest.raises(ValueError):
        RagClient(Settings())
