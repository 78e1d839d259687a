"""Issue 25 item 5: traces from outside (Kafka/OTLP with a ``runId``) attach only to a run that is running and
only to a case of its test set; a finished run's cases and report never change."""

from __future__ import annotations

from ragpulse.model import RunRecord, RunStatus, TestCase, TestSet
from ragpulse.runs.stored import report_of
from ragpulse.store.postgres import PostgresStore
from store import store_factories as f


async def test_a_finished_run_takes_no_new_cases_and_a_running_one_only_its_own(store: PostgresStore) -> None:
    cases = (TestCase(id="c1", question="Q1?"), TestCase(id="c2", question="Q2?"))
    await store.upsert_test_set(TestSet(name="set", cases=cases))
    await store.create_run(RunRecord(run_id="r", test_set="set"))
    own = f.trace("r-c1", source="replay", run_id="r", test_case_id="c1")
    await store.write_results([f.result(own, f.ok("keyword", 1.0))])
    # while running: a trace for a case of another set is not linked, one for its own case is
    await store.write_results(
        [f.result(f.trace("k-x", run_id="r", test_case_id="not-in-set"), f.ok("keyword", 0.0))]
    )
    assert [r.trace.trace_id for r in await store.get_run_results("r")] == ["r-c1"]
    run = await store.get_run("r")
    assert run is not None
    before = await report_of(store, run)
    await store.finish_run("r", RunStatus.COMPLETED, before.to_json())
    # finished: Kafka events with the run's id and new (or its own) case ids change nothing
    injected = [
        f.result(f.trace(f"kafka-{i}", source="kafka", run_id="r", test_case_id=cid), f.ok("keyword", 0.0))
        for i, cid in enumerate(["c2", "new-1", "new-2", "c1"])
    ]
    await store.write_results(injected)
    assert [r.trace.trace_id for r in await store.get_run_results("r")] == ["r-c1"]
    assert await store.count_run_results("r") == 1
    run = await store.get_run("r")
    assert run is not None
    after = await report_of(store, run)
    assert after.cases_total == before.cases_total == 1
    assert after.pass_rate == before.pass_rate
