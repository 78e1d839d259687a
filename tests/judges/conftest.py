"""Fixtures for judge tests: the scripted OpenAI-compatible server and settings pointing at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from ragpulse.config import Settings
from ragpulse.judges.model.client import LLMClient
from ragpulse.testing.openai_server import ScriptedOpenAIServer


@pytest.fixture(scope="session")
def _openai_server_session() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def openai_server(_openai_server_session: ScriptedOpenAIServer) -> Iterator[ScriptedOpenAIServer]:
    """A running scripted OpenAI-compatible server, emptied (no queued replies, no records) for each test."""
    _openai_server_session.reset()
    yield _openai_server_session
    _openai_server_session.reset()


@pytest.fixture
def llm_settings(openai_server: ScriptedOpenAIServer) -> Settings:
    """Settings with a judge model served by :func:`openai_server` (2 retries, short timeout)."""
    return Settings(
        judge_base_url=openai_server.base_url,
        judge_model="judge-test",
        judge_api_key="sk-test-not-a-real-key",
        judge_max_retries=2,
        judge_timeout_s=5.0,
    )


@pytest.fixture
async def llm_client(llm_settings: Settings) -> AsyncIterator[LLMClient]:
    """A fresh :class:`LLMClient` (empty cache) on :func:`llm_settings`, closed after the test."""
    client = LLMClient(llm_settings)
    yield client
    await client.aclose()
