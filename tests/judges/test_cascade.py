"""The judge cascade (``judge.options.<name>.cascade``): exact model call counts against the scripted judge server."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.cascade import CascadeJudge
from ragpulse.judges.registry import build_judges, close_judges
from ragpulse.model import Backend, Document, Judgement, JudgementStatus, Trace
from ragpulse.testing.openai_server import ScriptedOpenAIServer

DOCS = (Document(content="The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall."),)
Q = "Where is the Eiffel Tower?"
SUPPORTED = "The Eiffel Tower is in Paris."  # offline score 1.0
UNSUPPORTED = "Bananas are yellow fruit from Ecuador."  # offline score 0.0
# completed (1) and 1889 (2) found, bananas (1) and Ecuador (1.5, a name) not: offline score 3/5.5 ≈ 0.55
HALF = "It was completed in 1889 by bananas from Ecuador."
JAPANESE = "エッフェル塔はパリにあります。"  # the offline judge cannot read kana: unsupported_language


def _f(j: Judgement) -> dict[str, Any]:
    return j.flags.model_dump()


def _trace(tid: str, answer: str) -> Trace:
    return Trace(trace_id=tid, question=Q, answer=answer, documents=DOCS)


def _settings(srv: ScriptedOpenAIServer, **options: object) -> Settings:
    return Settings(
        judge_base_url=srv.base_url,
        judge_model="judge-test",
        judge_api_key="sk-test",
        judge_max_retries=0,
        judge_timeout_s=5.0,
        judge_options={
            "faithfulness": {
                "mode": "binary",
                "cascade": {"first": "heuristic", "band": [0.3, 0.7]},
                **options,
            }
        },
    )


async def test_cascade_calls_the_model_only_when_uncertain(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.on("YES\nSupported.")
    judges = build_judges(_settings(openai_server), ["faithfulness"])
    judge = judges["faithfulness"]
    assert isinstance(judge, CascadeJudge)
    try:
        sure_pass = await judge.judge(_trace("a", SUPPORTED))
        sure_fail = await judge.judge(_trace("b", UNSUPPORTED))
        assert openai_server.request_count == 0
        assert (_f(sure_pass)["stage"], sure_pass.passed, sure_pass.backend) == (
            "first",
            True,
            Backend.HEURISTIC,
        )
        assert (_f(sure_fail)["stage"], sure_fail.passed) == ("first", False)
        assert sure_pass.prompt_tokens == 0
        assert _f(sure_pass)["cascade"]["main"] is None

        uncertain = await judge.judge(_trace("c", HALF))
        assert openai_server.request_count == 1
        assert _f(uncertain)["stage"] == "main"
        assert (uncertain.backend, uncertain.score, uncertain.passed) == (Backend.LLM, 1.0, True)
        stages = _f(uncertain)["cascade"]
        assert stages["first"]["score"] == pytest.approx(3 / 5.5)
        assert stages["first"]["prompt_tokens"] == 0
        assert stages["main"]["status"] == "ok"
        assert stages["main"]["prompt_tokens"] > 0
        assert uncertain.prompt_tokens == stages["main"]["prompt_tokens"]

        unreadable = await judge.judge(_trace("d", JAPANESE))
        assert openai_server.request_count == 2
        assert _f(unreadable)["stage"] == "main"
        assert _f(unreadable)["cascade"]["first"]["status"] == "skipped"
        assert unreadable.status is JudgementStatus.OK
        assert unreadable.passed is True

        # one version for every stage's judgements, not the main judge's alone
        assert {j.version for j in (sure_pass, uncertain, unreadable)} == {judge.version}
        assert judge.version != judge.main.version  # the main judge alone has its own version
    finally:
        await close_judges(judges)


async def test_cascade_falls_back_to_the_first_stage_when_the_budget_is_spent(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.on("NO\nNot supported.")
    judges = build_judges(_settings(openai_server, daily_token_budget=1), ["faithfulness"])
    judge = judges["faithfulness"]
    try:
        first = await judge.judge(_trace("c1", HALF))  # spends the budget
        assert _f(first)["stage"] == "main"
        assert first.passed is False
        fallback = await judge.judge(_trace("c2", HALF.replace("bananas from Ecuador", "apples from Peru")))
        assert openai_server.request_count == 1  # the budget refused the second call before any request
        assert _f(fallback)["stage"] == "first_fallback"
        assert fallback.status is JudgementStatus.OK
        assert fallback.backend is Backend.HEURISTIC
        assert fallback.score == pytest.approx(0.5, abs=0.2)
        assert _f(fallback)["cascade"]["main"]["status"] == "skipped"
        # no score from the first stage: the main stage's skip stands
        skip = await judge.judge(_trace("d", JAPANESE))
        assert (skip.status, skip.reason_code, _f(skip)["stage"]) == (
            JudgementStatus.SKIPPED,
            "over_budget",
            "main",
        )
        assert openai_server.request_count == 1
    finally:
        await close_judges(judges)


def test_cascade_options_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"^judge\.options\.faithfulness\.cascade\.band: .*low <= high"):
        build_judges(
            Settings(judge_options={"faithfulness": {"cascade": {"band": [0.8, 0.2]}}}), ["faithfulness"]
        )
    with pytest.raises(ConfigError, match=r"cascade: the main stage needs a judge model"):
        build_judges(
            Settings(judge_options={"faithfulness": {"cascade": {"band": [0.2, 0.8]}}}), ["faithfulness"]
        )
    with pytest.raises(ConfigError, match=r"^judge\.options\.keyword\.cascade: unknown option"):
        build_judges(Settings(judge_options={"keyword": {"cascade": {"band": [0.2, 0.8]}}}), ["keyword"])


async def test_trace_view_shows_the_deciding_stage(openai_server: ScriptedOpenAIServer) -> None:
    from ragpulse.cli._render import cascade_lines
    from ragpulse.model import TraceOutcome, TraceResult
    from ragpulse.portal.traces import judgement_view

    openai_server.on("YES\nSupported.")
    judges = build_judges(_settings(openai_server), ["faithfulness"])
    try:
        j = await judges["faithfulness"].judge(_trace("c", HALF))
    finally:
        await close_judges(judges)
    assert judgement_view(j, HALF).stage == "main"
    result = TraceResult(trace=_trace("c", HALF), outcome=TraceOutcome.EVALUATED, judgements=(j,))
    (line,) = cascade_lines(result)
    assert line.startswith("cascade faithfulness: decided by main (first heuristic ok score 0.545 0 tokens ")
    assert "; main llm judge-test ok score 1.000 " in line
