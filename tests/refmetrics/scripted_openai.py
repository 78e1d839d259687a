"""A scripted OpenAI-compatible HTTP server on loopback (the judge model stand-in for these tests).

Chat completions answer from a queue of scripted replies (text, or ``(status, body)`` for HTTP errors), or
from a function of the request; embeddings answer from a ``{text: vector}`` map. Every request body is kept
in ``requests`` so tests can check what was asked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Reply = str | tuple[int, dict[str, Any]]


@dataclass
class ScriptedOpenAI:
    replies: list[Reply] = field(default_factory=list)
    responder: Callable[[dict[str, Any]], Reply] | None = None
    vectors: dict[str, list[float]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""

    def user_prompts(self) -> list[str]:
        return [r["messages"][-1]["content"] for r in self.requests if "messages" in r]

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        reply: Reply
        if self.responder is not None:
            reply = self.responder(body)
        elif self.replies:
            reply = self.replies.pop(0)
        else:
            return web.json_response({"error": {"message": "script exhausted"}}, status=500)
        if isinstance(reply, tuple):
            return web.json_response(reply[1], status=reply[0])
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }
        )

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {"object": "embedding", "index": i, "embedding": self.vectors[text]}
            for i, text in enumerate(inputs)
        ]
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 4, "total_tokens": 4},
            }
        )


@asynccontextmanager
async def scripted_openai(server: ScriptedOpenAI | None = None) -> AsyncIterator[ScriptedOpenAI]:
    srv = server or ScriptedOpenAI()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", srv._chat)
    app.router.add_post("/v1/embeddings", srv._embeddings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    srv.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield srv
    finally:
        await runner.cleanup()
