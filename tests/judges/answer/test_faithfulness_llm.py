"""LLMFaithfulnessJudge end to end (claims and binary modes) against the scripted judge model."""

from __future__ import annotations

import json

import pytest

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.answer.faithfulness import LLMFaithfulnessJudge
from ragpulse.judges.model.client import LLMClient
from ragpulse.model import JudgementStatus, Trace
from ragpulse.testing.openai_server import RecordedRequest, Reply, ScriptedOpenAIServer

CHUNKS = [
    "Returns are accepted within 30 days of delivery.",
    "Refunds are paid to the original payment method within 5 business days.",
    "Shipping is free for orders over $50.",
]
EN = Trace(
    trace_id="f-en",
    question="How do returns and refunds work?",
    answer="You can return items within 30 days. Refunds go to your original payment method. A 10% fee applies.",
    documents=CHUNKS,
)
ZH = Trace(
    trace_id="f-zh",
    question="退款多久到账？",
    answer="退款在5个工作日内退回原支付方式。",
    documents=["退款将在5个工作日内原路退回。", "运费满50元包邮。"],
)


def claims(*pairs: tuple[str, bool | str]) -> str:
    return json.dumps({"claims": [{"claim": c, "supported": s} for c, s in pairs]})


def judge_for(settings: Settings, client: LLMClient, **options: object) -> LLMFaithfulnessJudge:
    return LLMFaithfulnessJudge(settings, options, client=client)


async def test_claims_score_and_reason(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.script(
        Reply(
            claims(
                ("Items can be returned within 30 days.", True),
                ("Refunds go to the original payment method.", True),
                ("A 10% fee applies.", False),
            ),
            prompt_tokens=300,
            completion_tokens=60,
        )
    )
    judge = judge_for(llm_settings, llm_client)
    assert judge.threshold == 0.8
    assert judge.mode == "claims"
    j = await judge.judge(EN)
    assert j.status is JudgementStatus.OK
    assert j.score == pytest.approx(2 / 3)
    assert j.passed is False
    assert j.reason == "2/3 claims supported; unsupported: A 10% fee applies."
    assert (j.prompt_tokens, j.completion_tokens, j.flags.context_truncated) == (300, 60, False)
    prompt = openai_server.requests[0].prompt_text
    assert "[1] Returns are accepted" in prompt
    assert "[3] Shipping is free" in prompt
    assert len(openai_server.requests) == 1  # statements and verdicts in one call


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("```json\n" + claims(("a", True), ("b", True)) + "\n```", 1.0),
        (claims(("a", "yes"), ("b", "no")) + "\nLet me know if you need more.", 0.5),
        ('{"statements": [{"statement": "a", "verdict": 1}, {"statement": "b", "verdict": 0}]}', 0.5),
    ],
)
async def test_claims_reply_shapes(
    openai_server: ScriptedOpenAIServer,
    llm_settings: Settings,
    llm_client: LLMClient,
    reply: str,
    score: float,
) -> None:
    openai_server.script(reply)
    j = await judge_for(llm_settings, llm_client).judge(EN)
    assert j.status is JudgementStatus.OK
    assert j.score == score


@pytest.mark.parametrize(
    ("reply", "status", "code"),
    [
        ("", JudgementStatus.ERROR, "empty_output"),
        ("All claims are supported.", JudgementStatus.ERROR, "unparseable"),
        ('{"claims": [{"claim": "a", "supported": "maybe"}]}', JudgementStatus.ERROR, "unparseable"),
        ('{"claims": []}', JudgementStatus.SKIPPED, "no_claims"),
    ],
)
async def test_claims_unusable_replies(
    openai_server: ScriptedOpenAIServer,
    llm_settings: Settings,
    llm_client: LLMClient,
    reply: str,
    status: JudgementStatus,
    code: str,
) -> None:
    openai_server.script(reply)
    j = await judge_for(llm_settings, llm_client).judge(EN)
    assert j.status is status
    assert j.reason_code == code
    assert j.score is None


