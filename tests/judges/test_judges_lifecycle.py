"""What judges share is owned in one place and closed once: the LLM client and the embeddings client."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack

import pytest

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.answer.similarity import EmbeddingSimilarity
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.registry import opened_judges
from ragpulse.judges.selection import open_judges
from ragpulse.model import JudgementStatus, Trace
from ragpulse.testing.openai_server import ScriptedOpenAIServer

ANSWER = "Paris is the capital."
REF = "Paris is the capital of France."


def _settings(base_url: str) -> Settings:
    return Settings(
        judge_model="m",
        judge_base_url=base_url,
        judge_max_retries=0,
        judge_cache_size=0,
        embeddings_base_url=base_url,
        embeddings_model="emb-1",
    )


def _trace() -> Trace:
    return Trace(trace_id="t", question="Capital of France?", answer=ANSWER, expected_answer=REF)


async def test_cli_open_judges_closes_the_shared_llm_client_and_the_embeddings_client_once() -> None:
    with ScriptedOpenAIServer() as srv:
        srv.script(json.dumps({"tp": ["Paris is the capital"], "fp": [], "fn": []}))
        srv.embeddings = {ANSWER: [3.0, 4.0], REF: [4.0, 3.0]}
        async with AsyncExitStack() as stack:
            judges = await open_judges(stack, _settings(srv.base_url), ["answer_correctness", "faithfulness"])
            correctness = judges["answer_correctness"]
            sim = getattr(correctness, "sim", None)
            assert isinstance(sim, EmbeddingSimilarity)
            found = getattr(correctness, "client", None)
            assert isinstance(found, LLMClient)
            client: LLMClient = found
            assert getattr(judges["faithfulness"], "client", None) is client  # one shared client
            r = await correctness.judge(_trace())
            assert r.status is JudgementStatus.OK
            assert sim._client.is_closed() is False
        assert sim._client.is_closed() is True  # the embeddings client is closed
        assert client._closed is True  # and the shared LLM client


async def test_a_judge_closing_itself_leaves_the_shared_client_to_the_others() -> None:
    with ScriptedOpenAIServer() as srv:
        srv.on("YES")
        async with opened_judges(_settings(srv.base_url), ["relevancy", "faithfulness"]) as judges:
            await judges["faithfulness"].aclose()  # type: ignore[attr-defined]
            r = await judges["relevancy"].judge(_trace())
            assert r.status is JudgementStatus.OK
            client = getattr(judges["relevancy"], "client", None)
            assert isinstance(client, LLMClient)
            assert client._closed is False
        assert client._closed is True


async def test_an_unknown_judge_is_a_config_error_before_anything_opens() -> None:
    with pytest.raises(ConfigError, match=r"unknown judge\(s\) no_such_judge"):
        async with opened_judges(_settings("http://127.0.0.1:9/v1"), ["no_such_judge"]):
            pass
