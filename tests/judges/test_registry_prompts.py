"""Registry (built-ins, backends, plugins) and prompt templates (package data, overrides, validation)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges import registry
from ragpulse.judges.answer.faithfulness import LLMFaithfulnessJudge
from ragpulse.judges.answer.relevancy import LLMRelevancyJudge
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.model.prompts import REQUIRED_PLACEHOLDERS, load_prompt
from ragpulse.model import Backend, Judgement, JudgementStatus, Trace
from ragpulse.testing.openai_server import ScriptedOpenAIServer, judge_responder


class EchoJudge:
    """A plugin judge for the entry-point test."""

    name = "echo"
    version = "echo-1"
    backend = Backend.HEURISTIC
    threshold = 0.5

    def __init__(self, settings: Settings, options: Mapping[str, Any]) -> None:
        self.options = options

    async def judge(self, trace: Trace) -> Judgement:
        return Judgement(
            judge="echo",
            version="echo-1",
            backend=Backend.HEURISTIC,
            status=JudgementStatus.OK,
            score=1.0,
            passed=True,
        )


def test_llm_judges_share_one_client(llm_settings: Settings) -> None:
    settings = llm_settings.replaced(judge_options={"faithfulness": {"mode": "binary"}})
    judges = registry.build_judges(settings, ["relevancy", "faithfulness", "relevancy"])
    assert list(judges) == ["relevancy", "faithfulness"]
    rel, faith = judges["relevancy"], judges["faithfulness"]
    assert isinstance(rel, LLMRelevancyJudge)
    assert isinstance(faith, LLMFaithfulnessJudge)
    assert rel.client is faith.client
    assert faith.mode == "binary"
    assert rel.backend is Backend.LLM


def test_unknown_judge_and_missing_model() -> None:
    with pytest.raises(ConfigError, match="unknown judge"):
        registry.build_judges(Settings(judge_model="m"), ["nope"])
    registry.BUILTIN_JUDGES["llm_only"] = registry.JudgeSpec(
        llm="ragpulse.judges.answer.relevancy:LLMRelevancyJudge"
    )
    try:
        with pytest.raises(ConfigError, match="needs a judge model"):
            registry.build_judges(Settings(judge_model=None), ["llm_only"])
    finally:
        del registry.BUILTIN_JUDGES["llm_only"]


def test_heuristic_backend_without_model() -> None:
    """Without a judge model, built-ins come from the heuristic classes (skipped until those are merged)."""
    pytest.importorskip("ragpulse.judges.answer.faithfulness")
    pytest.importorskip("ragpulse.judges.answer.keyword")
    judges = registry.build_judges(Settings(judge_model=None), ["relevancy", "faithfulness", "keyword"])
    assert {j.backend for j in judges.values()} == {Backend.HEURISTIC}


def test_keyword_is_always_heuristic(llm_settings: Settings) -> None:
    assert registry.BUILTIN_JUDGES["keyword"].llm is None
    pytest.importorskip("ragpulse.judges.answer.keyword")
    assert registry.build_judges(llm_settings, ["keyword"])["keyword"].backend is Backend.HEURISTIC


def test_plugins_from_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    eps = [
        EntryPoint(name="echo", value=f"{__name__}:EchoJudge", group="ragpulse.judges"),
        EntryPoint(name="relevancy", value=f"{__name__}:EchoJudge", group="ragpulse.judges"),
        EntryPoint(name="broken", value="no_such_module_xyz:thing", group="ragpulse.judges"),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: [e for e in eps if e.group == group])
    assert registry.available_judges() == [*sorted(registry.BUILTIN_JUDGES), "broken", "echo"]
    settings = Settings(judge_model="m", judge_options={"echo": {"x": 1}})
    judge = registry.build_judges(settings, ["echo"])["echo"]
    assert isinstance(judge, EchoJudge)
    assert judge.options == {"x": 1}
    with pytest.raises(ConfigError, match="broken"):
        registry.build_judges(settings, ["broken"])


@pytest.mark.parametrize("name", sorted(REQUIRED_PLACEHOLDERS))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_packaged_templates_are_valid(name: str, lang: str) -> None:
    tpl = load_prompt(name, lang)
    assert tpl.source == f"package:{name}.{lang}.txt"
    for ph in REQUIRED_PLACEHOLDERS[name]:  # every untrusted text is fenced
        assert re.search(rf"<<<(\S[^\n]*)\n\$\{{?{ph}\}}?\n\1>>>", tpl.text), ph


def test_template_override_and_validation(
    tmp_path: Path, llm_settings: Settings, llm_client: LLMClient
) -> None:
    (tmp_path / "relevancy.en.txt").write_text(
        "Q ${question} A ${answer} — YES/NO, $$0 cost", encoding="utf-8"
    )
    tpl = load_prompt("relevancy", "en", tmp_path)
    assert tpl.source.endswith("relevancy.en.txt")
    assert tpl.render(question="q <<<x>>>", answer="a") == "Q q ‹‹‹x››› A a — YES/NO, $0 cost"
    assert load_prompt("relevancy", "zh", tmp_path).source == "package:relevancy.zh.txt"  # not overridden
    (tmp_path / "faithfulness_claims.en.txt").write_text("${answer} ${context}", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"missing placeholder\(s\) \$\{question\}"):
        load_prompt("faithfulness_claims", "en", tmp_path)
    settings = llm_settings.replaced(judge_prompts_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"faithfulness_claims\.en\.txt"):
        registry.build_judges(settings, ["faithfulness"], client=llm_client)
    (tmp_path / "faithfulness_binary.zh.txt").write_text("${claim} ${context} ${answer}", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown placeholder"):
        load_prompt("faithfulness_binary", "zh", tmp_path)
    with pytest.raises(ConfigError, match="not a directory"):
        load_prompt("relevancy", "en", tmp_path / "missing")
    with pytest.raises(ConfigError, match="unknown prompt language"):
        load_prompt("relevancy", "fr")


async def test_close_judges_closes_the_shared_client_once(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings
) -> None:
    openai_server.reset(judge_responder)
    judges = registry.build_judges(llm_settings, ["relevancy", "faithfulness"])
    trace = Trace(trace_id="c", question="Fee?", answer="No fee at all.", documents=["No fee."])
    assert (await judges["relevancy"].judge(trace)).score == 1.0
    await registry.close_judges(judges)
    await registry.close_judges(judges)  # idempotent
    j = await judges["faithfulness"].judge(trace)  # a closed client is a bug → error judgement, not a raise
    assert j.status is JudgementStatus.ERROR
    assert j.reason_code == "internal_error"


async def test_relevancy_without_question_is_skipped(llm_settings: Settings, llm_client: LLMClient) -> None:
    j = await LLMRelevancyJudge(llm_settings, {}, client=llm_client).judge(Trace(trace_id="q", answer="Yes."))
    assert (j.status, j.reason_code) == (JudgementStatus.SKIPPED, "no_question")


async def test_close_judges_closes_a_client_held_through_a_caller(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings
) -> None:
    judges = registry.build_judges(llm_settings, ["context_relevance"])
    (client,) = {getattr(j, "client", None) for j in judges.values()}
    assert isinstance(client, LLMClient)
    await registry.close_judges(judges)
    with pytest.raises(RuntimeError, match="closed"):
        await client.complete(judge="x", version="v", messages=[{"role": "user", "content": "q"}])


def test_options_for_an_unknown_judge_are_a_config_error() -> None:
    """A typo in the ``judges:`` section must not leave the real judge silently on its defaults."""
    s = Settings(judge_options={"faithfullness": {"threshold": 0.9}, "keyword": {"threshold": 0.5}})
    with pytest.raises(
        ConfigError, match=r"^judge.options: options for unknown judge\(s\) faithfullness; available: "
    ):
        registry.build_judges(s, ["keyword"])
    ok = Settings(judge_options={"keyword": {"threshold": 0.5}}, judge_checklists={})
    assert list(registry.build_judges(ok, ["keyword"])) == ["keyword"]
