"""Shadow judgements in PostgreSQL: content hash, reuse lookups of a promotion, redaction like judgements."""

from __future__ import annotations

import asyncpg

from ragpulse.config import Settings
from ragpulse.model import Backend, Judgement, JudgementStatus
from ragpulse.store import PostgresStore


def _j(version: str, status: JudgementStatus = JudgementStatus.OK) -> Judgement:
    ok = status is JudgementStatus.OK
    return Judgement(
        judge="faithfulness",
        version=version,
        backend=Backend.LLM,
        model="m",
        score=0.25 if ok else None,
        passed=False if ok else None,
        threshold=0.5,
        status=status,
        reason="the answer says 'salary is 9000'" if ok else "judge_unavailable: HTTP 500 'salary'",
        raw_output="NO: 'salary is 9000' is not in the context",
        prompt_tokens=40,
        completion_tokens=3,
    )


async def test_reuse_lookups_by_version_status_and_content(pg_url: str) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_database_url=pg_url).store)
    try:
        await store.write_shadow_judgements("t1", "hr", [_j("v2")], "h1")
        await store.write_shadow_judgements("t2", "hr", [_j("v2", JudgementStatus.ERROR)], "h2")
        await store.write_shadow_judgements("t3", "hr", [_j("v3")], None)  # before migration 155: no hash
        pairs = [("faithfulness", "v1"), ("faithfulness", "v2"), ("faithfulness", "v3")]
        assert await store.shadow_versions(pairs) == {("faithfulness", "v2")}
        found = await store.reusable_shadows(
            [("t1", "h1"), ("t1", "other"), ("t2", "h2"), ("t3", "h3")], [("faithfulness", "v2")]
        )
        assert list(found) == [("t1", "h1")]
        j = found[("t1", "h1")][("faithfulness", "v2")]
        assert (j.score, j.prompt_tokens, j.raw_output) == (
            0.25,
            40,
            "NO: 'salary is 9000' is not in the context",
        )
        assert j.flags.model_dump()["judged_at"]
        counts = await store.shadow_counts("faithfulness", "v2")
        assert (counts["reusable"], counts["other"], counts["since"]) == (1, 1, None)  # no trace rows stored
    finally:
        await store.close()


async def test_shadow_rows_are_redacted_like_judgements(pg_url: str) -> None:
    store = await PostgresStore.connect(
        pg_url, Settings(store_database_url=pg_url, store_redact_text=True).store
    )
    try:
        await store.write_shadow_judgements("t1", "hr", [_j("v2"), _j("v9", JudgementStatus.ERROR)], "h1")
    finally:
        await store.close()
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch("SELECT version, reason, raw_output FROM shadow_judgements ORDER BY version")
    finally:
        await conn.close()
    assert [(r["version"], r["reason"], r["raw_output"]) for r in rows] == [
        ("v2", "", None),
        ("v9", "judge_unavailable", None),
    ]
