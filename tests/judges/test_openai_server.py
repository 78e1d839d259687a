"""The scripted server speaks enough of the OpenAI API for the real openai client (both transports)."""

from __future__ import annotations

import asyncio

import openai
import pytest

from ragpulse.testing.openai_server import RecordedRequest, Reply, ScriptedOpenAIServer

MSG = [{"role": "user", "content": "Is the sky blue?"}]


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
async def test_scripted_reply_usage_and_retry_after(
    openai_server: ScriptedOpenAIServer, transport: str
) -> None:
    openai_server.script(Reply(status=429, retry_after=0.01), Reply(content="YES", completion_tokens=1))
    http_client = (
        openai.DefaultAioHttpClient() if transport == "aiohttp" else openai.DefaultAsyncHttpxClient()
    )
    async with openai.AsyncOpenAI(
        base_url=openai_server.base_url, api_key="k", max_retries=2, http_client=http_client
    ) as client:
        raw = await client.chat.completions.with_raw_response.create(model="m1", messages=MSG)  # type: ignore[arg-type]
        out = raw.parse()
    assert out.choices[0].message.content == "YES"
    assert out.choices[0].finish_reason == "stop"
    assert out.usage is not None
    assert out.usage.completion_tokens == 1
    assert out.usage.prompt_tokens == 4  # ceil(len("Is the sky blue?") / 4)
    assert raw.retries_taken == 1
    reqs = openai_server.requests
    assert [r.retry_count for r in reqs] == [0, 1]
    assert reqs[0].model == "m1"
    assert reqs[0].prompt_text == "Is the sky blue?"


async def test_responder_error_status_and_in_flight(openai_server: ScriptedOpenAIServer) -> None:
    def responder(req: RecordedRequest) -> Reply | str:
        return Reply(content="NO", delay_s=0.2) if "blue" in req.prompt_text else "?"

    openai_server.reset(responder)
    async with openai.AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0) as client:
        outs = await asyncio.gather(
            *(client.chat.completions.create(model="m", messages=MSG) for _ in range(3))  # type: ignore[arg-type]
        )
        assert [o.choices[0].message.content for o in outs] == ["NO"] * 3
        assert openai_server.max_in_flight == 3
        openai_server.script(Reply(status=503, error_message="down"))
        with pytest.raises(openai.InternalServerError, match="down"):
            await client.chat.completions.create(model="m", messages=MSG)  # type: ignore[arg-type]


async def test_unscripted_request_is_a_400() -> None:
    with ScriptedOpenAIServer() as server:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=3) as client:
            with pytest.raises(openai.BadRequestError, match="unscripted"):
                await client.chat.completions.create(model="m", messages=MSG)  # type: ignore[arg-type]
        assert len(server.requests) == 1
    server.stop()  # idempotent


async def test_judge_responder_fits_every_builtin_prompt(openai_server: ScriptedOpenAIServer) -> None:
    from ragpulse.config import Settings
    from ragpulse.judges.registry import build_judges
    from ragpulse.model import JudgementStatus, Trace
    from ragpulse.testing.openai_server import judge_responder

    openai_server.reset(judge_responder)
    settings = Settings(judge_base_url=openai_server.base_url, judge_model="m", judge_api_key="k")
    en = Trace(
        trace_id="a", question="What is the fee?", answer="There is no fee.", documents=["No fee applies."]
    )
    zh = Trace(trace_id="b", question="费用是多少？", answer="不收取任何费用。", documents=["不收费。"])
    for options in ({}, {"relevancy": {"graded": True}, "faithfulness": {"mode": "binary"}}):
        judges = build_judges(settings.replaced(judges=options), ["relevancy", "faithfulness"])
        for trace in (en, zh):
            for j in judges.values():
                res = await j.judge(trace)
                assert res.status is JudgementStatus.OK, res
                assert res.score == 1.0, res
        await judges["relevancy"].client.aclose()  # type: ignore[attr-defined]
