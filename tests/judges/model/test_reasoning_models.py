"""Reasoning-era judge models against the scripted server: the token-limit parameter and the temperature
(refused → one retry, remembered per (base URL, model)), reasoning tokens in the judgement, the budget and the
cap, and a reply cut by the cap while reasoning (issue 24 items 1–3)."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.judges.answer.relevancy import LLMRelevancyJudge
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.model.params import PARAMETERS, family_of, refused_parameter
from ragpulse.judges.registry import build_judges
from ragpulse.model import JudgementStatus, Trace
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer, context_length_exceeded

MSG = [{"role": "user", "content": "Is it relevant?"}]
TRACE = Trace(
    trace_id="t-1",
    question="How many days do I have to return an item?",
    answer="You can return items within 30 days of delivery.",
)


def _settings(base_url: str, model: str, **kw: Any) -> Settings:
    return Settings(judge_base_url=base_url, judge_model=model, judge_api_key="k", judge_max_retries=0, **kw)


def _token_keys(server: ScriptedOpenAIServer) -> list[tuple[str, ...]]:
    """Per request: which of max_tokens / max_completion_tokens / temperature it sent."""
    keys = ("max_tokens", "max_completion_tokens", "temperature")
    return [tuple(k for k in keys if k in r.body) for r in server.requests]


async def test_unknown_model_refusing_max_tokens_retries_once_and_remembers(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.refuse("max_tokens")
    openai_server.script("YES", "NO", "YES")
    async with LLMClient(_settings(openai_server.base_url, "acme-judge-9")) as client:
        first = await client.complete(judge="relevancy", version="v", messages=MSG)
        second = await client.complete(judge="relevancy", version="v2", messages=MSG)
    assert (first.text, first.retries, second.text, second.retries) == ("YES", 1, "NO", 0)
    assert [r.status for r in openai_server.requests] == [400, 200, 200]
    assert _token_keys(openai_server) == [
        ("max_tokens", "temperature"),
        ("max_completion_tokens", "temperature"),  # the one retry
        ("max_completion_tokens", "temperature"),  # the next call sends the right parameter first
    ]
    assert openai_server.requests[1].body["max_completion_tokens"] == 1024
    # A different base URL (the same server without /v1) starts fresh: max_tokens first again.
    other = openai_server.base_url.removesuffix("/v1")
    async with LLMClient(_settings(other, "acme-judge-9")) as client:
        third = await client.complete(judge="relevancy", version="v3", messages=MSG)
    assert third.text == "YES"
    assert _token_keys(openai_server)[3:] == [
        ("max_tokens", "temperature"),
        ("max_completion_tokens", "temperature"),
    ]


async def test_reasoning_family_sends_max_completion_tokens_with_room_and_no_temperature(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.refuse("max_tokens")
    openai_server.refuse("temperature", allowed=(1,))
    openai_server.script(Reply("YES", reasoning_tokens=700))
    async with LLMClient(_settings(openai_server.base_url, "o4-mini")) as client:
        r = await client.complete(judge="relevancy", version="v", messages=MSG)
    assert (r.text, r.retries, r.reasoning_tokens, r.max_completion_tokens) == ("YES", 0, 700, 1024 + 8192)
    assert len(openai_server.requests) == 1
    body = openai_server.requests[0].body
    assert body["max_completion_tokens"] == 9216
    assert "max_tokens" not in body
    assert "temperature" not in body


async def test_server_knowing_only_max_tokens_gets_it_after_one_refusal(
    openai_server: ScriptedOpenAIServer,
) -> None:
    """A compatible server named like a reasoning family that refuses max_completion_tokens (vLLM's 400 wording,
    no ``param``)."""
    vllm_400 = Reply(
        status=400, error_message="1 validation error: max_completion_tokens: Extra inputs are not permitted"
    )
    openai_server.refuse("max_completion_tokens", reply=vllm_400)
    openai_server.refuse("temperature", allowed=(1,))
    openai_server.script("NO", "NO")
    async with LLMClient(_settings(openai_server.base_url, "gpt-5-mini")) as client:
        await client.complete(judge="j", version="v", messages=MSG)
        await client.complete(judge="j", version="v2", messages=MSG)
    assert _token_keys(openai_server) == [("max_completion_tokens",), ("max_tokens",), ("max_tokens",)]
    assert openai_server.requests[1].body["max_tokens"] == 1024 + 8192  # still a reasoning model: room kept


async def test_temperature_refused_is_dropped_once_and_remembered(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.refuse("temperature", allowed=(1,))
    openai_server.script("YES", "YES")
    async with LLMClient(_settings(openai_server.base_url, "acme-thinker")) as client:
        first = await client.complete(judge="j", version="v", messages=MSG)
        await client.complete(judge="j", version="v2", messages=MSG)
    assert first.retries == 1
    assert _token_keys(openai_server) == [("max_tokens", "temperature"), ("max_tokens",), ("max_tokens",)]
    assert openai_server.requests[0].body["temperature"] == 0.0


async def test_other_400_is_not_retried(openai_server: ScriptedOpenAIServer) -> None:
    """A 400 about something else (here an invalid model) fails as before: no parameter is dropped."""
    openai_server.script(Reply(status=400, error_message="The model 'x' does not exist", error_param="model"))
    async with LLMClient(_settings(openai_server.base_url, "acme-x")) as client:
        with pytest.raises(Exception, match="judge_unavailable: HTTP 400 after 1 attempt: The model 'x'"):
            await client.complete(judge="j", version="v", messages=MSG)
    assert len(openai_server.requests) == 1


def test_refused_parameter_reads_the_400() -> None:
    sent = {"max_tokens": 5, "temperature": 0.0}
    openai_body = {"message": "Unsupported parameter: 'max_tokens' …", "param": "max_tokens", "code": "x"}
    assert refused_parameter(400, openai_body, sent) == "max_tokens"
    assert refused_parameter(400, {"message": "temperature: unsupported value 0"}, sent) == "temperature"
    assert (
        refused_parameter(400, {"message": "This model's maximum context length is 8192 tokens"}, sent)
        is None
    )
    assert refused_parameter(401, openai_body, sent) is None
    assert (
        refused_parameter(400, {"message": "Unsupported: max_tokens and temperature"}, sent) is None
    )  # ambiguous
    families = [family_of(m) for m in ("o3", "openai/o1-mini", "gpt-5", "gpt-4o", "deepseek-reasoner")]
    assert [f.name if f is not None else None for f in families] == [
        "openai-reasoning",
        "openai-reasoning",
        "openai-reasoning",
        None,
        "open-reasoning",
    ]


async def test_per_judge_temperature_option_is_sent_and_versioned(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.script("YES")
    warm = LLMRelevancyJudge(llm_settings, {"temperature": 0.3}, client=llm_client)
    default = LLMRelevancyJudge(llm_settings, {}, client=llm_client)
    j = await warm.judge(TRACE)
    assert j.score == 1.0
    assert openai_server.requests[0].body["temperature"] == 0.3
    assert warm.version != default.version


#: The golden LLM settings of tests/judges/test_versions.py (nothing is sent).
GOLDEN = {
    "judge_base_url": "http://127.0.0.1:9/v1",
    "judge_model": "judge-golden",
    "judge_api_key": "sk-golden",
}


def test_default_judge_version_does_not_depend_on_what_the_server_takes() -> None:
    """Omitting a refused temperature, switching the token parameter or dropping the response format is how a
    request is delivered, not what is asked: the version stays that of tests/judges/test_versions.py."""
    before = build_judges(Settings(**GOLDEN), ["relevancy"])["relevancy"].version
    learnt = PARAMETERS.get("http://127.0.0.1:9/v1", "judge-golden")
    PARAMETERS.learn(
        "http://127.0.0.1:9/v1",
        "judge-golden",
        type(learnt)(
            token_param="max_completion_tokens", temperature=False, response_format=False, reasoning=True
        ),
    )
    after = build_judges(Settings(**GOLDEN), ["relevancy"])["relevancy"].version
    off = build_judges(Settings(**GOLDEN, judge_structured_output="off"), ["relevancy"])["relevancy"].version
    assert (
        before == after == off == "66830102f066"
    )  # the golden LLM relevancy version (tests/judges/test_versions.py)


@pytest.mark.parametrize(
    ("reply", "completion", "reasoning"),
    [
        # OpenAI: reasoning inside completion_tokens (5 visible + 40 reasoning)
        (Reply("YES", prompt_tokens=10, completion_tokens=45, reasoning_tokens=40), 45, 40),
        # xAI: reasoning beside completion_tokens (total = 10 + 5 + 40)
        (
            Reply(
                "YES",
                prompt_tokens=10,
                completion_tokens=5,
                reasoning_tokens=40,
                reasoning_in_completion=False,
            ),
            45,
            40,
        ),
    ],
)
async def test_reasoning_tokens_count_in_the_judgement(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient, reply: Reply,
    completion: int, reasoning: int,
) -> None:  # fmt: skip
    openai_server.script(reply)
    j = await LLMRelevancyJudge(llm_settings, {}, client=llm_client).judge(TRACE)
    assert (j.status, j.prompt_tokens, j.completion_tokens) == (JudgementStatus.OK, 10, completion)
    assert (j.flags.model_extra or {})["reasoning_tokens"] == reasoning
    assert llm_client.stats.completion_tokens == {"relevancy": completion}
    assert llm_client.tokens_spent_today("relevancy") == 10 + completion


async def test_budget_counts_reasoning_tokens(openai_server: ScriptedOpenAIServer) -> None:
    """Budget 100: the first reply spends 10 prompt + 5 visible + 90 reasoning tokens (counted beside
    completion_tokens by the server) = 105, so the second call is refused without a request. Counting only the
    visible tokens (15) would have let it through."""
    settings = _settings(openai_server.base_url, "acme-thinker", judge_daily_token_budget=100)
    openai_server.on(
        Reply(
            "YES", prompt_tokens=10, completion_tokens=5, reasoning_tokens=90, reasoning_in_completion=False
        )
    )
    async with LLMClient(settings) as client:
        judge = LLMRelevancyJudge(settings, {}, client=client)
        first = await judge.judge(TRACE)
        second = await judge.judge(TRACE.model_copy(update={"trace_id": "t-2", "answer": "Within 30 days."}))
        assert client.tokens_spent_today("relevancy") == 105
    assert (first.status, first.completion_tokens) == (JudgementStatus.OK, 95)
    assert second.status is JudgementStatus.SKIPPED
    assert second.reason_code == "over_budget"
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("finish_reason", ["length", "stop"])
async def test_cap_spent_on_reasoning_is_truncated_output(
    openai_server: ScriptedOpenAIServer, finish_reason: str
) -> None:
    """A reasoning model (o3) that spent the whole cap (1024 + 8192) on reasoning and returned no content:
    ``truncated_output``, whatever finish reason the server gave, never ``empty_output``."""
    openai_server.script(
        Reply(
            "",
            finish_reason=finish_reason,
            completion_tokens=9216,
            reasoning_tokens=9216,
            reasoning_content="Hmm…",
        )
    )
    settings = _settings(openai_server.base_url, "o3")
    async with LLMClient(settings) as client:
        j = await LLMRelevancyJudge(settings, {}, client=client).judge(TRACE)
    assert j.status is JudgementStatus.ERROR
    assert j.reason_code == "truncated_output"
    assert "9216" in j.reason
    assert j.completion_tokens == 9216


async def test_empty_reply_under_the_cap_stays_empty_output(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.script(Reply("", completion_tokens=3, reasoning_tokens=3))
    j = await LLMRelevancyJudge(llm_settings, {}, client=llm_client).judge(TRACE)
    assert (j.status, j.reason_code) == (JudgementStatus.ERROR, "empty_output")


async def test_a_reply_with_reasoning_teaches_the_client_to_leave_room(
    openai_server: ScriptedOpenAIServer,
) -> None:
    """An unknown model whose reply carries reasoning gets ``judge.reasoning_tokens`` more room from then on."""
    openai_server.script(Reply("YES", reasoning_content="thinking"), "YES")
    settings = _settings(openai_server.base_url, "acme-r", judge_reasoning_tokens=2000)
    async with LLMClient(settings) as client:
        await client.complete(judge="j", version="v", messages=MSG)
        second = await client.complete(judge="j", version="v2", messages=MSG)
    assert [r.body["max_tokens"] for r in openai_server.requests] == [1024, 3024]
    assert second.max_completion_tokens == 3024


async def test_reasoning_room_that_does_not_fit_the_context_is_dropped_for_that_call(
    openai_server: ScriptedOpenAIServer,
) -> None:
    """A small-context server refusing prompt + cap with room (vLLM, OpenAI: context_length_exceeded): one retry
    with the judge's cap alone; the next call tries the room again (it depends on the prompt's length)."""
    openai_server.script(context_length_exceeded(8192, 9500), "YES", "NO")
    async with LLMClient(_settings(openai_server.base_url, "o3-mini")) as client:
        first = await client.complete(judge="j", version="v", messages=MSG)
        second = await client.complete(judge="j", version="v2", messages=MSG)
    assert (first.text, first.retries, first.max_completion_tokens) == ("YES", 1, 1024)
    assert (second.text, second.max_completion_tokens) == ("NO", 9216)
    assert [r.body["max_completion_tokens"] for r in openai_server.requests] == [9216, 1024, 9216]


async def test_context_exceeded_without_room_fails_as_before(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.script(context_length_exceeded())
    async with LLMClient(_settings(openai_server.base_url, "acme-plain")) as client:
        with pytest.raises(
            Exception, match="judge_unavailable: HTTP 400 after 1 attempt: This model's maximum"
        ):
            await client.complete(judge="j", version="v", messages=MSG)
    assert len(openai_server.requests) == 1
