"""The adaptive judge concurrency limit against the scripted judge with latency and 429 schedules."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ragpulse.config import Settings
from ragpulse.export import install_metrics, render_metrics
from ragpulse.judges.model import client as client_module
from ragpulse.judges.model.client import AdaptiveLimit, LLMClient, retry_after_seconds
from ragpulse.testing.openai_server import Phase, Reply, ScriptedOpenAIServer

RETRY_AFTER_S = 1.0


def _gauge() -> float | None:
    for fam in text_string_to_metric_families(render_metrics().decode()):
        for s in fam.samples:
            if s.name == "ragpulse_judge_concurrency_limit":
                return float(s.value)
    return None  # not set yet (the limit is built with the client's first call)


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_limit_backs_off_on_429_honours_retry_after_and_recovers(
    openai_server: ScriptedOpenAIServer, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_metrics()
    # When each attempt left the client: the request hook returns once any Retry-After has elapsed, so the
    # time it returns is the send time. Keyed by (message, retry count) to match the server's records.
    sent: dict[tuple[str, str], float] = {}
    count_attempt = client_module._count_attempt

    async def recording_hook(request: httpx.Request) -> None:
        await count_attempt(request)
        message = json.loads(request.content)["messages"][0]["content"]
        sent[(message, request.headers.get("x-stainless-retry-count", "0"))] = time.monotonic()

    monkeypatch.setattr(client_module, "_count_attempt", recording_hook)
    settings = Settings(
        judge_base_url=openai_server.base_url,
        judge_model="m",
        judge_api_key="k",
        judge_max_retries=8,
        judge_cache_size=0,
        judge_http_transport=transport,
    )
    workers = 48
    calm, storm = (
        Phase(duration_s=1.5, latency_s=0.1),
        Phase(duration_s=2.0, latency_s=0.02, rate_429=0.5, retry_after_s=RETRY_AFTER_S),
    )
    answered: list[int] = []
    stop = asyncio.Event()
    samples: list[tuple[float, float]] = []  # (monotonic time, gauge)

    async def worker(w: int, client: LLMClient) -> None:
        i = 0
        while not stop.is_set():
            msg = [{"role": "user", "content": f"Is call {w}-{i} relevant?"}]
            r = await client.complete(judge="relevancy", version="v1", messages=msg)
            assert r.text
            answered.append(1)
            i += 1

    openai_server.reset(lambda req: Reply("YES"))
    async with LLMClient(settings) as client:
        openai_server.set_schedule(Phase(latency_s=0.1))
        tasks = [asyncio.create_task(worker(w, client)) for w in range(workers)]
        await openai_server.wait_for_requests_async(1)  # the client's limit (and gauge) exists from here
        # The phases count from here, not from before the client was built (slow on a loaded machine).
        openai_server.set_schedule(calm, storm, Phase(latency_s=0.1))
        storm_at = openai_server.phase_started_at(1)
        calm_again = openai_server.phase_started_at(2)
        assert storm_at is not None
        assert calm_again is not None
        peak_before = 0.0
        low = float("inf")
        recovered = False
        while time.monotonic() < calm_again + 15:
            now, gauge = time.monotonic(), _gauge()
            if gauge is None:
                await asyncio.sleep(0.02)
                continue
            g = gauge
            samples.append((now, g))
            if now < storm_at:
                peak_before = max(peak_before, g)
            elif now < calm_again + 0.5:
                low = min(low, g)
            elif g > low:
                recovered = True
                break
            await asyncio.sleep(0.02)  # sampling period of the gauge, not a wait for a condition
        stop.set()
        await asyncio.gather(*tasks)
        assert client.concurrency is not None
        holds = list(client.concurrency.holds)

    assert peak_before > 16, "the limit grows from its start (16) while the judge answers fast"
    fell_at = next((t for t, g in samples if t >= storm_at and g < peak_before), None)
    assert fell_at is not None, "the limit falls in the 429 phase"
    assert fell_at - storm_at < 5.0, "the limit falls within 5 s of the 429 phase"
    assert recovered, f"the limit rises again after the 429 phase (low {low}, samples {samples[-3:]})"

    reqs = openai_server.requests
    assert holds, "the client saw 429s with Retry-After"
    sent_at = {r.index: sent[(r.messages[0]["content"], str(r.retry_count))] for r in reqs}
    for seen_at, until in holds:
        # A request that arrives inside the hold left before the 429 was read (it was in transit); none may
        # leave after it. Send times are the client's, so a slow machine cannot blur this.
        early = [r for r in reqs if seen_at < sent_at[r.index] < until]
        assert not early, (
            f"{len(early)} requests were sent before Retry-After had elapsed: "
            f"{[(round(sent_at[r.index] - seen_at, 3), r.retry_count) for r in early]}"
        )
    assert any(r.status == 429 for r in reqs)
    # nothing lost: every call that was made got a 200 in the end, and each was answered once
    assert sum(1 for r in reqs if r.status == 200) == len(answered)


def test_aimd_control_law() -> None:
    async def run() -> None:
        lim = AdaptiveLimit(2, 40, initial=4)
        callers = [asyncio.create_task(lim.acquire()) for _ in range(20)]  # more demand than the limit
        await asyncio.sleep(0)
        assert lim.in_flight == 4
        # slow start: +1 per fast answer while the limit is in use
        for _ in range(4):
            lim.on_success(0.1)
        assert lim.limit == 8
        lim.on_overload(None)
        assert lim.limit == 4
        assert lim.decreases == 1
        lim.on_overload(2.0)  # a second overload within one base latency (0.1 s) does not halve again
        assert lim.limit == 4
        for _ in range(5):  # congestion avoidance: +1/limit per answer, +1 per window of `limit` answers
            lim.on_success(0.1)
        assert lim.limit == 5
        lim.on_success(0.5)  # latency grew (> 2 × base): hold
        assert lim.limit == 5
        t0 = time.monotonic()
        await lim.wait_clear()  # Retry-After 2 s from the last overload
        assert time.monotonic() - t0 > 1.9
        for c in callers:
            c.cancel()

    asyncio.run(run())


def test_fixed_limit_when_not_adaptive() -> None:
    async def run() -> None:
        lim = AdaptiveLimit(2, 40, adaptive=False)
        assert lim.limit == 40
        lim.on_overload(None)
        assert lim.limit == 40

    asyncio.run(run())


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({}) is None
    d = retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert d is not None
    assert d < 0
