"""The judgement keeps the exact prompt the judge model received (issue 31: the trace view shows it beside the
raw reply): every call's messages, ``[role]`` headed, in call order; not kept when texts are redacted."""

from __future__ import annotations

from ragpulse.config import Settings
from ragpulse.judges.answer.relevancy import LLMRelevancyJudge
from ragpulse.judges.frame import prompt_text
from ragpulse.judges.model.client import LLMClient
from ragpulse.model import PROMPT_MAX_CHARS, Backend, Judgement, JudgementStatus, Trace
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer

TRACE = Trace(
    trace_id="t-prompt",
    question="How many days do I have to return an item?",
    answer="You can return items within 30 days of delivery.",
    documents=["Returns are accepted within 30 days of delivery."],
)


async def test_the_prompt_sent_is_the_prompt_kept(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.script(Reply("YES\nIt gives the window.", reasoning_content="It names 30 days."))
    j = await LLMRelevancyJudge(llm_settings, {}, client=llm_client).judge(TRACE)
    assert j.status is JudgementStatus.OK
    sent = openai_server.requests[-1].messages
    assert j.prompt == prompt_text(sent)
    assert j.prompt is not None
    assert j.prompt.startswith(f"[{sent[0]['role']}]\n")
    assert TRACE.question is not None
    assert TRACE.question in j.prompt
    assert j.raw_output == "<think>It names 30 days.</think>\nYES\nIt gives the window."


async def test_no_prompt_is_kept_when_texts_are_redacted(openai_server: ScriptedOpenAIServer) -> None:
    settings = Settings(
        judge_base_url=openai_server.base_url,
        judge_model="judge-test",
        judge_api_key="k",
        store_redact_text=True,
    )
    openai_server.script(Reply("YES"))
    async with LLMClient(settings) as client:
        j = await LLMRelevancyJudge(settings, {}, client=client).judge(TRACE)
    assert j.score == 1.0
    assert j.prompt is None


def test_prompt_text_heads_each_message_with_its_role() -> None:
    got = prompt_text([{"role": "system", "content": "Be strict."}, {"role": "user", "content": "Q?"}])
    assert got == "[system]\nBe strict.\n\n[user]\nQ?"


def test_a_long_prompt_keeps_its_start_and_end_and_says_how_much_is_left_out() -> None:
    text = "S" * 30_000 + "E" * 30_000
    j = Judgement(
        judge="x", version="v", backend=Backend.LLM, status=JudgementStatus.ERROR, reason="e", prompt=text
    )
    assert j.prompt is not None
    half = (PROMPT_MAX_CHARS - 80) // 2
    assert len(j.prompt) <= PROMPT_MAX_CHARS
    assert j.prompt.startswith("S" * half + "\n[… 27,312 characters left out …]\n")
    assert j.prompt.endswith("E" * half)
    assert 60_000 - 2 * half == 27_312
