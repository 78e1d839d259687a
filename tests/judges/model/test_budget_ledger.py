"""The daily token budget shared through PostgreSQL: two clients (two replicas) on one database spend one budget."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime

import asyncpg
import pytest

from ragpulse.config import Settings
from ragpulse.errors import JudgeError
from ragpulse.judges.model.client import LLMClient, estimate_tokens
from ragpulse.protocols import TokenLedger
from ragpulse.store.postgres import PostgresStore
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer
from store.store_factories import store_settings


def _settings(server: ScriptedOpenAIServer, budget: int) -> Settings:
    return Settings(
        judge_base_url=server.base_url,
        judge_model="judge-test",
        judge_api_key="sk-test",
        judge_max_retries=0,
        judge_cache_size=0,
        judge_max_concurrency=3,
        judge_daily_token_budget=budget,
    )


async def test_two_clients_on_one_database_share_one_budget(
    pg_url: str, openai_server: ScriptedOpenAIServer
) -> None:
    """Replies report usage = estimate + 2, so the ledger is corrected after every call; together the two
    clients send exactly as many requests as one client alone would (⌈budget / per call⌉), not twice that."""
    prompt = "x" * 200
    estimate = estimate_tokens([prompt])
    per_call = estimate + 2
    openai_server.reset(lambda req: Reply("YES", prompt_tokens=estimate, completion_tokens=2, delay_s=0.02))
    budget = 1000
    settings = _settings(openai_server, budget)
    a = await PostgresStore.connect(pg_url, store_settings(pg_url).store)
    b = await PostgresStore.connect(pg_url, store_settings(pg_url).store)
    try:
        assert isinstance(a, TokenLedger)
        async with LLMClient(settings, ledger=a) as ca, LLMClient(settings, ledger=b) as cb:
            messages = [{"role": "user", "content": prompt}]
            results = await asyncio.gather(
                *(
                    c.complete(judge="faithfulness", version=f"{n}-{i}", messages=messages)
                    for i in range(20)
                    for n, c in (("a", ca), ("b", cb))
                ),
                return_exceptions=True,
            )
            sent = math.ceil(budget / per_call)
            assert openai_server.request_count == sent
            refused = [r for r in results if isinstance(r, JudgeError)]
            assert [r.code for r in refused] == ["over_budget"] * (40 - sent)
            assert ca.stats.requests + cb.stats.requests == sent
            assert ca.stats.requests > 0
            assert cb.stats.requests > 0
            # each client knows its own spending and the other's as of its last ledger round trip
            assert (
                sent * per_call - 2 * per_call
                <= max(ca.tokens_spent_today("faithfulness"), cb.tokens_spent_today("faithfulness"))
                <= sent * per_call
            )
    finally:
        await a.close()
        await b.close()
    conn = await asyncpg.connect(pg_url)
    try:
        row = await conn.fetchrow("SELECT day::text, judge, tokens FROM judge_token_ledger")
    finally:
        await conn.close()
    assert row is not None
    assert tuple(row) == (datetime.now(UTC).date().isoformat(), "faithfulness", sent * per_call)


async def test_a_failed_call_gives_its_reservation_back(
    pg_url: str, openai_server: ScriptedOpenAIServer
) -> None:
    openai_server.reset(lambda req: Reply("", status=500))
    store = await PostgresStore.connect(pg_url, store_settings(pg_url).store)
    try:
        async with LLMClient(_settings(openai_server, 1000), ledger=store) as client:
            with pytest.raises(JudgeError) as err:
                await client.complete(
                    judge="relevancy", version="v", messages=[{"role": "user", "content": "q" * 40}]
                )
            assert err.value.code == "judge_unavailable"
            assert client.tokens_spent_today("relevancy") == 0
        # the block reserved for the call is given back when the client closes
        assert await store.charge_tokens("relevancy", datetime.now(UTC).date().isoformat(), 0) == 0
    finally:
        await store.close()
