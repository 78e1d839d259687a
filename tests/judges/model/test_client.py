"""LLMClient against the scripted server: retries, failures, cache, limits, budget, truncation helper."""

from __future__ import annotations

import asyncio
import time

import pytest

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.model.client import LLMClient, ModelUnavailableError, _RateLimiter, estimate_tokens
from ragpulse.judges.model.context import fit_context
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer

MSG = [{"role": "user", "content": "Is it relevant?"}]


async def test_request_shape_and_usage(openai_server: ScriptedOpenAIServer, llm_client: LLMClient) -> None:
    openai_server.script(Reply("YES", prompt_tokens=11, completion_tokens=2))
    r = await llm_client.complete(judge="relevancy", version="v1", messages=MSG)
    assert (r.text, r.finish_reason, r.prompt_tokens, r.completion_tokens, r.retries, r.cached) == (
        "YES",
        "stop",
        11,
        2,
        0,
        False,
    )
    body = openai_server.requests[0].body
    assert body["model"] == "judge-test"
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 1024
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-test-not-a-real-key"
    assert llm_client.stats.prompt_tokens == {"relevancy": 11}
    assert llm_client.tokens_spent_today("relevancy") == 13


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_429_then_success_counts_the_retry(openai_server: ScriptedOpenAIServer, transport: str) -> None:
    settings = Settings(
        judge_base_url=openai_server.base_url,
        judge_model="m",
        judge_api_key="k",
        judge_max_retries=2,
        judge_http_transport=transport,
    )
    openai_server.script(Reply(status=429, retry_after=0.2), Reply("NO"))
    async with LLMClient(settings) as client:
        t0 = time.monotonic()
        r = await client.complete(judge="j", version="v", messages=MSG)
        waited = time.monotonic() - t0
    assert r.text == "NO"
    assert r.retries == 1
    assert client.stats.retries == 1
    assert waited >= 0.2  # Retry-After honoured
    assert [q.retry_count for q in openai_server.requests] == [0, 1]


async def test_always_429_is_judge_unavailable(
    openai_server: ScriptedOpenAIServer, llm_client: LLMClient
) -> None:
    openai_server.script(*[Reply(status=429, retry_after=0.01)] * 3)
    with pytest.raises(ModelUnavailableError) as ei:
        await llm_client.complete(judge="j", version="v", messages=MSG)
    assert ei.value.code == "judge_unavailable"
    assert ei.value.retries == 2
    assert str(ei.value) == "judge_unavailable: HTTP 429 after 3 attempts"
    assert len(openai_server.requests) == 3
    assert llm_client.stats.failures == 1


async def test_5xx_retried_and_400_not(openai_server: ScriptedOpenAIServer, llm_client: LLMClient) -> None:
    openai_server.script(Reply(status=503, retry_after=0.01), "YES")
    assert (await llm_client.complete(judge="j", version="v", messages=MSG)).retries == 1
    openai_server.script(Reply(status=400, error_message="bad"))
    with pytest.raises(ModelUnavailableError) as ei:
        await llm_client.complete(judge="j", version="v2", messages=MSG)
    assert ei.value.retries == 0
    assert "HTTP 400 after 1 attempt" in str(ei.value)


@pytest.mark.integration  # slow check (two 0.2 s judge timeouts and a retry backoff, ~0.9 s): the integration lane, docs/dev/testing.md
async def test_timeout_is_retried_then_unavailable(openai_server: ScriptedOpenAIServer) -> None:
    settings = Settings(
        judge_base_url=openai_server.base_url,
        judge_model="m",
        judge_api_key="k",
        judge_max_retries=1,
        judge_timeout_s=0.2,
    )
    openai_server.script(Reply("YES", delay_s=1.0), Reply("YES", delay_s=1.0))
    async with LLMClient(settings) as client:
        with pytest.raises(ModelUnavailableError) as ei:
            await client.complete(judge="j", version="v", messages=MSG)
    assert ei.value.retries == 1
    assert str(ei.value).startswith("judge_unavailable: timeout after 2 attempts")


