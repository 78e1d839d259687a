"""The engine's own instruments, read back from the Prometheus exposition."""

from __future__ import annotations

import gc

from prometheus_client.parser import text_string_to_metric_families

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.export import install_metrics, render_metrics
from ragpulse.model import Source, Trace
from ragpulse.testing.fakes import MemoryStore, ScriptedJudge


def _value(name: str, **labels: str) -> float:
    for fam in text_string_to_metric_families(render_metrics().decode()):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


async def test_received_and_not_sampled_counted_once_per_stored_trace() -> None:
    # engines of earlier tests that stopped with a trace queued and wait in a reference cycle for the garbage
    # collector still count in the depth gauge (held weakly) until it runs: when depends on earlier allocations
    gc.collect()
    install_metrics()
    received0 = _value("ragpulse_traces_received_total", source="kafka")
    not_sampled0 = _value("ragpulse_traces_not_sampled_total")
    store = MemoryStore()
    traces = [Trace(trace_id=f"m-{i}", question="q", answer="a", source=Source.KAFKA) for i in range(3)]
    async with Engine({"a": ScriptedJudge("a")}, store, Settings(engine_sampling_rate=0.0).engine) as eng:
        for t in traces + traces:  # the second round is a redelivery
            await eng.submit(t)
    assert _value("ragpulse_traces_received_total", source="kafka") - received0 == 6
    assert _value("ragpulse_traces_not_sampled_total") - not_sampled0 == 3
    assert _value("ragpulse_engine_queue_depth") == 0


async def test_errored_trace_is_not_judged_and_counted_once() -> None:
    """Issue 11 item 4: a trace its source reported as failed is stored not_evaluable/trace_error, counted in
    ragpulse_traces_errored_total once (not again on redelivery), and no judge runs (no score histogram)."""
    install_metrics()
    errored0 = _value("ragpulse_traces_errored_total", source="otlp", app="hr")
    judge = ScriptedJudge("a")
    store = MemoryStore()
    t = Trace(
        trace_id="e-1",
        question="q",
        answer="Sorry, something went wrong",
        app="hr",
        source=Source.OTLP,
        error="httpx.ReadTimeout: upstream timeout",
    )
    async with Engine({"a": judge}, store, Settings().engine) as eng:
        await eng.submit(t)
        await eng.submit(t)
    result = store.traces["e-1"]
    assert (result.outcome.value, result.outcome_reason, result.judgements) == (
        "not_evaluable",
        "trace_error",
        (),
    )
    assert judge.calls == 0
    assert _value("ragpulse_traces_errored_total", source="otlp", app="hr") - errored0 == 1
