"""The app's own token usage and cost as metrics beside the judge's tokens (issue 28): counted once per trace
through the real engine (a redelivery adds nothing), cost only for models in the price table."""

from __future__ import annotations

import uuid

from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.export import MetricsExporter, render_metrics
from ragpulse.export.otel_setup import MetricsRuntime
from ragpulse.model import Backend, ModelUsage, Source, Trace
from ragpulse.testing import MemoryStore, ScriptedJudge

from .helpers import value


async def test_app_tokens_and_cost_by_app_and_model(metrics_runtime: MetricsRuntime) -> None:
    app = f"chat-{uuid.uuid4().hex[:8]}"
    priced, unpriced = f"gpt-{uuid.uuid4().hex[:6]}", f"inhouse-{uuid.uuid4().hex[:6]}"
    settings = Settings(
        engine_sampling_rate=1.0,
        export_model_prices={priced: {"prompt": 2.0, "completion": 8.0}},
    )
    exporter = MetricsExporter(settings.export)
    trace = Trace(
        trace_id=uuid.uuid4().hex,
        app=app,
        question="Is it paid in full?",
        answer="Yes.",
        model=priced,
        source=Source.KAFKA,
        prompt_tokens=120,
        completion_tokens=17,
        total_prompt_tokens=160,
        total_completion_tokens=25,
        usage=(
            ModelUsage(model=priced, prompt_tokens=120, completion_tokens=17),
            ModelUsage(model=unpriced, prompt_tokens=40, completion_tokens=8),
        ),
    )
    jname = f"rel_{uuid.uuid4().hex[:8]}"
    judge = ScriptedJudge(jname, 0.9, tokens=(300, 5), backend=Backend.LLM)
    async with Engine({jname: judge}, MemoryStore(), settings.engine, [exporter]) as eng:
        await eng.submit(trace)
        await eng.submit(trace)  # a redelivery: the trace row exists, nothing is counted again
        assert await eng.drain(5)
    assert exporter.failures == 0
    text = render_metrics().decode()
    tokens = "ragpulse_app_tokens_total"
    assert value(text, tokens, app=app, model=priced, kind="prompt") == 120
    assert value(text, tokens, app=app, model=priced, kind="completion") == 17
    assert value(text, tokens, app=app, model=unpriced, kind="prompt") == 40
    assert value(text, tokens, app=app, model=unpriced, kind="completion") == 8
    assert value(text, "ragpulse_app_cost_total", app=app, model=priced) == (120 * 2.0 + 17 * 8.0) / 1e6
    # a model missing from the price table has tokens and no cost series (never a cost of 0)
    assert value(text, "ragpulse_app_cost_total", app=app, model=unpriced) is None
    # the judge's tokens beside them
    assert value(text, "ragpulse_judge_tokens_total", judge=jname, kind="prompt") == 300