async def test_cache_hit_makes_no_request(openai_server: ScriptedOpenAIServer, llm_client: LLMClient) -> None:
    openai_server.script("YES")
    first = await llm_client.complete(judge="j", version="v", messages=MSG)
    llm_client.keep(first)  # the judge accepted it (an ok judgement)
    second = await llm_client.complete(judge="j", version="v", messages=MSG)
    assert len(openai_server.requests) == 1
    assert second.cached
    assert second.text == "YES"
    assert second.prompt_tokens == 0
    assert not first.cached
    assert llm_client.stats.cache_hits == 1
    openai_server.script("NO")  # another version is another key
    assert (await llm_client.complete(judge="j", version="v2", messages=MSG)).text == "NO"


async def test_cache_is_bounded_lru(openai_server: ScriptedOpenAIServer) -> None:
    settings = Settings(
        judge_base_url=openai_server.base_url, judge_model="m", judge_api_key="k", judge_cache_size=2
    )
    openai_server.reset(lambda req: "YES")
    async with LLMClient(settings) as client:
        for v in ("a", "b", "a", "c", "a", "b"):  # b is evicted by c; a stays (recently used)
            client.keep(await client.complete(judge="j", version=v, messages=MSG))
    assert len(openai_server.requests) == 4
    assert client.stats.cache_hits == 2


async def test_concurrency_limit_respected(openai_server: ScriptedOpenAIServer) -> None:
    settings = Settings(
        judge_base_url=openai_server.base_url, judge_model="m", judge_api_key="k", judge_max_concurrency=3
    )
    openai_server.reset(lambda req: Reply("YES", delay_s=0.1))
    async with LLMClient(settings) as client:
        await asyncio.gather(*(client.complete(judge="j", version=str(i), messages=MSG) for i in range(10)))
    assert len(openai_server.requests) == 10
    assert openai_server.max_in_flight == 3


async def test_rate_limiter_window() -> None:
    limiter = _RateLimiter(2, window_s=0.3)
    t0 = time.monotonic()
    for _ in range(3):
        await limiter.acquire()
    assert 0.28 <= time.monotonic() - t0 < 1.0


async def test_requests_per_minute_paces_calls(openai_server: ScriptedOpenAIServer) -> None:
    settings = Settings(
        judge_base_url=openai_server.base_url, judge_model="m", judge_api_key="k", judge_requests_per_minute=2
    )
    openai_server.reset(lambda req: "YES")
    async with LLMClient(settings) as client:
        await client.complete(judge="j", version="1", messages=MSG)
        await client.complete(judge="j", version="2", messages=MSG)
        with pytest.raises(TimeoutError):  # the third call in the same minute waits
            await asyncio.wait_for(client.complete(judge="j", version="3", messages=MSG), 0.3)
    assert len(openai_server.requests) == 2


async def test_daily_token_budget(openai_server: ScriptedOpenAIServer) -> None:
    settings = Settings(
        judge_base_url=openai_server.base_url,
        judge_model="m",
        judge_api_key="k",
        judge_daily_token_budget=100,
    )
    openai_server.script(Reply("YES", prompt_tokens=90, completion_tokens=20))
    async with LLMClient(settings) as client:
        await client.complete(judge="faithfulness", version="1", messages=MSG)
        with pytest.raises(JudgeError) as ei:
            await client.complete(judge="faithfulness", version="2", messages=MSG)
        assert ei.value.code == "over_budget"
        assert client.stats.over_budget == {"faithfulness": 1}
        openai_server.script("NO")  # another judge has its own budget
        assert (await client.complete(judge="relevancy", version="r1", messages=MSG)).text == "NO"


def test_needs_a_model() -> None:
    with pytest.raises(ConfigError, match="RAGPULSE_JUDGE_MODEL"):
        LLMClient(Settings(judge_model=None))


def test_fit_context_keeps_top_ranked_first() -> None:
    chunks = ["a" * 100, "b" * 300, "c" * 50]
    assert fit_context(chunks, 1000) == (chunks, False)
    kept, cut = fit_context(chunks, 440)
    assert cut
    assert kept == [
        "a" * 100,
        "b" * 300,
    ]
    kept, cut = fit_context(chunks, 350)
    assert cut
    assert kept == ["a" * 100, "b" * 250]
    kept, cut = fit_context(["x" * 500], 120)
    assert cut
    assert kept == ["x" * 120]


async def test_identical_request_in_flight_is_awaited_not_resent(
    openai_server: ScriptedOpenAIServer, llm_client: LLMClient
) -> None:
    openai_server.script(Reply("YES", delay_s=0.2))
    a, b = await asyncio.gather(
        llm_client.complete(judge="j", version="v", messages=MSG),
        llm_client.complete(judge="j", version="v", messages=MSG),
    )
    assert len(openai_server.requests) == 1
    assert (a.text, b.text) == ("YES", "YES")
    assert sorted([a.cached, b.cached]) == [False, True]


