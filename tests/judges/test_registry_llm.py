"""Reference judges and checklists built by the registry, over the shared LLM client and scripted server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kestrel import CHECKLISTS
from ragpulse import protocols
from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.checklist.judge import ChecklistJudge
from ragpulse.judges.frame import JudgeBase
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.registry import available_judges, build_judges
from ragpulse.judges.retrieval.context import ContextPrecisionJudge
from ragpulse.model import Backend, JudgementStatus, Trace
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer

NAMES = ["context_precision", "context_recall", "context_relevance", "answer_correctness"]


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def _settings(srv: ScriptedOpenAIServer, **kw: object) -> Settings:
    return Settings(
        judge_base_url=srv.base_url,
        judge_model="judge-test",
        judge_api_key="sk-test",
        judge_max_retries=2,
        judge_timeout_s=5.0,
        **kw,
    )


def test_available_and_heuristic_build() -> None:
    assert set(NAMES) <= set(available_judges())
    judges = build_judges(Settings(), NAMES)
    assert all(j.backend is Backend.HEURISTIC for j in judges.values())
    with pytest.raises(
        ConfigError, match=r"^judge\.options\.context_precision\.k: .*greater than or equal to 1"
    ):
        build_judges(Settings(judge_options={"context_precision": {"k": 0}}), ["context_precision"])
    # checked at start-up whatever the backend, for a configured judge that is not even enabled
    with pytest.raises(ConfigError, match=r"^judge\.options\.faithfulness\.treshold: unknown option"):
        build_judges(Settings(judge_options={"faithfulness": {"treshold": 0.7}}), ["keyword"])
    # an LLM-only option stays valid without a judge model (the heuristic judge ignores it)
    assert build_judges(Settings(judge_options={"faithfulness": {"mode": "binary"}}), ["faithfulness"])


async def test_llm_build_shares_client_retries_and_caches(server: ScriptedOpenAIServer) -> None:
    s = _settings(server)
    async with LLMClient(s) as client:
        await _shared_client_checks(server, build_judges(s, NAMES, client=client))


async def _shared_client_checks(server: ScriptedOpenAIServer, judges: dict[str, protocols.Judge]) -> None:
    assert all(j.backend is Backend.LLM for j in judges.values())
    cp = judges["context_precision"]
    ac = judges["answer_correctness"]
    assert isinstance(cp, ContextPrecisionJudge)
    server.script(
        Reply(status=429, retry_after=0.01),
        json.dumps({"verdicts": [{"passage": 1, "useful": False}, {"passage": 2, "useful": True}]}),
    )
    t = Trace(trace_id="x", question="q?", answer="a", expected_answer="ref", documents=["c1", "c2"])
    r = await cp.judge(t)
    assert r.status is JudgementStatus.OK
    assert r.score == 0.5
    assert r.flags.retries == 1
    assert r.model == "judge-test"
    assert r.prompt_tokens > 0
    again = await cp.judge(t)  # same version + inputs: served from the shared client's cache
    assert again.score == 0.5
    assert again.flags.cached is True
    assert len(server.requests) == 2
    server.script(Reply(content='{"tp": ["x"]', finish_reason="length"))
    assert isinstance(ac, JudgeBase)
    trunc = await ac.judge(t)
    assert trunc.status is JudgementStatus.ERROR
    assert trunc.reason_code == "truncated_output"


async def test_checklists_from_settings_via_registry(server: ScriptedOpenAIServer) -> None:
    s = _settings(
        server, judge_checklists={"order_delay_answer": str(CHECKLISTS / "order_delay_answer.yaml")}
    )
    async with LLMClient(s) as client:
        j = build_judges(s, ["order_delay_answer"], client=client)["order_delay_answer"]
        await _checklist_checks(server, j)
    with pytest.raises(ConfigError, match="clash"):
        build_judges(Settings(judge_checklists={"faithfulness": {"version": "1", "items": []}}), ["keyword"])
    with pytest.raises(ConfigError, match="unknown judge"):
        build_judges(Settings(), ["order_delay_answer"])


async def _checklist_checks(server: ScriptedOpenAIServer, j: object) -> None:
    assert isinstance(j, ChecklistJudge)
    assert j.checklist.version == "2026.11-1"
    server.script(*[json.dumps({"pass": True, "reason": "ok"})] * 4)
    t = Trace(
        trace_id="d",
        app="kestrel-support",
        scenario="order_delay",
        question="Where is my order?",
        answer="Sorry! It ships in 3 days.",
    )
    r = await j.judge(t)
    assert r.score == 1.0
    assert r.declared_version == "2026.11-1"
    assert len(server.requests) == 4


@pytest.mark.parametrize(
    ("name", "options", "needle"),
    [
        (
            "context_precision",
            {"treshold": 0.5},
            r"^judge\.options\.context_precision\.treshold: unknown option; allowed: ",
        ),
        (
            "context_recall",
            {"k": "3"},
            r"^judge\.options\.context_recall\.k: Input should be a valid integer, got '3'$",
        ),
        (
            "context_relevance",
            {"threshold": 1.5},
            r"^judge\.options\.context_relevance\.threshold: .*less than or equal to 1",
        ),
        (
            "context_precision",
            {"method": "magic"},
            r"^judge\.options\.context_precision\.method: Input should be 'auto'",
        ),
        ("answer_correctness", {"weights": ["a", 1]}, r"^judge\.options\.answer_correctness\.weights: "),
        ("answer_correctness", {"min_coverage": -1}, r"^judge\.options\.answer_correctness\.min_coverage: "),
    ],
)
def test_bad_options_are_config_errors(name: str, options: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        build_judges(Settings(judge_options={name: options}), [name])
