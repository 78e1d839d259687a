"""Issue 15 item 4: two ``ragpulse serve`` processes in one consumer group on an 8-partition topic, one SIGKILLed
mid-stream: nothing lost, nothing judged twice, the survivor takes every partition over."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ingest.scale_out_util import run_scale_out
from ingest.serve_testutil import ServeProcess


@pytest.fixture
def procs() -> Iterator[list[ServeProcess]]:
    made: list[ServeProcess] = []
    yield made
    for p in made:
        p.close()


@pytest.mark.slow
@pytest.mark.integration
async def test_two_replicas_one_killed_lose_and_duplicate_nothing(
    kafka_bootstrap: str, pg_url: str, procs: list[ServeProcess]
) -> None:
    r = await run_scale_out(kafka_bootstrap, pg_url, processes=2, traces=4000, procs=procs)
    print(r.as_dict())
    assert 0 < r.stored_at_kill < r.traces
    assert r.lost == 0
    assert r.duplicated == 0
    assert r.rebalance_s < 60
