"""SharedModelCaller: the refmetrics ModelCaller seam over the shared LLMClient."""

from __future__ import annotations

import pytest

from ragpulse.errors import JudgeError
from ragpulse.judges.llm import LLMClient
from ragpulse.judges.llm_caller import SharedModelCaller
from ragpulse.judges.refbase import ModelCaller
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer


async def test_shared_caller(openai_server: ScriptedOpenAIServer, llm_client: LLMClient) -> None:
    caller: ModelCaller = SharedModelCaller(llm_client)
    assert caller.model == "judge-test"
    openai_server.script(
        Reply(status=429, retry_after=0.01), Reply('{"verdict": 1}', prompt_tokens=7, completion_tokens=3)
    )
    r = await caller.ask(judge="context_recall", user="Is it there?", system="Be strict.")
    assert (r.text, r.prompt_tokens, r.completion_tokens, r.retries, r.cached) == (
        '{"verdict": 1}',
        7,
        3,
        1,
        False,
    )
    msgs = openai_server.requests[-1].messages
    assert msgs == [{"role": "system", "content": "Be strict."}, {"role": "user", "content": "Is it there?"}]
    again = await caller.ask(judge="context_recall", user="Is it there?", system="Be strict.")
    assert again.cached and len(openai_server.requests) == 2
    openai_server.script(Reply("cut", finish_reason="length"), Reply("  "))
    with pytest.raises(JudgeError) as ei:
        await caller.ask(judge="checklist", user="a")
    assert ei.value.code == "truncated_output"
    with pytest.raises(JudgeError) as ei:
        await caller.ask(judge="checklist", user="b")
    assert ei.value.code == "empty_output"
    assert llm_client.stats.prompt_tokens["context_recall"] == 7
