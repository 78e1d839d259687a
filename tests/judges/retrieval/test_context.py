"""Context precision / recall / relevance: labels, heuristic and judge-model variants, with edge cases."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ragpulse.config import Settings
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.retrieval.context import ContextPrecisionJudge, ContextRecallJudge, ContextRelevanceJudge
from ragpulse.model import Backend, JudgementStatus, Trace
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer


def _settings(**kw: object) -> Settings:
    return Settings(**kw)


def _trace(docs: list[str], labels: list[int] | None = None, **kw: object) -> Trace:
    attrs = {"context_labels": labels} if labels is not None else {}
    return Trace(trace_id="t1", documents=docs, attributes=attrs, **kw)


# -- labels --------------------------------------------------------------------------------------------------


async def test_precision_from_labels_hand_computed() -> None:
    j = ContextPrecisionJudge(_settings())
    r = await j.judge(_trace(["a", "b", "c", "d", "e"], [0, 0, 1, 1, 1], question="q"))
    assert r.status is JudgementStatus.OK
    assert r.score == pytest.approx((1 / 3 + 2 / 4 + 3 / 5) / 3)
    assert r.flags.decided_by == "labels"
    assert r.backend is Backend.HEURISTIC
    assert r.passed is False  # 0.4778 < 0.5


async def test_precision_perfect_ranking_is_exactly_one_and_none_relevant_zero() -> None:
    j = ContextPrecisionJudge(_settings())
    assert (await j.judge(_trace(["a", "b", "c"], [1, 1, 0]))).score == 1.0
    r0 = await j.judge(_trace(["a", "b"], [0, 0]))
    assert r0.score == 0.0
    assert r0.status is JudgementStatus.OK


async def test_recall_from_labels_with_and_without_k() -> None:
    t = _trace(["a", "b", "c", "d", "e"], [0, 1, 0, 1, 1], question="q")
    assert (await ContextRecallJudge(_settings()).judge(t)).score == 1.0
    r = await ContextRecallJudge(_settings(), {"k": 3}).judge(t)
    assert r.score == pytest.approx(1 / 3)
    assert "1 of 3" in r.reason
    none_rel = await ContextRecallJudge(_settings()).judge(_trace(["a"], [0]))
    assert none_rel.status is JudgementStatus.SKIPPED
    assert none_rel.reason_code == "no_reference"


async def test_recall_labels_matched_by_id_for_live_retrieval() -> None:
    # the labelled pool has 3 relevant chunks; the live retriever returned 2 of them plus an unknown one
    t = Trace(
        trace_id="t2",
        documents=[
            {"id": "x", "content": "X"},
            {"id": "d1", "content": "one"},
            {"id": "d3", "content": "three"},
        ],
        attributes={"context_labels": [1, 0, 1, 1], "labelled_doc_ids": ["d1", "d2", "d3", "d4"]},
    )
    assert (await ContextRecallJudge(_settings()).judge(t)).score == pytest.approx(2 / 3)
    # precision over ranks: [F, T, T] → (1/2 + 2/3)/2
    assert (await ContextPrecisionJudge(_settings()).judge(t)).score == pytest.approx(7 / 12)
    assert (await ContextRelevanceJudge(_settings()).judge(t)).score == pytest.approx(2 / 3)


async def test_bad_labels_are_an_error_not_a_score() -> None:
    r = await ContextPrecisionJudge(_settings()).judge(_trace(["a", "b"], [1, 0, 1]))
    assert r.status is JudgementStatus.ERROR
    assert r.reason_code == "bad_labels"
    # a label that is not 0/1 is refused where the trace is built (an ingest error names the field)
    with pytest.raises(ValidationError, match="context_labels must hold 0/1 values"):
        _trace(["a"], [2])


async def test_relevance_from_labels() -> None:
    r = await ContextRelevanceJudge(_settings()).judge(_trace(["a", "b", "c", "d"], [1, 0, 0, 1]))
    assert r.score == 0.5
    assert r.passed is True


# -- edge cases -----------------------------------------------------------------------------------------------


async def test_empty_retrieval_scores_zero_without_a_model_call() -> None:
    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        s = _settings(judge_model="m", judge_base_url=srv.base_url, judge_max_retries=0, judge_cache_size=0)
        client = LLMClient(s)
        t = Trace(trace_id="e", question="q?", answer="a", expected_answer="ref")
        for judge in (
            ContextPrecisionJudge(s, client=client),
            ContextRecallJudge(s, client=client),
            ContextRelevanceJudge(s, client=client),
        ):
            r = await judge.judge(t)
            assert (r.status, r.score, r.passed, r.reason_code) == (
                JudgementStatus.OK,
                0.0,
                False,
                "no_context",
            )
        assert srv.requests == []
        await client.aclose()


async def test_recall_without_ground_truth_is_skipped() -> None:
    r = await ContextRecallJudge(_settings()).judge(_trace(["some text"], question="q", expected_answer="  "))
    assert r.status is JudgementStatus.SKIPPED
    assert r.reason_code == "no_reference"


async def test_labels_method_without_labels_is_skipped() -> None:
    r = await ContextPrecisionJudge(_settings(), {"method": "labels"}).judge(_trace(["a"], question="q"))
    assert r.status is JudgementStatus.SKIPPED
    assert r.reason_code == "no_labels"


# -- heuristic -----------------------------------------------------------------------------------------------


async def test_heuristic_precision_and_recall_chinese() -> None:
    docs = [
        "韩国首尔梨泰院发生踩踏事故，造成154人死亡。",
        "瓦希诺德维寺发生踩踏事件，目前已造成12人死亡、14人受伤。",
    ]
    t = _trace(docs, question="印控克什米尔地区寺庙踩踏事故死亡人数", expected_answer="12人")
    p = await ContextPrecisionJudge(_settings()).judge(t)
    assert p.backend is Backend.HEURISTIC
    assert p.flags.decided_by == "heuristic"
    assert p.score == pytest.approx(0.5)  # useful chunk at rank 2 only: (1/2)/1
    r = await ContextRecallJudge(_settings()).judge(t)
    assert r.score == 1.0


async def test_heuristic_recall_english_statements() -> None:
    t = _trace(
        ["Refunds are paid within 14 days.", "Our office is in Berlin."],
        question="How do refunds work?",
        expected_answer="Refunds are paid within 14 days. A receipt is required.",
    )
    r = await ContextRecallJudge(_settings()).judge(t)
    assert r.score == 0.5
    assert "receipt is required" in r.reason


async def test_heuristic_relevance_english() -> None:
    t = _trace(
        ["The refund policy allows returns within 30 days.", "Shipping to Canada takes a week."],
        question="What is the refund policy for returns?",
    )
    r = await ContextRelevanceJudge(_settings()).judge(t)
    assert r.score == 0.5


# -- judge model ---------------------------------------------------------------------------------------------


def _verdicts(key: str, flags: list[bool]) -> str:
    return json.dumps({"verdicts": [{"passage": i + 1, key: f} for i, f in enumerate(flags)]})


async def test_llm_precision_hand_computed_and_prompt_fences_texts() -> None:
    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        srv.script("```json\n" + _verdicts("useful", [True, False, True]) + "\n```")
        s = _settings(
            judge_model="judge-x", judge_base_url=srv.base_url, judge_max_retries=0, judge_cache_size=0
        )
        client = LLMClient(s)
        j = ContextPrecisionJudge(s, client=client)
        t = _trace(["c one", "c two", "c three"], question="Q?", expected_answer="REF", answer="A")
        r = await j.judge(t)
        await client.aclose()
    assert r.status is JudgementStatus.OK
    assert r.backend is Backend.LLM
    assert r.model == "judge-x"
    assert r.score == pytest.approx(5 / 6)
    assert (r.prompt_tokens, r.completion_tokens) == (100, 20)
    prompt = srv.requests[0].user_text
    assert "[1] c one" in prompt
    assert "[3] c three" in prompt
    assert "REF" in prompt
    assert "<<<QUESTION\nQ?\nQUESTION>>>" in prompt


async def test_llm_labels_take_precedence_no_call() -> None:
    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        s = _settings(judge_model="m", judge_base_url=srv.base_url, judge_max_retries=0, judge_cache_size=0)
        client = LLMClient(s)
        r = await ContextPrecisionJudge(s, client=client).judge(_trace(["a", "b"], [0, 1], question="q"))
        await client.aclose()
    assert r.score == 0.5
    assert r.flags.decided_by == "labels"
    assert srv.requests == []


async def test_llm_recall_and_relevance_chinese_prompt() -> None:
    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        srv.script(
            json.dumps(
                {
                    "statements": [
                        {"statement": "东盟", "supported": True},
                        {"statement": "中国", "supported": "是"},
                        {"statement": "新西兰", "supported": False},
                    ]
                },
                ensure_ascii=False,
            ),
            _verdicts("relevant", [True, False, False, False]),
        )
        s = _settings(judge_model="m", judge_base_url=srv.base_url, judge_max_retries=0, judge_cache_size=0)
        client = LLMClient(s)
        t = _trace(
            ["甲", "乙", "丙", "丁"], question="RCEP具体包括哪些国家", expected_answer="东盟；中国；新西兰"
        )
        rec = await ContextRecallJudge(s, client=client).judge(t)
        rel = await ContextRelevanceJudge(s, client=client).judge(t)
        await client.aclose()
    assert rec.score == pytest.approx(2 / 3)
    assert "新西兰" in rec.reason
    assert rel.score == 0.25
    assert rel.passed is False
    assert "<<<问题" in srv.requests[0].user_text


async def test_llm_bad_replies_are_errors_never_zero() -> None:
    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        srv.script(
            "I think they are fine",
            _verdicts("useful", [True]),  # too few verdicts for 2 chunks
            json.dumps({"verdicts": [{"passage": 1, "useful": "maybe"}, {"passage": 2, "useful": True}]}),
            json.dumps({"statements": []}),
            Reply(status=429, error_message="slow down"),
            "",
        )
        s = _settings(judge_model="m", judge_base_url=srv.base_url, judge_max_retries=0, judge_cache_size=0)
        client = LLMClient(s)
        t = _trace(["a", "b"], question="q", expected_answer="r")
        p = ContextPrecisionJudge(s, client=client)
        codes = [(await p.judge(t)).reason_code for _ in range(3)]
        codes.append((await ContextRecallJudge(s, client=client).judge(t)).reason_code)
        codes.append((await p.judge(t)).reason_code)
        codes.append((await p.judge(t)).reason_code)
        await client.aclose()
    assert codes == [
        "unparseable",
        "unparseable",
        "unparseable",
        "unparseable",
        "judge_unavailable",
        "empty_output",
    ]


async def test_budget_truncation_flags_and_counts_cut_chunks_irrelevant() -> None:
    with ScriptedOpenAIServer(prompt_tokens=100, completion_tokens=20) as srv:
        srv.script(_verdicts("relevant", [True]))
        s = _settings(
            judge_model="m",
            judge_base_url=srv.base_url,
            judge_max_retries=0,
            judge_cache_size=0,
            judge_context_budget_chars=10,
        )
        client = LLMClient(s)
        r = await ContextRelevanceJudge(s, client=client).judge(_trace(["x" * 8, "y" * 8], question="q"))
        await client.aclose()
    assert r.score == 0.5
    assert r.flags.context_truncated is True
    assert "y" * 8 not in srv.requests[0].user_text


def test_versions_change_with_options() -> None:
    s = _settings()
    assert ContextPrecisionJudge(s).version == ContextPrecisionJudge(s).version
    assert ContextPrecisionJudge(s).version != ContextPrecisionJudge(s, {"threshold": 0.7}).version
    assert ContextPrecisionJudge(s).version != ContextPrecisionJudge(s, {"k": 3}).version


async def test_reference_without_statements_and_answer_fallback() -> None:
    # a reference of stop words and punctuation only has no statements
    r = await ContextRecallJudge(_settings()).judge(
        _trace(["some text"], question="q", expected_answer="The.")
    )
    assert r.status is JudgementStatus.SKIPPED
    assert r.reason_code == "no_statements"
    # precision without a reference falls back to the answer (Ragas' reference-free variant)
    t = _trace(
        ["Our office is in Berlin.", "Refunds are paid within 14 days."],
        question="How fast are refunds paid?",
        answer="Refunds are paid within 14 days.",
    )
    p = await ContextPrecisionJudge(_settings()).judge(t)
    assert p.score == 0.5
    assert (p.flags.model_extra or {})["verdicts"] == [0, 1]
    none = await ContextPrecisionJudge(_settings()).judge(_trace(["x"], question="q"))
    assert none.status is JudgementStatus.SKIPPED
    assert none.reason_code == "no_reference"


async def test_reference_contexts_give_non_llm_precision_and_recall() -> None:
    refs = ["Claims above 500 EUR also need the finance controller.", "Receipts are required above 25 EUR."]
    t = Trace(
        trace_id="rc",
        question="Who approves?",
        documents=[
            "The cafeteria opens at 11:30.",
            "Claims above 500 EUR also need the finance controller. Approved claims are paid monthly.",
            "claims above 500 eur also need the finance controller",  # same reference again (case differs)
        ],
        attributes={"reference_contexts": refs},
    )
    p = await ContextPrecisionJudge(_settings()).judge(t)
    assert p.flags.decided_by == "reference_contexts"
    assert p.score == pytest.approx((1 / 2 + 2 / 3) / 2)
    r = await ContextRecallJudge(_settings()).judge(t)
    assert r.score == 0.5
    assert "1 of 2 reference contexts" in r.reason


async def test_label_recall_counts_a_pool_item_once() -> None:
    t = Trace(
        trace_id="dup",
        documents=[{"id": "d1", "content": "a"}, {"id": "d1", "content": "a"}],
        attributes={"context_labels": [1, 1], "labelled_doc_ids": ["d1", "d2"]},
    )
    assert (await ContextRecallJudge(_settings()).judge(t)).score == 0.5
