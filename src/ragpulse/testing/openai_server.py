"""The scripted OpenAI-compatible judge server on loopback: the one model stand-in for tests and benches.

The only stand-in ragpulse tests allow is the judge model. This module provides it as a real HTTP server
(FastAPI app served by uvicorn in a background thread, bound to ``127.0.0.1`` on a random free port), so the
real ``openai`` client, its transport (httpx or aiohttp), its retry machinery and its JSON decoding are all
exercised. It is thread-safe: tests script it and read its records from any thread or event loop.

Endpoints: ``POST /v1/chat/completions`` (and ``/chat/completions``) and ``POST /v1/embeddings`` (and
``/embeddings``, answered from :attr:`ScriptedOpenAIServer.embeddings`, a ``{text: vector}`` map). A chat
request with ``"stream": true`` is answered as server-sent events (``chat.completion.chunk`` objects: a role
chunk, the content in pieces of :attr:`ScriptedOpenAIServer.stream_chunk_chars` characters, a finish chunk,
a usage chunk when ``stream_options.include_usage`` is true, then ``data: [DONE]``), as the OpenAI API does.

How a chat request is answered, first match wins:

1. the **schedule** (:meth:`ScriptedOpenAIServer.set_schedule`): the current :class:`Phase` may answer HTTP 429
   with ``Retry-After`` (a seeded share of requests) and adds its latency to every reply; a phase ends after a
   number of requests or when the test calls :meth:`~ScriptedOpenAIServer.next_phase`;
2. the **refused parameters** (:meth:`~ScriptedOpenAIServer.refuse`): a request carrying one (e.g.
   ``max_tokens`` to a reasoning model, a temperature other than 1, ``response_format``) gets OpenAI's HTTP 400
   (:func:`parameter_refusal`);
3. the **queue** of scripted replies (:meth:`~ScriptedOpenAIServer.script`, FIFO);
4. the **rules** (:meth:`~ScriptedOpenAIServer.on`): match on prompt text (substring or regex) and/or model,
   optionally a limited number of times, in the order they were added;
5. the **responder**, a callable of the :class:`RecordedRequest` (e.g. a :class:`LabelOracle`, or
   :func:`judge_responder`);
6. otherwise HTTP 400 ``unscripted request`` (a status the openai client does not retry).

A reply (:class:`Reply`) can carry any text, any HTTP status with an OpenAI error body (message, type, code —
see :func:`context_length_exceeded`), a ``Retry-After`` header, a delay, no ``usage`` block
(``include_usage=False``), content as a list of content blocks, ``reasoning_content``/``reasoning`` beside the
content, ``completion_tokens_details.reasoning_tokens`` (inside or beside ``completion_tokens``), an arbitrary
JSON body, raw bytes, or a normal completion encoded in another
charset than UTF-8 (``encoding="gbk"``, so the body is not valid UTF-8). Every request is recorded with its
arrival time, the phase it fell in and the status it got (:attr:`ScriptedOpenAIServer.requests`), the most
requests in flight at once is tracked (:attr:`~ScriptedOpenAIServer.max_in_flight`), and tests can wait for a
number of requests (:meth:`~ScriptedOpenAIServer.wait_for_requests`) instead of sleeping.

Example::

    from ragpulse.testing.openai_server import LabelOracle, Phase, Reply, ScriptedOpenAIServer

    with ScriptedOpenAIServer() as server:
        server.script(Reply(status=429, retry_after=0.01), "YES")           # next two requests
        server.on("NO", contains="cafeteria")                                # any request naming it
        server.on(context_length_exceeded(), model="small-model", times=1)   # one provider 400
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=2)
        out = await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
        assert out.choices[0].message.content == "YES"
        assert len(server.requests) == 2 and server.requests[1].retry_count == 1

    # 80 %-right judge that knows the true label of each case id found in the prompt.
    oracle = LabelOracle({"case-1": True, "case-2": False}, key=r"case-\\d+", p_correct=0.8, seed=7)
    with ScriptedOpenAIServer(oracle) as server:
        ...

    # 50 ms latency until the test says so, then 100 requests of which 30 % get 429 (Retry-After 1 s), then calm.
    server.set_schedule(Phase(latency_s=0.05),
                        Phase(requests=100, rate_429=0.3, retry_after_s=1.0),
                        Phase(), seed=1)
    ...
    server.next_phase()  # the storm starts with the next request

A phase that ends by itself after ``duration_s`` seconds exists for benches that shape load over time; a test
that asserts an outcome switches phases by request count or :meth:`~ScriptedOpenAIServer.next_phase`, so a slow
machine changes how long it takes, not what happens.

Units: ``delay_s``, ``latency_s``, ``retry_after``, ``retry_after_s`` and arrival times are seconds (arrival
times are ``time.monotonic()``). Token counts default to ``ceil(characters / 4)`` of the prompt (all message
contents) and of the reply content, unless given per reply or as server defaults.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import re
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

__all__ = [
    "LabelOracle",
    "OracleAnswer",
    "ParameterRefusal",
    "Phase",
    "RecordedRequest",
    "Reply",
    "Responder",
    "Rule",
    "ScriptedOpenAIServer",
    "context_length_exceeded",
    "judge_responder",
    "parameter_refusal",
    "verdict_reply",
]


@dataclass(frozen=True)
class Reply:
    """One scripted response.

    Attributes:
        content: the assistant message text (``choices[0].message.content``).
        finish_reason: ``stop``, ``length``, … (``length`` means the model hit ``max_tokens``).
        prompt_tokens / completion_tokens: the ``usage`` block; ``None`` → the server default
            (``ceil(chars / 4)`` unless the server was given fixed counts).
        status: HTTP status; anything but 200 sends an OpenAI-style ``{"error": {...}}`` body.
        retry_after: seconds sent in a ``Retry-After`` header (any status), ``None`` = no header.
        delay_s: seconds the server waits before answering (simulates model latency or a timeout).
        error_message: ``error.message`` of a non-200 body (the provider's message).
        error_type: ``error.type``; ``None`` → derived from the status (``invalid_request_error`` for 400 …).
        error_code: ``error.code`` (e.g. ``context_length_exceeded``), ``None`` → JSON null.
        include_usage: send the ``usage`` block at all (Ollama and several compatible servers omit it).
        json_body: when not ``None``, sent as the JSON body as is (with ``status``), e.g. to imitate a
            broken compatible server.
        raw_body: when not ``None``, sent as the body bytes as is (with ``status`` and ``content_type``).
        encoding: charset the normal completion body is encoded in (``"utf-8"`` by default); e.g. ``"gbk"``
            or ``"latin-1"`` with non-ASCII ``content`` gives a 200 body that is not valid UTF-8.
        content_type: the ``Content-Type`` of a ``raw_body`` or re-encoded body.
        content_blocks: when not ``None``, ``message.content`` is this list of content blocks instead of
            ``content`` (e.g. ``({"type": "thinking", "thinking": [...]}, {"type": "text", "text": "YES"})``, as
            Mistral Magistral answers).
        reasoning_content / reasoning: ``message.reasoning_content`` (DeepSeek, vLLM) / ``message.reasoning``
            (OpenRouter, Ollama) beside the content; ``None`` = the field is absent.
        reasoning_tokens: ``usage.completion_tokens_details.reasoning_tokens`` (``None`` = no details block).
        reasoning_in_completion: the reasoning tokens are part of ``completion_tokens`` (OpenAI's convention;
            the default ``completion_tokens`` then adds them); ``False`` counts them beside it (``total_tokens``
            = prompt + completion + reasoning, as xAI does).
        error_param: ``error.param`` of a non-200 body (the refused request parameter), ``None`` → JSON null.
        tool_calls: function calls the assistant asks for, each ``{"name": str, "arguments": dict | str}``
            (ids ``call_<n>``); sent as ``message.tool_calls`` (``content`` null when empty, ``finish_reason``
            ``tool_calls`` unless another than ``stop`` is given), or streamed as ``delta.tool_calls``.
    """

    content: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: int = 200
    retry_after: float | None = None
    delay_s: float = 0.0
    error_message: str = "scripted error"
    error_type: str | None = None
    error_code: str | None = None
    include_usage: bool = True
    json_body: Any = None
    raw_body: bytes | None = None
    encoding: str = "utf-8"
    content_type: str = "application/json"
    content_blocks: tuple[Mapping[str, Any], ...] | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    reasoning_in_completion: bool = True
    error_param: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ParameterRefusal:
    """A request parameter the server refuses with HTTP 400 (see :meth:`ScriptedOpenAIServer.refuse`).

    Attributes:
        param: the body key (``max_tokens``, ``temperature``, ``response_format`` …).
        allowed: values it still takes (e.g. ``(1,)`` for a temperature; empty: refused whenever present).
        model: only requests for this model (``None``: any).
        reply: the 400 sent (OpenAI's wording, ``error.param`` and ``error.code``).
    """

    param: str
    allowed: tuple[Any, ...] = ()
    model: str | None = None
    reply: Reply = field(default_factory=Reply)

    def refuses(self, req: RecordedRequest) -> bool:
        """Whether ``req`` carries the parameter with a value not in :attr:`allowed`."""
        if self.model is not None and req.model != self.model:
            return False
        return self.param in req.body and req.body[self.param] not in self.allowed


def parameter_refusal(param: str, allowed: tuple[Any, ...] = ()) -> Reply:
    """The HTTP 400 OpenAI answers to a parameter a model does not take, in its wording.

    ``max_tokens`` (reasoning models): code ``unsupported_parameter``, "Use 'max_completion_tokens' instead.";
    a parameter with allowed values (``temperature`` of a reasoning model, ``allowed=(1,)``): code
    ``unsupported_value``, "Only the default (1) value is supported."; anything else (``response_format`` on
    a server without structured output): code ``unsupported_parameter``.
    """
    if allowed:
        shown = ", ".join(f"{a:g}" if isinstance(a, float) else str(a) for a in allowed)
        return Reply(
            status=400,
            error_message=(
                f"Unsupported value: '{param}' does not support the given value with this model. Only the "
                f"default ({shown}) value is supported."
            ),
            error_type="invalid_request_error",
            error_code="unsupported_value",
            error_param=param,
        )
    hint = " Use 'max_completion_tokens' instead." if param == "max_tokens" else ""
    return Reply(
        status=400,
        error_message=f"Unsupported parameter: '{param}' is not supported with this model.{hint}",
        error_type="invalid_request_error",
        error_code="unsupported_parameter",
        error_param=param,
    )


def context_length_exceeded(max_tokens: int = 8192, requested: int = 9000) -> Reply:
    """The HTTP 400 OpenAI answers to a prompt that does not fit the model's context window.

    Returns:
        a :class:`Reply` with status 400, ``error.type`` ``invalid_request_error``, ``error.code``
        ``context_length_exceeded`` and OpenAI's wording of the message.
    """
    return Reply(
        status=400,
        error_message=(
            f"This model's maximum context length is {max_tokens} tokens. However, your messages resulted in "
            f"{requested} tokens. Please reduce the length of the messages."
        ),
        error_type="invalid_request_error",
        error_code="context_length_exceeded",
    )


@dataclass
class RecordedRequest:
    """A request the server received.

    Attributes:
        body: the decoded JSON body (``model``, ``messages``, ``temperature``, ``max_tokens``, …; ``input``
            for embeddings).
        headers: request headers, lower-case names.
        received_at: ``time.monotonic()`` when the request arrived (seconds).
        path: the URL path (``/v1/chat/completions``, ``/v1/embeddings``).
        index: 0-based arrival number since the last :meth:`ScriptedOpenAIServer.reset`.
        phase: index of the schedule :class:`Phase` the request fell in (``None`` without a schedule).
        status: HTTP status the server answered (``None`` until the reply is chosen).
    """

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    received_at: float = 0.0
    path: str = "/v1/chat/completions"
    index: int = 0
    phase: int | None = None
    status: int | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the request."""
        msgs = self.body.get("messages") or []
        return [m for m in msgs if isinstance(m, dict)]

    @property
    def prompt_text(self) -> str:
        """All message contents joined by newlines (text parts only)."""
        return "\n".join(_content_text(m.get("content")) for m in self.messages)

    @property
    def user_text(self) -> str:
        """The content of the last message (the user prompt), ``""`` when there is none."""
        msgs = self.messages
        return _content_text(msgs[-1].get("content")) if msgs else ""

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


def _content_text(c: Any) -> str:
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(str(p.get("text", "")) for p in c if isinstance(p, dict))
    return ""


#: Decides the reply to a request; a plain string is a 200 reply with that text.
Responder = Callable[[RecordedRequest], Reply | str]


@dataclass
class Rule:
    """A reply for every request that matches (see :meth:`ScriptedOpenAIServer.on`).

    Attributes:
        reply: a :class:`Reply`, a text, or a :data:`Responder` called with the request.
        contains: substring the prompt text must contain (``None`` = any).
        regex: pattern searched in the prompt text (``None`` = any).
        model: requested model name that must match exactly (``None`` = any).
        times: how many requests the rule answers before it is used up (``None`` = unlimited).
        hits: how many requests it answered so far.
    """

    reply: Reply | str | Responder
    contains: str | None = None
    regex: re.Pattern[str] | None = None
    model: str | None = None
    times: int | None = None
    hits: int = 0

    def matches(self, req: RecordedRequest) -> bool:
        """Whether the rule applies to ``req`` (ignores ``times``)."""
        if self.model is not None and req.model != self.model:
            return False
        text = req.prompt_text
        if self.contains is not None and self.contains not in text:
            return False
        return self.regex is None or self.regex.search(text) is not None


@dataclass(frozen=True)
class Phase:
    """One phase of a latency / rate-limit schedule (see :meth:`ScriptedOpenAIServer.set_schedule`).

    A phase lasts ``requests`` requests, or ``duration_s`` seconds (give at most one), or, with neither, until
    :meth:`ScriptedOpenAIServer.next_phase` is called; the last phase never ends.

    Attributes:
        duration_s: length in seconds, counted from the start of the phase (for benches: a test's outcome
            must not depend on how many requests a loaded machine gets through in that time).
        requests: length in requests that fall in the phase (every one counts, including the 429s).
        latency_s: seconds added before every reply in the phase (on top of :attr:`Reply.delay_s`).
        rate_429: share in [0, 1] of requests answered 429 (seeded, reproducible by arrival number).
        retry_after_s: ``Retry-After`` seconds sent with those 429s (``None`` = no header).
    """

    duration_s: float | None = None
    requests: int | None = None
    latency_s: float = 0.0
    rate_429: float = 0.0
    retry_after_s: float | None = 1.0

    def __post_init__(self) -> None:
        if self.duration_s is not None and self.requests is not None:
            raise ValueError("a Phase lasts duration_s or requests, not both")
        if not 0.0 <= self.rate_429 <= 1.0:
            raise ValueError(f"rate_429 must be in [0, 1], got {self.rate_429}")


@dataclass(frozen=True)
class OracleAnswer:
    """One answer of a :class:`LabelOracle`: the key found, the true label and the label given."""

    key: str
    truth: bool
    given: bool

    @property
    def correct(self) -> bool:
        """Whether the oracle gave the true label."""
        return self.truth == self.given


def verdict_reply(label: bool, req: RecordedRequest) -> Reply:
    """A judge reply that states ``label`` in the format ragpulse's built-in prompt asks for.

    ``"claims"`` prompts get two claims, both supported (or not); ``"score"`` prompts ``{"score": 3}`` or
    ``{"score": 0}`` (the 0–3 scale); ``"pass"`` prompts (checklist items) ``{"pass": …}``; Chinese yes/no
    prompts ``是``/``否``; anything else ``YES``/``NO``.
    """
    p = req.prompt_text
    if '"claims"' in p:
        claims = [{"claim": c, "supported": label} for c in ("first statement", "second statement")]
        return Reply(json.dumps({"claims": claims}))
    if '"score"' in p:
        return Reply(json.dumps({"score": 3 if label else 0, "reason": "scripted verdict"}))
    if '"pass"' in p:
        return Reply(json.dumps({"pass": label, "reason": "scripted verdict"}))
    if "第一行只写" in p:
        return Reply("是\n脚本判定。" if label else "否\n脚本判定。")
    return Reply("YES\nScripted verdict." if label else "NO\nScripted verdict.")


class LabelOracle:
    """A responder that knows the true label of each case and answers right with probability ``p_correct``.

    Args:
        labels: true label per key (``True``/``1`` = positive, "good"); keys are whatever identifies a case in
            the prompt, e.g. a case id or the judged answer text.
        key: how the key is found in a request: a regex (its first group, or the whole match, is the key), a
            callable of the :class:`RecordedRequest`, or ``None`` = the longest label key that occurs in the
            prompt text.
        p_correct: probability of giving the true label, in [0, 1].
        seed: seed of the errors. Whether the oracle is right on a key depends only on ``(seed, key)``, not
            on arrival order or concurrency, so the same key always gets the same answer and a run is
            reproducible.
        reply: renders the given label as a reply (default :func:`verdict_reply`).
        unknown: reply to a request in which no known key is found (default HTTP 400 naming the problem).

    :attr:`answers` records every answer (:class:`OracleAnswer`), in arrival order.
    """

    def __init__(
        self,
        labels: Mapping[str, bool | int],
        *,
        key: str | re.Pattern[str] | Callable[[RecordedRequest], str | None] | None = None,
        p_correct: float = 1.0,
        seed: int = 0,
        reply: Callable[[bool, RecordedRequest], Reply | str] = verdict_reply,
        unknown: Reply | None = None,
    ) -> None:
        if not 0.0 <= p_correct <= 1.0:
            raise ValueError(f"p_correct must be in [0, 1], got {p_correct}")
        self.labels = {k: bool(v) for k, v in labels.items()}
        self._by_length = sorted(self.labels, key=len, reverse=True)
        self._key = re.compile(key) if isinstance(key, str) else key
        self.p_correct = p_correct
        self.seed = seed
        self._reply = reply
        self._unknown = unknown or Reply(
            status=400, error_message="label oracle: no known key in the request"
        )
        self._lock = threading.Lock()
        self._answers: list[OracleAnswer] = []

    def key_of(self, req: RecordedRequest) -> str | None:
        """The label key found in ``req`` (``None`` when none is known)."""
        if self._key is None:
            text = req.prompt_text
            return next((k for k in self._by_length if k in text), None)
        if isinstance(self._key, re.Pattern):
            m = self._key.search(req.prompt_text)
            if m is None:
                return None
            found = m.group(1) if m.groups() else m.group(0)
        else:
            found = self._key(req)
        return found if found is not None and found in self.labels else None

    def is_right_on(self, key: str) -> bool:
        """Whether the oracle gives the true label for ``key`` (fixed by ``seed`` and ``key``)."""
        return random.Random(f"{self.seed}\x00{key}").random() < self.p_correct

    def __call__(self, req: RecordedRequest) -> Reply | str:
        k = self.key_of(req)
        if k is None:
            return self._unknown
        truth = self.labels[k]
        given = truth if self.is_right_on(k) else not truth
        with self._lock:
            self._answers.append(OracleAnswer(k, truth, given))
        return self._reply(given, req)

    @property
    def answers(self) -> list[OracleAnswer]:
        """A copy of the answers given so far."""
        with self._lock:
            return list(self._answers)


def judge_responder(req: RecordedRequest) -> Reply:
    """A plausible, always-positive judge for benches and smoke tests of ragpulse's own prompts.

    Replies to a prompt asking for a ``"claims"`` JSON with two supported claims, to one asking for a
    ``"score"`` JSON with ``{"score": 3, ...}``, and to anything else with ``YES`` (``是`` for Chinese prompts),
    each followed by a one-sentence reason. Token usage is the server default.
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
    """An OpenAI-compatible server on ``127.0.0.1:<random port>`` in a background thread.

    Use as a context manager (``with ScriptedOpenAIServer() as s:``) or call :meth:`start`/:meth:`stop`.

    Args:
        responder: called for chat requests that no queued reply or rule answers (see the module docstring).
        host: address to bind (loopback by default).
        prompt_tokens / completion_tokens: ``usage`` counts for replies that do not give their own
            (``None`` → ``ceil(characters / 4)``).
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        host: str = "127.0.0.1",
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        self.responder = responder
        #: ``{input text: vector}`` answered by ``/v1/embeddings``; an unknown text is an HTTP 400.
        self.embeddings: dict[str, list[float]] = {}
        #: characters per content chunk of a streamed (``"stream": true``) reply.
        self.stream_chunk_chars = 16
        self._host = host
        self._prompt_tokens = prompt_tokens
        self._completion_tokens = completion_tokens
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._queue: deque[Reply | str] = deque()
        self._rules: list[Rule] = []
        self._refusals: list[ParameterRefusal] = []
        self._phases: tuple[Phase, ...] = ()
        self._schedule_seed = 0
        self._phase = 0  # index of the current phase
        self._phase_requests = 0  # requests that fell in the current phase
        self._phase_starts: list[float] = []  # start of each phase reached so far (time.monotonic())
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

    # -- scripting ---------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the value for ``AsyncOpenAI(base_url=...)``."""
        if not self._port:
            raise RuntimeError("ScriptedOpenAIServer not started")
        return f"http://{self._host}:{self._port}/v1"

    def script(self, *replies: Reply | str) -> None:
        """Queue replies for the next chat requests, in order (a string is a 200 reply with that text)."""
        with self._lock:
            self._queue.extend(replies)

    def on(
        self,
        reply: Reply | str | Responder,
        *,
        contains: str | None = None,
        regex: str | re.Pattern[str] | None = None,
        model: str | None = None,
        times: int | None = None,
    ) -> Rule:
        """Answer every chat request that matches with ``reply`` (rules are tried in the order added).

        Args:
            reply: a :class:`Reply`, a text, or a :data:`Responder` called with the request.
            contains: substring the prompt text must contain.
            regex: pattern searched in the prompt text.
            model: exact requested model name.
            times: answer at most this many requests, then the rule is used up (``None`` = unlimited).

        Returns:
            the :class:`Rule` (its ``hits`` counts the requests it answered).
        """
        pattern = re.compile(regex) if isinstance(regex, str) else regex
        rule = Rule(reply, contains=contains, regex=pattern, model=model, times=times)
        with self._lock:
            self._rules.append(rule)
        return rule

    def refuse(
        self,
        param: str,
        *,
        allowed: tuple[Any, ...] = (),
        model: str | None = None,
        reply: Reply | None = None,
    ) -> ParameterRefusal:
        """Answer HTTP 400 to every chat request carrying ``param`` with a value not in ``allowed`` (checked
        after the schedule, before the queue: a refused request consumes no queued reply or rule).

        Args:
            param: the request body key, e.g. ``max_tokens``, ``temperature``, ``response_format``.
            allowed: values still taken (``(1,)``: a reasoning model's temperature); empty = any value refused.
            model: only for this requested model.
            reply: the 400 to send (default :func:`parameter_refusal`, OpenAI's wording).
        """
        refusal = ParameterRefusal(param, allowed, model, reply or parameter_refusal(param, allowed))
        with self._lock:
            self._refusals.append(refusal)
        return refusal

    def set_schedule(self, *phases: Phase, seed: int = 0) -> None:
        """Change latency and the rate of 429-with-Retry-After by request count or on the test's signal.

        The schedule starts now, in its first phase; each phase ends as its :class:`Phase` says (after its
        requests, on :meth:`next_phase`, or after ``duration_s``). With no phases the schedule is removed.
        Whether a request in a phase with ``rate_429`` gets a 429 depends only on ``seed`` and the request's
        arrival number, so a run is reproducible; a 429 from the schedule consumes no queued reply or rule.
        """
        with self._lock:
            self._phases = tuple(phases)
            self._schedule_seed = seed
            self._phase = 0
            self._phase_requests = 0
            self._phase_starts = [time.monotonic()] if phases else []

    def next_phase(self) -> int:
        """End the current schedule phase now, whatever bounds it: the next request falls in the following
        phase. Returns the index of the phase now current (the last phase never ends: calling this in it
        changes nothing).

        Raises:
            RuntimeError: no schedule is set.
        """
        with self._lock:
            if not self._phases:
                raise RuntimeError("next_phase() without a schedule (set_schedule)")
            now = time.monotonic()
            self._roll(now)
            if self._phase < len(self._phases) - 1:
                self._enter(self._phase + 1, now)
            return self._phase

    def phase_started_at(self, phase: int) -> float | None:
        """``time.monotonic()`` when schedule phase ``phase`` began: the :meth:`set_schedule` call for the first,
        the :meth:`next_phase` call or the arrival of the first request for one that followed a phase that
        ended by a call or a request count, the end of the ``duration_s`` before it otherwise (known ahead of
        time). ``None`` for a phase not reached yet whose start is not known."""
        with self._lock:
            if phase < len(self._phase_starts):
                return self._phase_starts[phase]
            if not self._phase_starts or phase >= len(self._phases):
                return None
            start = self._phase_starts[-1]
            for p in self._phases[len(self._phase_starts) - 1 : phase]:
                if p.duration_s is None:
                    return None
                start += p.duration_s
            return start

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        with self._lock:
            return len(self._queue)

    def reset(self, responder: Responder | None = None) -> None:
        """Forget queued replies, rules, schedule, embeddings, records and the in-flight maximum; set a new
        responder (or none)."""
        with self._lock:
            self._queue.clear()
            self._rules.clear()
            self._refusals.clear()
            self._phases = ()
            self._phase = 0
            self._phase_requests = 0
            self._phase_starts = []
            self._requests.clear()
            self._in_flight = 0
            self._max_in_flight = 0
            self._generation += 1
            self.responder = responder
            self.embeddings = {}

    # -- records ---------------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far (chat and embeddings), in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        """How many requests arrived since the last reset."""
        with self._lock:
            return len(self._requests)

    @property
    def max_in_flight(self) -> int:
        """The most requests that were being handled at the same time."""
        with self._lock:
            return self._max_in_flight

    def wait_for_requests(self, n: int, timeout_s: float = 10.0) -> list[RecordedRequest]:
        """Block until at least ``n`` requests arrived (from any thread; not from the event loop that runs
        the client — use :meth:`wait_for_requests_async` there).

        Raises:
            TimeoutError: fewer than ``n`` requests after ``timeout_s`` seconds.
        """
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self._requests) >= n, timeout_s):
                raise TimeoutError(f"{len(self._requests)} of {n} requests after {timeout_s} s")
            return list(self._requests)

    async def wait_for_requests_async(self, n: int, timeout_s: float = 10.0) -> list[RecordedRequest]:
        """Like :meth:`wait_for_requests`, without blocking the running event loop."""
        return await asyncio.to_thread(self.wait_for_requests, n, timeout_s)

    # -- serving ---------------------------------------------------------------------------------------
    def _enter(self, phase: int, started: float) -> None:
        self._phase = phase
        self._phase_requests = 0
        del self._phase_starts[phase:]
        self._phase_starts.append(started)

    def _roll(self, now: float) -> None:
        """Leave every phase whose ``duration_s`` has run out by ``now`` (with the lock held)."""
        while self._phase < len(self._phases) - 1:
            p = self._phases[self._phase]
            if p.duration_s is None or now < self._phase_starts[self._phase] + p.duration_s:
                return
            self._enter(self._phase + 1, self._phase_starts[self._phase] + p.duration_s)

    def _phase_of(self, now: float) -> tuple[int, Phase] | None:
        """The phase a request arriving at ``now`` falls in, counted in it (with the lock held)."""
        if not self._phases:
            return None
        last = len(self._phases) - 1
        while True:
            self._roll(now)
            p = self._phases[self._phase]
            if p.requests is None or self._phase_requests < p.requests or self._phase == last:
                break
            self._enter(self._phase + 1, now)
        self._phase_requests += 1
        return self._phase, self._phases[self._phase]

    def _throttled(self, index: int, phase: Phase) -> bool:
        if phase.rate_429 <= 0.0:
            return False
        return random.Random(f"{self._schedule_seed}\x00{index}").random() < phase.rate_429

    def _next_reply(self, rec: RecordedRequest) -> tuple[Reply, float, int]:
        with self._lock:
            generation = self._generation
            rec.index = len(self._requests)
            current = self._phase_of(rec.received_at)
            self._requests.append(rec)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            self._arrived.notify_all()
            latency = 0.0
            item: Reply | str | Responder | None = None
            if current is not None:
                rec.phase, phase = current
                latency = phase.latency_s
                if self._throttled(rec.index, phase):
                    item = Reply(
                        status=429,
                        retry_after=phase.retry_after_s,
                        error_message="Rate limit reached (scripted schedule).",
                    )
            if item is None:
                item = next((r.reply for r in self._refusals if r.refuses(rec)), None)
            if item is None and self._queue:
                item = self._queue.popleft()
            if item is None:
                for rule in self._rules:
                    if (rule.times is None or rule.hits < rule.times) and rule.matches(rec):
                        rule.hits += 1
                        item = rule.reply
                        break
            if item is None:
                item = self.responder
        if item is None:
            item = Reply(status=400, error_message="unscripted request: no reply queued and no responder")
        elif not isinstance(item, Reply | str):
            try:
                item = item(rec)
            except Exception as e:  # a broken responder is a test bug: surface it as HTTP 400
                item = Reply(status=400, error_message=f"responder failed: {e!r}")
        reply = Reply(content=item) if isinstance(item, str) else item
        rec.status = reply.status
        return reply, latency, generation

    def _record(self, rec: RecordedRequest) -> int:
        with self._lock:
            rec.index = len(self._requests)
            self._requests.append(rec)
            self._arrived.notify_all()
            return self._generation

    def _done(self, generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._in_flight -= 1

    def _build_app(self) -> FastAPI:
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

        async def _recorded(request: Request) -> RecordedRequest:
            raw = await request.body()
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            return RecordedRequest(
                body=body if isinstance(body, dict) else {},
                headers={k.lower(): v for k, v in request.headers.items()},
                received_at=time.monotonic(),
                path=request.url.path,
            )

        async def chat_completions(request: Request) -> Response:
            rec = await _recorded(request)
            reply, latency, generation = self._next_reply(rec)
            try:
                if reply.delay_s + latency > 0:
                    await asyncio.sleep(reply.delay_s + latency)
                return self._render(reply, rec)
            finally:
                self._done(generation)

        async def embeddings(request: Request) -> Response:
            rec = await _recorded(request)
            self._record(rec)
            raw_input = rec.body.get("input")
            given: list[Any] = raw_input if isinstance(raw_input, list) else [raw_input]
            inputs = [t for t in given if isinstance(t, str)]
            missing = [t for t in given if not isinstance(t, str) or t not in self.embeddings]
            if missing:
                rec.status = 400
                msg = f"no scripted embedding for {missing[0]!r}"
                return self._render(Reply(status=400, error_message=msg), rec)
            rec.status = 200
            data = [
                {"object": "embedding", "index": i, "embedding": self.embeddings[t]}
                for i, t in enumerate(inputs)
            ]
            tokens = sum(_approx_tokens(t) for t in inputs)
            return JSONResponse(
                {
                    "object": "list",
                    "data": data,
                    "model": rec.model or "scripted",
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            )

        for prefix in ("/v1", ""):
            app.add_api_route(f"{prefix}/chat/completions", chat_completions, methods=["POST"])
            app.add_api_route(f"{prefix}/embeddings", embeddings, methods=["POST"])
        return app

    def _render(self, reply: Reply, rec: RecordedRequest) -> Response:
        headers: dict[str, str] = {}
        if reply.retry_after is not None:
            headers["retry-after"] = f"{reply.retry_after:g}"
        if reply.raw_body is not None:
            return Response(
                reply.raw_body, status_code=reply.status, headers=headers, media_type=reply.content_type
            )
        if reply.json_body is not None:
            return JSONResponse(reply.json_body, status_code=reply.status, headers=headers)
        if reply.status != 200:
            err = {
                "error": {
                    "message": reply.error_message,
                    "type": reply.error_type or _ERROR_TYPES.get(reply.status, "server_error"),
                    "param": reply.error_param,
                    "code": reply.error_code,
                }
            }
            return JSONResponse(err, status_code=reply.status, headers=headers)
        prompt_tokens = next(
            (n for n in (reply.prompt_tokens, self._prompt_tokens) if n is not None),
            _approx_tokens(rec.prompt_text),
        )
        reasoning_tokens = reply.reasoning_tokens or 0
        completion_tokens = next(
            (n for n in (reply.completion_tokens, self._completion_tokens) if n is not None),
            _approx_tokens(reply.content) + (reasoning_tokens if reply.reasoning_in_completion else 0),
        )
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.content_blocks is not None:
            message["content"] = [dict(b) for b in reply.content_blocks]
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        if reply.reasoning is not None:
            message["reasoning"] = reply.reasoning
        if reply.tool_calls:
            message["content"] = reply.content or None
            message["tool_calls"] = self._tool_calls(reply)
        payload: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": rec.model or "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": _finish(reply),
                    "logprobs": None,
                }
            ],
        }
        if rec.body.get("stream") is True and reply.encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
            return self._render_stream(payload, reply, rec, headers, prompt_tokens, completion_tokens)
        if reply.include_usage:
            total = prompt_tokens + completion_tokens
            usage: dict[str, Any] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": total if reply.reasoning_in_completion else total + reasoning_tokens,
            }
            if reply.reasoning_tokens is not None:
                usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
            payload["usage"] = usage
        if reply.encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
            return JSONResponse(payload, headers=headers)
        body = json.dumps(payload, ensure_ascii=False).encode(reply.encoding)
        return Response(body, headers=headers, media_type=reply.content_type)

    def _render_stream(
        self,
        payload: dict[str, Any],
        reply: Reply,
        rec: RecordedRequest,
        headers: dict[str, str],
        prompt_tokens: int,
        completion_tokens: int,
    ) -> Response:
        """The completion ``payload`` as server-sent ``chat.completion.chunk`` events (see the module docstring)."""
        base = {k: payload[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return base | {
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
            }

        step = max(1, self.stream_chunk_chars)
        events = [chunk({"role": "assistant", "content": ""})]
        events += [
            chunk({"content": reply.content[i : i + step]}) for i in range(0, len(reply.content), step)
        ]
        if reply.tool_calls:
            calls = [{"index": i, **call} for i, call in enumerate(self._tool_calls(reply))]
            events.append(chunk({"tool_calls": calls}))
        events.append(chunk({}, _finish(reply)))
        options = rec.body.get("stream_options")
        if reply.include_usage and isinstance(options, dict) and options.get("include_usage") is True:
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
            events.append(base | {"choices": [], "usage": usage})
        body = "".join(f"data: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events) + "data: [DONE]\n\n"
        return Response(body.encode("utf-8"), headers=headers, media_type="text/event-stream")

    def _tool_calls(self, reply: Reply) -> list[dict[str, Any]]:
        """``reply.tool_calls`` in the API's form (``id``, ``type: function``, ``function.arguments`` as JSON)."""
        out = []
        for call in reply.tool_calls:
            args = call.get("arguments", {})
            function = {
                "name": call["name"],
                "arguments": args if isinstance(args, str) else json.dumps(args),
            }
            out.append(
                {"id": call.get("id") or f"call_{next(self._ids)}", "type": "function", "function": function}
            )
        return out


def _finish(reply: Reply) -> str:
    """``tool_calls`` for a reply that calls tools (unless a finish reason other than ``stop`` was given)."""
    if reply.tool_calls and reply.finish_reason == "stop":
        return "tool_calls"
    return reply.finish_reason