async def test_failures_are_not_cached_and_cancelled_leader_hands_over(
    openai_server: ScriptedOpenAIServer, llm_client: LLMClient
) -> None:
    openai_server.script(Reply(status=400), "NO")
    with pytest.raises(ModelUnavailableError):
        await llm_client.complete(judge="j", version="v", messages=MSG)
    assert (await llm_client.complete(judge="j", version="v", messages=MSG)).text == "NO"
    openai_server.reset(lambda req: Reply("YES", delay_s=0.3))
    leader = asyncio.create_task(llm_client.complete(judge="j", version="w", messages=MSG))
    await openai_server.wait_for_requests_async(1)  # the leader's call is in flight
    follower = asyncio.create_task(llm_client.complete(judge="j", version="w", messages=MSG))
    await asyncio.sleep(
        0
    )  # one turn of the loop: the follower reaches the leader's pending call (no I/O before)
    leader.cancel()
    r = await follower
    assert r.text == "YES"
    assert not r.cached
    assert len(openai_server.requests) == 2


async def test_odd_but_valid_and_malformed_bodies(
    openai_server: ScriptedOpenAIServer, llm_client: LLMClient
) -> None:
    openai_server.script(
        Reply("YES", include_usage=False),
        Reply(json_body={"choices": [{"message": {"content": None}, "finish_reason": "stop"}]}),
        Reply(json_body={"error": "not a completion"}),
    )
    r = await llm_client.complete(judge="j", version="1", messages=MSG)
    # no usage block: charged the documented estimate, ceil(characters / 4), of the prompt and of the reply
    prompt_estimate = estimate_tokens([m["content"] for m in MSG])
    assert (r.text, r.prompt_tokens, r.completion_tokens) == ("YES", prompt_estimate, 1)
    assert r.tokens_estimated
    assert llm_client.tokens_spent_today("j") == prompt_estimate + 1
    r = await llm_client.complete(judge="j", version="2", messages=MSG)
    assert (r.text, r.finish_reason, r.tokens_estimated) == ("", "stop", True)
    with pytest.raises(JudgeError, match=r"^bad_reply: the reply is not a chat completion$"):
        await llm_client.complete(judge="j", version="3", messages=MSG)


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_closed_port_is_connection_failed_not_timeout(transport: str) -> None:
    """Nothing listens on the port: the reason says so (the aiohttp transport raises it as a timeout)."""
    import socket

    with socket.socket() as sock:  # a free loopback port, closed again before the request
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = Settings(
        judge_base_url=f"http://127.0.0.1:{port}/v1",
        judge_model="m",
        judge_api_key="k",
        judge_max_retries=1,
        judge_http_transport=transport,
    )
    async with LLMClient(settings) as client:
        with pytest.raises(ModelUnavailableError) as ei:
            await client.complete(judge="j", version="v", messages=MSG)
    assert str(ei.value) == "judge_unavailable: connection failed after 2 attempts: Connection refused"
    assert ei.value.retries == 1
    assert client.stats.failures == 1


@pytest.mark.parametrize("key", ["sk-SECRETJUDGEKEY123", "plainSECRETJUDGEKEY123"])
async def test_refused_key_is_not_echoed(openai_server: ScriptedOpenAIServer, key: str) -> None:
    """A provider that echoes the refused key in its 401 message: the key is logged, stored and shown as ***."""
    import structlog

    settings = Settings(
        judge_base_url=openai_server.base_url, judge_model="m", judge_api_key=key, judge_max_retries=0
    )
    openai_server.script(
        Reply(status=401, error_message=f"Incorrect API key provided: {key}. Find your key at example.com.")
    )
    with structlog.testing.capture_logs() as logs:
        async with LLMClient(settings) as client:
            with pytest.raises(ModelUnavailableError) as ei:
                await client.complete(judge="j", version="v", messages=MSG)
    assert "SECRETJUDGEKEY" not in str(ei.value)
    assert str(ei.value) == (
        "judge_unavailable: HTTP 401 after 1 attempt: Incorrect API key provided: ***. Find your key at example.com."
    )
    assert logs
    assert all("SECRETJUDGEKEY" not in repr(e) for e in logs)
