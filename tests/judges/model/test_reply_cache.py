"""Issue 27 item 3: the judge's reply cache holds only replies that made an ``ok`` verdict.

During a fault phase ``empty_output`` replies were cached and served again (``flags.cached = true``, no model
call) for the same prompts after the model had recovered. A reply that became an ``error`` or ``skipped``
judgement is never cached: the next judgement of the same prompt asks the model again.
"""

from __future__ import annotations

import pytest

from ragpulse.config import Settings
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.registry import build_judges
from ragpulse.model import Document, JudgementStatus, Trace
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer

TRACE = Trace(
    trace_id="t1",
    question="When can I get a refund?",
    answer="Within 30 days.",
    documents=[Document(id="d1", content="Refunds within 30 days.")],
)


def _settings(server: ScriptedOpenAIServer) -> Settings:
    return Settings(
        judge_base_url=server.base_url,
        judge_model="m",
        judge_api_key="k",
        judge_max_retries=0,
        judge_cache_size=100,
    )


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (Reply(""), "empty_output"),
        (Reply("   \n"), "empty_output"),
        (Reply("I cannot tell."), "unparseable"),
        (Reply("YES", finish_reason="length"), "truncated_output"),
        (Reply("busy", status=500), "judge_unavailable"),
    ],
    ids=["empty", "blank", "unparseable", "truncated", "http-500"],
)
async def test_an_error_reply_is_not_cached_the_next_call_reaches_the_model(
    openai_server: ScriptedOpenAIServer, bad: Reply, reason: str
) -> None:
    openai_server.script(bad, Reply("YES"))
    async with LLMClient(_settings(openai_server)) as client:
        judge = build_judges(_settings(openai_server), ["relevancy"], client=client)["relevancy"]
        first = await judge.judge(TRACE)
        assert first.status is JudgementStatus.ERROR
        assert first.reason is not None
        assert first.reason.startswith(reason)
        second = await judge.judge(TRACE)  # same prompt: reaches the model, which now answers well
        assert len(openai_server.requests) == 2
        assert second.status is JudgementStatus.OK
        assert not second.flags.cached
        third = await judge.judge(TRACE)  # the good verdict is cached
        assert len(openai_server.requests) == 2
        assert third.status is JudgementStatus.OK
        assert third.flags.cached
        assert third.score == second.score


async def test_a_skipped_judgement_is_not_cached(openai_server: ScriptedOpenAIServer) -> None:
    # faithfulness (claims) with a reply that lists no claims: skipped no_claims; then a real answer
    claims = '{"claims": [{"claim": "A refund is possible within 30 days.", "supported": true}]}'
    openai_server.script(Reply('{"claims": []}'), Reply(claims))
    settings = _settings(openai_server)
    async with LLMClient(settings) as client:
        judge = build_judges(settings, ["faithfulness"], client=client)["faithfulness"]
        first = await judge.judge(TRACE)
        assert first.status is JudgementStatus.SKIPPED
        second = await judge.judge(TRACE)
        assert len(openai_server.requests) == 2
        assert second.status is JudgementStatus.OK
        assert not second.flags.cached


async def test_a_reply_never_kept_is_asked_again(openai_server: ScriptedOpenAIServer) -> None:
    msgs = [{"role": "user", "content": "Is it relevant?"}]
    openai_server.script(Reply(""), Reply("YES"))
    async with LLMClient(_settings(openai_server)) as client:
        first = await client.complete(judge="j", version="v", messages=msgs)
        assert first.text == ""  # not kept: the caller found it empty
        second = await client.complete(judge="j", version="v", messages=msgs)
        assert (second.text, second.cached) == ("YES", False)
        client.keep(second)
        third = await client.complete(judge="j", version="v", messages=msgs)
        assert (third.text, third.cached) == ("YES", True)
    assert len(openai_server.requests) == 2
