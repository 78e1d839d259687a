"""A scripted OpenAI-compatible chat-completions server on loopback, for tests and benches.

The only stand-in ragpulse tests allow is the judge model. This module provides it as a real HTTP server
(FastAPI app served by uvicorn in a background thread, bound to ``127.0.0.1`` on a random free port), so the
real ``openai`` client, its transport (httpx or aiohttp), its retry machinery and its JSON decoding are all
exercised.

What it serves: ``POST /v1/chat/completions`` (and ``/chat/completions``). Each request gets the next
scripted :class:`Reply` (FIFO, see :meth:`ScriptedOpenAIServer.script`); when no scripted reply is queued
the ``responder`` callable is asked; without a responder the server answers HTTP 400 ``unscripted request``
(a status the openai client does not retry). Every request is recorded (:attr:`ScriptedOpenAIServer.requests`)
and the highest number of requests in flight at once is tracked (:attr:`ScriptedOpenAIServer.max_in_flight`).

Example::

    from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer

    with ScriptedOpenAIServer() as server:
        server.script(Reply(status=429, retry_after=0.01), "YES")
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=2)
        out = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
        assert out.choices[0].message.content == "YES"
        assert len(server.requests) == 2 and server.requests[1].retry_count == 1

    # A default responder decides from the request (here: from the prompt text).
    def responder(req: RecordedRequest) -> Reply | str:
        return "YES" if "refund" in req.prompt_text else "NO"

    with ScriptedOpenAIServer(responder) as server:
        ...

Units: ``delay_s`` and ``retry_after`` are seconds. Token counts default to ``ceil(characters / 4)`` of the
prompt (all message contents) and of the reply content, unless given explicitly.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

__all__ = ["RecordedRequest", "Reply", "Responder", "ScriptedOpenAIServer", "judge_responder"]


@dataclass(frozen=True)
class Reply:
    """One scripted response.

    Attributes:
        content: the assistant message text (``choices[0].message.content``).
        finish_reason: ``stop``, ``length``, … (``length`` means the model hit ``max_tokens``).
        prompt_tokens / completion_tokens: the ``usage`` block; ``None`` → ``ceil(chars / 4)``.
        status: HTTP status; anything but 200 sends an OpenAI-style ``{"error": {...}}`` body.
        retry_after: seconds sent in a ``Retry-After`` header (any status), ``None`` = no header.
        delay_s: seconds the server waits before answering (simulates model latency or a timeout).
        error_message: ``error.message`` of a non-200 body.
        include_usage: send the ``usage`` block at all (some compatible servers omit it).
        json_body: when not ``None``, sent as the JSON body as is (with ``status``), e.g. to imitate a
            broken compatible server.
    """

    content: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: int = 200
    retry_after: float | None = None
    delay_s: float = 0.0
    error_message: str = "scripted error"
    include_usage: bool = True
    json_body: Any = None


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received.

    Attributes:
        body: the decoded JSON body (``model``, ``messages``, ``temperature``, ``max_tokens``, …).
        headers: request headers, lower-case names.
        received_at: ``time.monotonic()`` when the request arrived (seconds).
    """

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    received_at: float = 0.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the request."""
        msgs = self.body.get("messages") or []
        return [m for m in msgs if isinstance(m, dict)]

    @property
    def prompt_text(self) -> str:
        """All message contents joined by newlines (text parts only)."""
        parts: list[str] = []
        for m in self.messages:
            c = m.get("content")
            if isinstance(c, str):
                parts.append(c)
            elif isinstance(c, list):
                parts.extend(str(p.get("text", "")) for p in c if isinstance(p, dict))
        return "\n".join(parts)

    @property
    def model(self) -> str | None:
        """The requested model name."""
        m = self.body.get("model")
        return m if isinstance(m, str) else None

    @property
    def retry_count(self) -> int:
        """The openai client's ``x-stainless-retry-count`` header (0 for a first attempt)."""
        try:
            return int(self.headers.get("x-stainless-retry-count", "0"))
        except ValueError:
            return 0


#: Decides the reply to a request that has no scripted reply queued; a plain string is a 200 reply text.
Responder = Callable[[RecordedRequest], Reply | str]


def judge_responder(req: RecordedRequest) -> Reply:
    """A plausible, always-positive judge for benches and smoke tests of ragpulse's own prompts.

    Replies to a prompt asking for a ``"claims"`` JSON with two supported claims, to one asking for a
    ``"score"`` JSON with ``{"score": 3, ...}``, and to anything else with ``YES`` (``是`` for Chinese prompts),
    each followed by a one-sentence reason. Token usage is the default ``ceil(chars / 4)``.
    """
    p = req.prompt_text
    if '"claims"' in p:
        claims = [
            {"claim": "first statement", "supported": True},
            {"claim": "second statement", "supported": True},
        ]
        return Reply(json.dumps({"claims": claims}))
    if '"score"' in p:
        return Reply(json.dumps({"score": 3, "reason": "fully addresses the question"}))
    if "第一行只写" in p:
        return Reply("是\n回答针对问题。")
    return Reply("YES\nThe answer addresses the question.")


_ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def _approx_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


class ScriptedOpenAIServer:
    """An OpenAI-compatible chat-completions server on ``127.0.0.1:<random port>`` in a background thread.

    Use as a context manager (``with ScriptedOpenAIServer() as s:``) or call :meth:`start`/:meth:`stop`.
    Thread-safe: tests may script replies and read records from any thread or event loop.

    Args:
        responder: called for requests with no scripted reply queued (see module docstring).
        host: address to bind (loopback by default).
    """

    def __init__(self, responder: Responder | None = None, *, host: str = "127.0.0.1") -> None:
        self.responder = responder
        self._host = host
        self._lock = threading.Lock()
        self._queue: deque[Reply | str] = deque()
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._generation = 0  # bumped by reset(): requests from before a reset no longer count as in flight
        self._ids = itertools.count(1)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> Self:
        """Bind a free port and serve in a daemon thread; returns once the server accepts connections.

        Raises:
            RuntimeError: already started, or the server did not come up within 10 s.
        """
        if self._server is not None:
            raise RuntimeError("ScriptedOpenAIServer already started")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._build_app(),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="scripted-openai", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("ScriptedOpenAIServer did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving and join the thread (idempotent)."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout=10.0)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- scripting and records -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the value for ``AsyncOpenAI(base_url=...)``."""
        if not self._port:
            raise RuntimeError("ScriptedOpenAIServer not started")
        return f"http://{self._host}:{self._port}/v1"

    def script(self, *replies: Reply | str) -> None:
        """Queue replies for the next requests, in order (a string is a 200 reply with that text)."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        """The most requests that were being handled at the same time."""
        with self._lock:
            return self._max_in_flight

    def reset(self, responder: Responder | None = None) -> None:
        """Forget scripted replies, records and the in-flight maximum; set a new responder (or none)."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._in_flight = 0
            self._max_in_flight = 0
            self._generation += 1
            self.responder = responder

    # -- serving ---------------------------------------------------------------------------------------
    def _next_reply(self, rec: RecordedRequest) -> tuple[Reply, int]:
        with self._lock:
            generation = self._generation
            self._requests.append(rec)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            item = self._queue.popleft() if self._queue else None
            responder = self.responder
        if item is None:
            if responder is None:
                item = Reply(status=400, error_message="unscripted request: no reply queued and no responder")
            else:
                try:
                    item = responder(rec)
                except Exception as e:  # a broken responder is a test bug: surface it as HTTP 400
                    item = Reply(status=400, error_message=f"responder failed: {e!r}")
        return (Reply(content=item) if isinstance(item, str) else item), generation

    def _done(self, generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._in_flight -= 1

    def _build_app(self) -> FastAPI:
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

        async def chat_completions(request: Request) -> Response:
            raw = await request.body()
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            if not isinstance(body, dict):
                body = {}
            rec = RecordedRequest(
                body=body,
                headers={k.lower(): v for k, v in request.headers.items()},
                received_at=time.monotonic(),
            )
            reply, generation = self._next_reply(rec)
            try:
                if reply.delay_s > 0:
                    await asyncio.sleep(reply.delay_s)
                return self._render(reply, rec)
            finally:
                self._done(generation)

        app.add_api_route("/v1/chat/completions", chat_completions, methods=["POST"])
        app.add_api_route("/chat/completions", chat_completions, methods=["POST"])
        return app

    def _render(self, reply: Reply, rec: RecordedRequest) -> Response:
        headers: dict[str, str] = {}
        if reply.retry_after is not None:
            headers["retry-after"] = f"{reply.retry_after:g}"
        if reply.json_body is not None:
            return JSONResponse(reply.json_body, status_code=reply.status, headers=headers)
        if reply.status != 200:
            err = {
                "error": {
                    "message": reply.error_message,
                    "type": _ERROR_TYPES.get(reply.status, "server_error"),
                    "param": None,
                    "code": None,
                }
            }
            return JSONResponse(err, status_code=reply.status, headers=headers)
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else _approx_tokens(rec.prompt_text)
        )
        completion_tokens = (
            reply.completion_tokens if reply.completion_tokens is not None else _approx_tokens(reply.content)
        )
        payload: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": rec.model or "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            ],
        }
        if reply.include_usage:
            payload["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        return JSONResponse(payload, headers=headers)
