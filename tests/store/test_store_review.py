"""Review labels (migration 222, issue 31): a label binds to the judgement version it was given for and survives a
rejudge (a new version, or the same version replaced for new content); its counts; the queue's rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.model import Source, TraceResult
from ragpulse.store.postgres import PostgresStore
from ragpulse.store.reviews import LabelCounts, QueueQuery
from store import store_factories as f

NOW = datetime.now(UTC)


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    s = await PostgresStore.connect(pg_url, Settings(store_pool_max=2).store)
    try:
        yield s
    finally:
        await s.close()


async def test_label_survives_a_rejudge_and_counts_for_its_version_only(store: PostgresStore) -> None:
    t = f.trace("r1" * 16)
    await store.write_results([f.result(t, f.ok(score=0.9, version="v1"))])
    got = await store.save_review_label(t.trace_id, "faithfulness", "v1", agree=False, reviewer="mei")
    assert got is not None
    assert (got["judge_passed"], got["label"], got["reviewer"]) == (True, False, "mei")
    # a rejudge by a new version, then the same version again on changed content (the row is replaced)
    await store.write_results([f.result(t, f.ok(score=0.2, version="v2"))])
    await store.write_results(
        [f.result(t.model_copy(update={"answer": "Another answer."}), f.ok(version="v1"))]
    )
    assert await store.review_label_counts("faithfulness", "v1") == LabelCounts(tp=0, fn=0, tn=0, fp=1)
    assert await store.review_label_counts("faithfulness", "v2") == LabelCounts(tp=0, fn=0, tn=0, fp=0)
    ((j, label),) = await store.labelled_judgements("faithfulness", "v1")
    assert (j.version, label) == ("v1", False)
    # labelling again replaces the label; an unknown judgement version is not labelled
    again = await store.save_review_label(t.trace_id, "faithfulness", "v1", agree=True, reviewer="li")
    assert again is not None
    assert (again["label"], again["reviewer"]) == (True, "li")
    assert await store.save_review_label(t.trace_id, "faithfulness", "v9", agree=True, reviewer="li") is None


async def test_queue_rules_failing_borderline_random_and_labelled(store: PostgresStore) -> None:
    def live(i: int, score: float, **kw: Any) -> TraceResult:
        t = f.trace(f"{i:032x}", source=Source.OTLP, **kw)
        return f.result(t, f.ok(score=score, version="v1"), received_at=NOW - timedelta(minutes=60 - i))

    await store.write_results(
        [
            live(1, 0.2),  # failing (threshold 0.7)
            live(2, 0.75),  # borderline (within 0.1 of 0.7)
            live(3, 0.95),  # neither: only with the random share
            live(4, 0.1, run_id="run-x"),  # a run's trace: not live traffic
            live(5, 0.1),  # failing, labelled below
        ]
    )
    await store.save_review_label(f"{5:032x}", "faithfulness", "v1", agree=True, reviewer="mei")
    q = QueueQuery(since=NOW - timedelta(days=1), until=NOW + timedelta(minutes=1),
                   versions={"faithfulness": "v1"}, margin=0.1, share=0.0)  # fmt: skip
    page = await store.review_queue(q, 10)
    assert [r["trace_id"] for r in page] == [f"{2:032x}", f"{1:032x}"]
    assert [r["judgements"][0]["reasons"] for r in page] == [["borderline"], ["failing"]]
    everything = await store.review_queue(QueueQuery(**{**q.__dict__, "share": 1.0}), 10)
    assert [r["trace_id"] for r in everything] == [f"{3:032x}", f"{2:032x}", f"{1:032x}"]
    assert everything[0]["judgements"][0]["reasons"] == ["random"]
    other_version = await store.review_queue(
        QueueQuery(**{**q.__dict__, "versions": {"faithfulness": "v2"}}), 10
    )
    assert other_version == []
