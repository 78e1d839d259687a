"""Scripts the heuristic judges cannot segment: ``skipped``/``unsupported_language``, never a confident score."""

from __future__ import annotations

import pytest

from ragpulse.config import Settings
from ragpulse.judges.registry import build_judges
from ragpulse.judges.text.scripts import unreadable_script
from ragpulse.model import JudgementStatus, Trace

JUDGES = [
    "relevancy",
    "faithfulness",
    "keyword",
    "answer_correctness",
    "context_precision",
    "context_relevance",
]


@pytest.mark.parametrize(
    ("lang", "question", "answer", "context"),
    [
        (
            "ja",
            "東京タワーの高さは？",
            "東京タワーの高さは333メートルです。",
            "東京タワーは高さ333メートルの電波塔です。",
        ),
        (
            "ko",
            "환불은 언제 가능한가요?",
            "구매 후 30일 이내에 환불됩니다.",
            "환불은 구매 후 30일 이내에 가능합니다.",
        ),
        ("th", "คืนเงินได้เมื่อไร", "คืนเงินได้ภายในสามสิบวัน", "สามารถขอคืนเงินได้ภายในสามสิบวันหลังซื้อ"),
    ],
)
async def test_unreadable_scripts_are_skipped_by_every_heuristic_judge(
    lang: str, question: str, answer: str, context: str
) -> None:
    trace = Trace(
        trace_id=lang,
        question=question,
        answer=answer,
        expected_answer=context,
        documents=[{"content": context}],
    )
    judges = build_judges(Settings(), JUDGES)
    for name, judge in judges.items():
        j = await judge.judge(trace)
        assert (name, j.status, j.reason_code) == (name, JudgementStatus.SKIPPED, "unsupported_language")


async def test_identical_texts_still_score_one_and_chinese_english_keep_working() -> None:
    ja = "東京タワーは333メートルです。"
    judges = build_judges(Settings(), ["keyword", "answer_correctness", "faithfulness"])
    exact = Trace(trace_id="ja", question="高さ？", answer=ja, expected_answer=ja)
    assert (await judges["keyword"].judge(exact)).score == 1.0
    assert (await judges["answer_correctness"].judge(exact)).score == 1.0
    zh = Trace(
        trace_id="zh",
        question="退款期限？",
        answer="购买后30天内可以退款。",
        documents=[{"content": "购买后30天内可以退款。"}],
    )
    assert (await judges["faithfulness"].judge(zh)).status is JudgementStatus.OK


def test_a_few_foreign_letters_do_not_make_a_text_unreadable() -> None:
    assert (
        unreadable_script(["The Pokémon ポケ brand is popular in many countries and markets worldwide."])
        is None
    )
    assert unreadable_script(["ポケモンです"]) == "Japanese kana"
    assert unreadable_script(["Plain English.", "한국어 문장입니다"]) == "Korean Hangul"
    assert unreadable_script(["中文文本没有假名。"]) is None
