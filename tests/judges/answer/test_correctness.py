"""Answer correctness: Ragas F1 + similarity, judge-model and offline variants, edge cases."""

from __future__ import annotations

import json

import pytest

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.answer.correctness import AnswerCorrectnessJudge
from ragpulse.judges.answer.similarity import EmbeddingSimilarity, LexicalSimilarity, similarity_from_settings
from ragpulse.judges.model.client import LLMClient
from ragpulse.model import Backend, JudgementStatus, Trace
from ragpulse.testing.openai_server import ScriptedOpenAIServer


def _t(answer: str | None, expected: str | None = None, **kw: object) -> Trace:
    return Trace(trace_id="t", question="q?", answer=answer, expected_answer=expected, **kw)


async def test_llm_f1_with_embeddings_hand_computed() -> None:
    answer = "Paris is the capital. It has 3 million people."
    ref = "Paris is the capital of France. It has 2 million people."
    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        srv.script(
            json.dumps(
                {
                    "tp": ["Paris is the capital"],
                    "fp": ["It has 3 million people"],
                    "fn": ["It has 2 million people"],
                }
            )
        )
        srv.embeddings = {answer: [3.0, 4.0], ref: [4.0, 3.0]}  # cosine 24/25 = 0.96
        s = Settings(
            judge_model="m",
            judge_base_url=srv.base_url,
            judge_max_retries=0,
            judge_cache_size=0,
            embeddings_base_url=srv.base_url,
            embeddings_model="emb-1",
        )
        sim = similarity_from_settings(s)
        assert isinstance(sim, EmbeddingSimilarity)
        client = LLMClient(s)
        j = AnswerCorrectnessJudge(s, client=client, similarity=sim)
        r = await j.judge(_t(answer, ref))
        await client.aclose()
        await sim.aclose()
    # F1 = 1 / (1 + 0.5·2) = 0.5; score = 0.75·0.5 + 0.25·0.96 = 0.615
    assert r.status is JudgementStatus.OK
    assert r.backend is Backend.LLM
    assert r.score == pytest.approx(0.615)
    assert r.passed is True
    assert "F1=0.5000" in r.reason
    assert "embeddings:emb-1" in r.reason
    assert srv.requests[1].body["model"] == "emb-1"
    assert srv.requests[1].body["input"] == [answer, ref]


async def test_llm_custom_weights_and_no_statements_is_error() -> None:
    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        srv.script(
            json.dumps({"tp": ["a", "b"], "fp": [], "fn": ["c", "d"]}),
            json.dumps({"tp": [], "fp": [], "fn": []}),
        )
        s = Settings(judge_model="m", judge_base_url=srv.base_url, judge_max_retries=0, judge_cache_size=0)
        client = LLMClient(s)
        j = AnswerCorrectnessJudge(s, {"weights": [1.0, 0.0]}, client=client)
        r = await j.judge(_t("x", "y"))
        r2 = await j.judge(_t("x", "y"))
        await client.aclose()
    assert r.score == pytest.approx(2 / 3)  # F1 = 2/(2+1), similarity off
    assert r2.status is JudgementStatus.ERROR
    assert r2.reason_code == "unparseable"


async def test_offline_lexical_hand_computed() -> None:
    j = AnswerCorrectnessJudge(Settings(), {"weights": [1.0, 0.0]})
    r = await j.judge(
        _t(
            "Refunds are paid within 14 days. Shipping is free.",
            "Refunds are paid within 14 days. A receipt is required.",
        )
    )
    # TP: refunds statement; FP: shipping; FN: receipt → F1 = 1/(1+1) = 0.5
    assert r.backend is Backend.HEURISTIC
    assert r.score == pytest.approx(0.5)
    assert "TP=1 FP=1 FN=1" in r.reason


async def test_offline_exact_answer_scores_one() -> None:
    r = await AnswerCorrectnessJudge(Settings()).judge(_t("东盟；中国；日本", "东盟；中国；日本"))
    assert r.score == pytest.approx(1.0)


async def test_lexical_similarity_method() -> None:
    sim = LexicalSimilarity()
    assert await sim.similarity("apple banana", "banana apple") == pytest.approx(1.0)
    assert await sim.similarity("apple", "pear") == 0.0


async def test_edge_cases() -> None:
    j = AnswerCorrectnessJudge(Settings())
    assert (await j.judge(_t("an answer", None))).reason_code == "no_reference"
    assert (await j.judge(_t("an answer", ""))).reason_code == "no_reference"
    assert (await j.judge(_t(None, "ref"))).reason_code == "no_answer"
    assert (await j.judge(_t("I don't know.", "ref"))).reason_code == "abstained"
    # no statements on either side (punctuation/stop words only)
    r = await j.judge(_t("the.", "a."))
    assert r.status is JudgementStatus.SKIPPED
    assert r.reason_code == "no_statements"
    # keywords as ground truth when there is no expected answer
    k = await AnswerCorrectnessJudge(Settings(), {"weights": [1, 0]}).judge(
        _t("Berlin", None, keywords=["Berlin", "Paris"])
    )
    assert k.score == pytest.approx(1 / (1 + 0.5))  # TP=1 FP=0 FN=1 → 2/3


def test_bad_weights_rejected() -> None:
    with pytest.raises(ConfigError):
        AnswerCorrectnessJudge(Settings(), {"weights": [0, 0]})
    with pytest.raises(ConfigError):
        AnswerCorrectnessJudge(Settings(), {"weights": [1]})
