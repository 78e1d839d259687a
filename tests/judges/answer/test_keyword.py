"""Keyword overlap judge: score = |K ∩ A| / |K| on hand-computed English and Chinese cases."""

from __future__ import annotations

import pytest

from ragpulse.config import Settings
from ragpulse.judges.answer.keyword import KeywordJudge, extract_keywords
from ragpulse.model import Backend, JudgementStatus, Trace
from ragpulse.protocols import Judge

S = Settings()


def kw(
    answer: str, *, keywords: list[str] | None = None, expected: str | None = None, **opts: float
) -> tuple[float | None, bool | None, str]:
    j = KeywordJudge(S, opts).evaluate(
        Trace(trace_id="t", question="q", answer=answer, keywords=keywords, expected_answer=expected)
    )
    return j.score, j.passed, j.reason


async def test_keyword_judge_contract() -> None:
    j = KeywordJudge(S, {})
    assert isinstance(j, Judge)
    assert (j.name, j.backend, j.threshold) == ("keyword", Backend.HEURISTIC, 0.3)
    out = await j.judge(Trace(trace_id="t", question="q", answer="Delta Lake", keywords=["delta lake"]))
    assert out.status is JudgementStatus.OK
    assert out.score == 1.0
    assert out.backend is Backend.HEURISTIC


def test_explicit_keywords_english_phrases_case_folded() -> None:
    # "Delta Lake" (phrase, substring), "ACID" (token), "time travel" (absent) → 2/3
    score, passed, reason = kw(
        "DELTA LAKE provides acid transactions.", keywords=["Delta Lake", "ACID", "time travel"]
    )
    assert score == pytest.approx(2 / 3)
    assert passed is True
    assert reason == "2/3 keywords found (from keywords); missing: time travel"
    # a phrase matches when all its content tokens appear, in any order
    assert kw("tables in Delta Lake are versioned", keywords=["Delta Lake tables"])[0] == 1.0


def test_single_word_must_be_a_whole_token() -> None:
    assert kw("The category is empty.", keywords=["cat"])[0] == 0.0
    assert kw("The cat is here.", keywords=["cat"])[0] == 1.0


def test_extracted_from_expected_answer_with_stop_words_removed() -> None:
    assert extract_keywords("The Oberoi Group is in Delhi") == ["oberoi", "group", "delhi"]
    # 1/3 ≥ 0.3 → passes
    score, passed, _ = kw("Its office is in Delhi.", expected="The Oberoi Group is in Delhi")
    assert score == pytest.approx(1 / 3)
    assert passed is True
    score, passed, _ = kw("Its office is in Mumbai.", expected="The Oberoi Group is in Delhi")
    assert score == 0.0
    assert passed is False


def test_chinese_keywords_segmented_with_jieba() -> None:
    # "12人": single characters dropped → K = ["12"]; the answer's "12" is its own token
    assert extract_keywords("12人") == ["12"]
    assert kw("事故共造成12人死亡。", expected="12人")[0] == 1.0
    assert kw("事故共造成120人死亡。", expected="12人")[0] == 0.0
    # explicit Chinese keywords match as substrings: 明斯克协议 yes, 停火 yes, 重型武器 no → 2/3
    score, _, _ = kw("各方同意执行明斯克协议并立即停火。", keywords=["明斯克协议", "停火", "重型武器"])
    assert score == pytest.approx(2 / 3)
    assert extract_keywords("中国的首都是北京") == ["中国", "首都", "北京"]


def test_no_reference_and_other_shared_rules() -> None:
    j = KeywordJudge(S, {})
    out = j.evaluate(Trace(trace_id="t", question="q", answer="x"))
    assert out.status is JudgementStatus.SKIPPED
    assert out.reason == "no_reference"
    assert out.score is None
    out = j.evaluate(Trace(trace_id="t", question="q", answer="I don't know.", keywords=["x"]))
    assert out.reason == "abstained"
    out = j.evaluate(Trace(trace_id="t", question="q", answer="yes", expected_answer="。！"))
    assert out.status is JudgementStatus.SKIPPED
    assert out.reason_code == "no_reference"
    # a stop-word-only reference keeps its tokens: "No" → K = ["no"]
    assert extract_keywords("No") == ["no"]
    assert kw("No, it is not.", expected="No")[0] == 1.0


def test_threshold_option() -> None:
    score, passed, _ = kw("Delhi", keywords=["Delhi", "Oberoi"], threshold=0.6)
    assert score == 0.5
    assert passed is False