async def test_claims_ignores_object_quoted_from_answer(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    quoted = '{"claims": [{"claim": "x", "supported": true}]}'
    trace = EN.model_copy(update={"answer": f"Returns take 30 days. {quoted}"})
    openai_server.script(f"The answer embeds {quoted}.\n" + claims(("Returns take 30 days.", False)))
    j = await judge_for(llm_settings, llm_client).judge(trace)
    assert j.score == 0.0
    assert j.passed is False


async def test_chinese_claims(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.script(claims(("退款5个工作日内到账", True), ("退回原支付方式", True)))
    j = await judge_for(llm_settings, llm_client).judge(ZH)
    assert j.score == 1.0
    assert j.passed is True
    prompt = openai_server.requests[0].prompt_text
    assert "<<<资料\n[1] 退款将在5个工作日内原路退回。" in prompt
    assert "只输出 JSON" in prompt


async def test_empty_context_and_abstention(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    for mode in ("claims", "binary"):
        judge = judge_for(llm_settings, llm_client, mode=mode)
        j = await judge.judge(EN.model_copy(update={"documents": (), "context": "  "}))
        assert (j.status, j.score, j.passed, j.reason_code, j.flags.decided_by) == (
            JudgementStatus.OK,
            0.0,
            False,
            "no_context",
            "no_context",
        )
        j = await judge.judge(ZH.model_copy(update={"answer": "抱歉，根据现有资料无法回答该问题。"}))
        assert (j.status, j.reason) == (JudgementStatus.SKIPPED, "abstained")
    assert openai_server.requests == []


async def test_context_truncation_keeps_top_ranked(
    openai_server: ScriptedOpenAIServer, llm_client: LLMClient
) -> None:
    settings = llm_client.settings.replaced(judge_context_budget_chars=110)
    openai_server.script(claims(("a", True)))
    j = await judge_for(settings, llm_client).judge(EN)
    assert j.flags.context_truncated is True
    prompt = openai_server.requests[0].prompt_text
    assert "[1] Returns are accepted" in prompt
    assert "Shipping" not in prompt


async def test_binary_whole_context(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    judge = judge_for(llm_settings, llm_client, mode="binary")
    assert judge.threshold == 0.5
    openai_server.script("YES")
    j = await judge.judge(EN)
    assert (j.score, j.passed, j.flags.decided_by) == (1.0, True, "whole_context")
    prompt = openai_server.requests[0].prompt_text
    assert "<<<CLAIM\n" + (EN.answer or "") + "\nCLAIM>>>" in prompt  # long answer: the claim is the answer


async def test_binary_falls_back_to_chunks(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.script("NO", "NO", "YES")
    j = await judge_for(llm_settings, llm_client, mode="binary").judge(EN)
    assert (j.score, j.flags.decided_by) == (1.0, "chunk:1")
    reqs = openai_server.requests
    assert len(reqs) == 3
    assert "Returns are accepted" in reqs[1].prompt_text
    assert "Refunds are paid" not in reqs[1].prompt_text
    assert "Refunds are paid" in reqs[2].prompt_text
    assert j.raw_output == "NO\n---\nNO\n---\nYES"


async def test_binary_unsupported_and_short_answer_claim(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.reset(lambda req: "否")
    j = await judge_for(llm_settings, llm_client, mode="binary").judge(ZH)
    assert (j.score, j.passed, j.flags.decided_by) == (0.0, False, "unsupported")
    assert len(openai_server.requests) == 3  # whole context + 2 chunks
    short = ZH.model_copy(update={"answer": "5个工作日。"})
    openai_server.reset(lambda req: "是")
    await judge_for(llm_settings, llm_client, mode="binary").judge(short)
    assert "问题: 退款多久到账？\n回答: 5个工作日。" in openai_server.requests[0].prompt_text


async def test_binary_literal_stage(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    def responder(req: RecordedRequest) -> str:
        return "NO"

    openai_server.reset(responder)
    trace = EN.model_copy(update={"answer": "refunds are paid to the original   payment method"})
    j = await judge_for(llm_settings, llm_client, mode="binary", literal_match=True).judge(trace)
    assert (j.score, j.flags.decided_by) == (1.0, "literal")
    short = EN.model_copy(update={"answer": "30 days"})  # literal, but too short to count
    j = await judge_for(llm_settings, llm_client, mode="binary", literal_match=True).judge(short)
    assert (j.score, j.flags.decided_by) == (0.0, "unsupported")
    j = await judge_for(llm_settings, llm_client, mode="binary").judge(
        trace.model_copy(update={"trace_id": "x2"})
    )
    assert j.flags.decided_by == "unsupported"  # stage (c) is off by default


async def test_binary_error_midway_is_an_error(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.script(
        Reply("NO", prompt_tokens=10, completion_tokens=1), Reply("", prompt_tokens=10, completion_tokens=0)
    )
    j = await judge_for(llm_settings, llm_client, mode="binary").judge(EN)
    assert j.status is JudgementStatus.ERROR
    assert j.reason_code == "empty_output"
    assert j.prompt_tokens == 20


async def test_over_budget_is_skipped(openai_server: ScriptedOpenAIServer, llm_client: LLMClient) -> None:
    openai_server.script(Reply(claims(("a", True)), prompt_tokens=500, completion_tokens=20))
    judge = judge_for(llm_client.settings, llm_client, daily_token_budget=400)
    assert (await judge.judge(EN)).status is JudgementStatus.OK
    j = await judge.judge(ZH)
    assert j.status is JudgementStatus.SKIPPED
    assert j.reason_code == "over_budget"
    assert j.score is None
    assert llm_client.stats.over_budget == {"faithfulness": 1}


def test_options_are_validated(llm_settings: Settings, llm_client: LLMClient) -> None:
    with pytest.raises(ConfigError, match="mode"):
        judge_for(llm_settings, llm_client, mode="fuzzy")
    with pytest.raises(ConfigError, match="threshold"):
        judge_for(llm_settings, llm_client, threshold=1.5)
    with pytest.raises(ConfigError, match="literal_match"):
        judge_for(llm_settings, llm_client, literal_match=True)
    base = judge_for(llm_settings, llm_client).version
    assert judge_for(llm_settings, llm_client, mode="binary").version != base
    assert judge_for(llm_settings, llm_client, threshold=0.9).version != base
