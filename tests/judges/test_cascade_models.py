"""Per-judge model options (``model``, ``base_url``, ``api_key_env``): a cascade whose first stage is a small
fact-checking model on its own server (Bespoke-MiniCheck on Ollama, here a second scripted server)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ragpulse.config import Settings, load_settings
from ragpulse.errors import ConfigError
from ragpulse.judges.cascade import CascadeJudge
from ragpulse.judges.registry import build_judges, close_judges
from ragpulse.model import Backend, Document, Judgement, JudgementStatus, Trace
from ragpulse.testing.openai_server import ScriptedOpenAIServer

DOCS = (Document(content="The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall."),)
Q = "Where is the Eiffel Tower?"
SURE = "The Eiffel Tower is in Paris. It was completed in 1889."  # small model: Yes, Yes → 1.0
HALF = "The tower is 330 metres tall. Bananas are yellow fruit from Ecuador."  # Yes, No → 0.5
TWO_THIRDS = "It was completed in 1889. Bananas grow in Ecuador. It is 330 metres tall."  # Yes, No, Yes
SMALL = "bespoke-minicheck"


@pytest.fixture
def small() -> Iterator[ScriptedOpenAIServer]:
    """The "small model" server: answers the fact-checking prompt like Bespoke-MiniCheck."""
    with ScriptedOpenAIServer() as server:
        server.on("No", contains="Claim: Bananas")
        server.on("Yes")
        yield server


def _f(j: Judgement) -> dict[str, Any]:
    return j.flags.model_dump()


def _trace(tid: str, answer: str) -> Trace:
    return Trace(trace_id=tid, question=Q, answer=answer, documents=DOCS)


def _settings(main: ScriptedOpenAIServer, small: ScriptedOpenAIServer, **faithfulness: Any) -> Settings:
    first = {"mode": "sentence_check", "model": SMALL, "base_url": small.base_url, "api_key_env": "SMALL_KEY"}
    return Settings(
        judge_base_url=main.base_url,
        judge_model="judge-test",
        judge_api_key="sk-main",
        judge_max_retries=0,
        judge_timeout_s=5.0,
        judge_model_keys={"SMALL_KEY": "sk-small"},
        judge_options={
            "faithfulness": {
                "mode": "binary",
                "cascade": {"first": first, "band": [0.3, 0.7]},
                **faithfulness,
            },
            "relevancy": {"model": SMALL, "base_url": small.base_url, "api_key_env": "SMALL_KEY"},
        },
    )


async def test_first_stage_on_the_small_model_main_stage_on_the_judge_model(
    openai_server: ScriptedOpenAIServer, small: ScriptedOpenAIServer
) -> None:
    openai_server.on("NO\nNot supported.")
    judges = build_judges(_settings(openai_server, small), ["faithfulness", "relevancy"])
    judge = judges["faithfulness"]
    assert isinstance(judge, CascadeJudge)
    try:
        first: Any = judge.first
        main: Any = judge.main
        assert (first.model, main.model) == (SMALL, "judge-test")
        # one client per distinct (base_url, model, key): the relevancy judge shares the first stage's
        assert judges["relevancy"].client is first.client  # type: ignore[attr-defined]
        assert first.client is not judge.client

        sure = await judge.judge(_trace("a", SURE))
        assert (small.request_count, openai_server.request_count) == (2, 0)  # one call per sentence
        assert (_f(sure)["stage"], sure.score, sure.passed, sure.model) == ("first", 1.0, True, SMALL)

        half = await judge.judge(_trace("b", HALF))
        assert (small.request_count, openai_server.request_count) == (4, 1)
        assert (_f(half)["stage"], half.backend, half.model, half.passed) == (
            "main",
            Backend.LLM,
            "judge-test",
            False,
        )
        stages = _f(half)["cascade"]
        assert (stages["first"]["score"], stages["first"]["model"], stages["main"]["model"]) == (
            0.5,
            SMALL,
            "judge-test",
        )
        assert stages["first"]["prompt_tokens"] > 0
        assert stages["main"]["prompt_tokens"] > 0

        assert {r.model for r in small.requests} == {SMALL}
        assert {r.headers.get("authorization") for r in small.requests} == {"Bearer sk-small"}
        assert {r.model for r in openai_server.requests} == {"judge-test"}
        assert {r.headers.get("authorization") for r in openai_server.requests} == {"Bearer sk-main"}
        # token statistics and budgets: the small model's under faithfulness@bespoke-minicheck
        assert set(first.client.stats.prompt_tokens) == {f"faithfulness@{SMALL}"}
        assert set(main.client.stats.prompt_tokens) == {"faithfulness"}
    finally:
        await close_judges(judges)
    assert first.client._closed
    assert main.client._closed


async def test_budget_spent_falls_back_to_the_first_stage_on_the_small_model(
    openai_server: ScriptedOpenAIServer, small: ScriptedOpenAIServer
) -> None:
    openai_server.on("NO\nNot supported.")
    judges = build_judges(_settings(openai_server, small, daily_token_budget=1), ["faithfulness"])
    judge = judges["faithfulness"]
    try:
        spent = await judge.judge(_trace("c1", HALF))  # the main call spends the main budget
        assert _f(spent)["stage"] == "main"
        fallback = await judge.judge(_trace("c2", TWO_THIRDS))
        # the small model still judged (its tokens are not the main model's budget); the main model was not asked
        assert (small.request_count, openai_server.request_count) == (2 + 3, 1)
        assert _f(fallback)["stage"] == "first_fallback"
        assert (fallback.status, fallback.model, fallback.backend) == (JudgementStatus.OK, SMALL, Backend.LLM)
        assert fallback.score == pytest.approx(2 / 3)
        assert _f(fallback)["cascade"]["main"]["status"] == "skipped"
    finally:
        await close_judges(judges)


def test_the_model_is_part_of_the_version() -> None:
    plain = build_judges(Settings(judge_model="judge-test"), ["relevancy"])["relevancy"]
    own = build_judges(
        Settings(judge_model="judge-test", judge_options={"relevancy": {"model": SMALL}}), ["relevancy"]
    )["relevancy"]
    assert (plain.model, own.model) == ("judge-test", SMALL)  # type: ignore[attr-defined]
    assert plain.version != own.version
    # a model option that names the judge section's model is the judge section's client and version
    same = build_judges(
        Settings(judge_model="judge-test", judge_options={"relevancy": {"model": "judge-test"}}),
        ["relevancy"],
    )["relevancy"]
    assert same.version == plain.version
    # without a judge section model, a judge's own model still makes it an LLM judge
    alone = build_judges(Settings(judge_options={"relevancy": {"model": SMALL}}), ["relevancy"])["relevancy"]
    assert (alone.backend, alone.version) == (Backend.LLM, own.version)
    # a shadow on another model: its own client and version
    shadowed: Any = build_judges(
        Settings(
            judge_model="judge-test", judge_options={"relevancy": {"shadow": {"model": SMALL, "share": 1.0}}}
        ),
        ["relevancy"],
    )["relevancy"]
    assert (shadowed.shadow.judge.model, shadowed.shadow.judge.version) == (SMALL, own.version)
    assert shadowed.shadow.judge.client is not shadowed.client


def test_keys_come_from_the_environment_only() -> None:
    opts = {"relevancy": {"model": SMALL, "base_url": "http://ollama:11434/v1", "api_key_env": "SMALL_KEY"}}
    s = load_settings(environ={"SMALL_KEY": "sk-small", "OTHER": "x"}, judge_options=opts)
    assert {k: v.get_secret_value() for k, v in s.judge.model_keys.items()} == {"SMALL_KEY": "sk-small"}
    with pytest.raises(
        ConfigError,
        match=r"^judge\.options\.relevancy\.api_key_env: the environment variable SMALL_KEY is not set$",
    ):
        build_judges(load_settings(environ={}, judge_options=opts), ["relevancy"])
    with pytest.raises(
        ConfigError, match=r"^judge\.options\.relevancy\.api_key: a key never goes in the configuration"
    ) as e:
        build_judges(
            Settings(judge_options={"relevancy": {"model": SMALL, "api_key": "sk-secret"}}), ["relevancy"]
        )
    assert "sk-secret" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^judge\.options\.relevancy\.base_url: "):
        build_judges(
            Settings(judge_options={"relevancy": {"model": SMALL, "base_url": "ollama:11434"}}), ["relevancy"]
        )
    with pytest.raises(ConfigError, match=r"judge\.options\.relevancy: base_url/api_key_env without a model"):
        build_judges(
            Settings(judge_options={"relevancy": {"base_url": "http://ollama:11434/v1"}}), ["relevancy"]
        )


def test_a_key_in_the_config_file_is_refused(tmp_path: Any) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("judge:\n  model_keys: {SMALL_KEY: sk-small}\n", "utf-8")
    with pytest.raises(ConfigError, match=r"judge\.model_keys must come from the environment"):
        load_settings(cfg, environ={})


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {
                "mode": "claims",
                "cascade": {"first": {"model": SMALL, "api_key": "sk-secret"}, "band": [0.3, 0.7]},
            },
            r"^judge\.options\.faithfulness\.cascade\.first\.api_key: a key never goes in the configuration",
        ),
        (
            {"mode": "claims", "cascade": {"first": {"model": SMALL, "api_key_env": ""}, "band": [0.3, 0.7]}},
            r"^judge\.options\.faithfulness\.cascade\.first\.api_key_env: String should match pattern",
        ),
        (
            {"shadow": {"model": SMALL, "api_key": "sk-secret", "share": 0.1}},
            r"^judge\.options\.faithfulness\.shadow\.api_key: a key never goes in the configuration",
        ),
        (
            {"shadow": {"model": SMALL, "api_key_env": "SMALL_KEY", "share": 0.1}},
            r"^judge\.options\.faithfulness\.shadow\.api_key_env: the environment variable SMALL_KEY is not set$",
        ),
        (
            {"shadow": {"threshold": 2, "share": 0.1}},
            r"^judge\.options\.faithfulness\.shadow\.threshold: ",
        ),
    ],
)
def test_errors_in_a_cascade_stage_or_shadow_name_where_they_are(
    options: dict[str, Any], message: str
) -> None:
    """A bad option of ``cascade.first`` or ``shadow`` is reported at its own path, not the judge's top level
    (an ``api_key`` already by ``load_settings``, for every command: "invalid configuration:" and the path)."""
    with pytest.raises(ConfigError) as e:
        build_judges(
            load_settings(environ={}, judge_model="main", judge_options={"faithfulness": options}),
            ["faithfulness"],
        )
    assert re.search(message, str(e.value).removeprefix("invalid configuration:\n").strip())
    assert "sk-secret" not in str(e.value)
