"""The daily token budget: taken after the concurrency slot, reserved from the documented estimate, corrected by
``usage``; exact request counts through the real scripted server."""

from __future__ import annotations

import asyncio
import math

import pytest

from ragpulse.config import Settings
from ragpulse.errors import JudgeError
from ragpulse.judges.model.client import LLMClient, estimate_tokens
from ragpulse.judges.registry import build_judges
from ragpulse.model import JudgementStatus, Trace
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer


def _settings(server: ScriptedOpenAIServer, **kw: object) -> Settings:
    return Settings(
        judge_base_url=server.base_url,
        judge_model="judge-test",
        judge_api_key="sk-test",
        judge_max_retries=0,
        judge_cache_size=0,
        **kw,
    )


@pytest.mark.parametrize(
    ("budget", "concurrency", "prompt_chars", "calls"),
    [(50, 2, 120, 8), (100, 3, 40, 20), (95, 1, 40, 20), (1000, 4, 400, 12)],
)
async def test_queued_calls_stop_at_the_budget(
    openai_server: ScriptedOpenAIServer, budget: int, concurrency: int, prompt_chars: int, calls: int
) -> None:
    """Every reply reports the estimate as its usage, so a call is sent while spent + reserved < budget:
    exactly ⌈budget / estimate⌉ requests (at most ``calls``), whatever the concurrency."""
    messages = [{"role": "user", "content": "x" * prompt_chars}]
    estimate = estimate_tokens(["x" * prompt_chars])
    assert estimate == math.ceil(prompt_chars / 4)
    openai_server.reset(lambda req: Reply("YES", prompt_tokens=estimate, completion_tokens=0, delay_s=0.02))
    settings = _settings(openai_server, judge_daily_token_budget=budget, judge_max_concurrency=concurrency)
    async with LLMClient(settings) as client:
        results = await asyncio.gather(
            *(client.complete(judge="j", version=str(i), messages=messages) for i in range(calls)),
            return_exceptions=True,
        )
        expected = min(calls, math.ceil(budget / estimate))
        assert openai_server.request_count == expected
        refused = [r for r in results if isinstance(r, JudgeError)]
        assert [r.code for r in refused] == ["over_budget"] * (calls - expected)
        assert client.stats.over_budget == ({"j": calls - expected} if calls > expected else {})
        assert client.tokens_spent_today("j") == expected * estimate


async def test_a_reply_without_usage_is_charged_the_estimate(openai_server: ScriptedOpenAIServer) -> None:
    """Ollama-style replies without ``usage``: charged prompt and reply estimates, so the budget still holds;
    the judgement stores the estimate with ``tokens_estimated: true``."""
    openai_server.reset(lambda req: Reply("YES", include_usage=False))
    settings = _settings(openai_server, judge_daily_token_budget=300, judge_max_concurrency=1)
    trace = Trace(trace_id="t", question="When can I get a refund?", answer="Within 30 days.")
    async with LLMClient(settings) as client:
        judge = build_judges(settings, ["relevancy"], client=client)["relevancy"]
        first = await judge.judge(trace)
        (req,) = openai_server.requests
        per_call = estimate_tokens([m["content"] for m in req.messages]) + estimate_tokens(["YES"])
        assert (first.prompt_tokens, first.completion_tokens) == (per_call - 1, 1)
        assert first.flags.model_extra == {"tokens_estimated": True}
        out = [await judge.judge(trace) for _ in range(10)]
    allowed = math.ceil(300 / per_call)
    assert openai_server.request_count == allowed
    assert [j.status for j in out].count(JudgementStatus.SKIPPED) == 11 - allowed


@pytest.mark.parametrize(
    "name", ["relevancy", "faithfulness", "context_relevance", "context_precision", "answer_correctness"]
)
async def test_an_exhausted_budget_is_skipped_over_budget_in_every_judge(
    openai_server: ScriptedOpenAIServer, name: str
) -> None:
    openai_server.reset(lambda req: Reply('{"verdicts": [{"useful": true, "relevant": true}]}'))
    settings = _settings(openai_server, judge_daily_token_budget=1)
    trace = Trace(
        trace_id="t",
        question="When can I get a refund?",
        answer="Within 30 days.",
        expected_answer="Within 30 days.",
        documents=[{"content": "Refunds within 30 days."}],
    )
    async with LLMClient(settings) as client:
        judge = build_judges(settings, [name], client=client)[name]
        await judge.judge(trace)  # spends the budget (one request)
        j = await judge.judge(trace)
    assert (j.status, j.reason) == (JudgementStatus.SKIPPED, "over_budget: daily token budget of 1 spent")
    assert openai_server.request_count == 1
