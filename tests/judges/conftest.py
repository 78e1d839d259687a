"""Fixtures for judge tests: settings and a client pointing at the scripted judge server (``openai_server``,
tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from ragpulse.config import Settings
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.model.params import PARAMETERS
from ragpulse.testing.openai_server import ScriptedOpenAIServer


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


@pytest.fixture(autouse=True)
def _fresh_parameter_memory() -> Iterator[None]:
    """Every judge test starts with nothing learnt about what an endpoint takes (the memory lives as long as the
    process, and the scripted server keeps one base URL for the session)."""
    PARAMETERS.forget()
    yield
    PARAMETERS.forget()
