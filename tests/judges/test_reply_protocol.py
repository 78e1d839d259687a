"""The reply protocol, end to end: every reply shape quoted in the judges issue × every LLM judge × English and
Chinese, through the real scripted OpenAI-compatible server and the real openai client.

Each row is a reply the scripted model sends to every request of the judgement, and the expected
``(status, score or reason code)`` per judge family: the yes/no judges (relevancy, faithfulness ``binary``)
and the JSON judges (faithfulness ``claims``, the reference metrics, answer correctness, checklists).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from ragpulse.config import Settings
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.registry import build_judges
from ragpulse.model import Trace
from ragpulse.testing.openai_server import Reply, ScriptedOpenAIServer, context_length_exceeded

#: (judge id, judge name, options). Checklist ``tone`` has one rubric item.
JUDGES: list[tuple[str, str, dict[str, Any]]] = [
    ("relevancy", "relevancy", {}),
    ("faithfulness-binary", "faithfulness", {"mode": "binary"}),
    ("faithfulness-claims", "faithfulness", {}),
    ("context_precision", "context_precision", {}),
    ("context_recall", "context_recall", {}),
    ("context_relevance", "context_relevance", {}),
    ("answer_correctness", "answer_correctness", {}),
    ("checklist", "tone", {}),
]
YES_NO = {"relevancy", "faithfulness-binary"}

PASSAGES_3_1_2 = json.dumps(
    {
        "verdicts": [
            {"passage": 3, "useful": True},
            {"passage": 1, "useful": False},
            {"passage": 2, "useful": False},
        ]
    }
)
PASSAGES_DUPLICATE = json.dumps(
    {
        "verdicts": [
            {"passage": 1, "useful": True},
            {"passage": 1, "useful": False},
            {"passage": 2, "useful": True},
        ]
    }
)
PROVIDER_400 = (  # the provider's message is kept (first 200 characters)
    "judge_unavailable: HTTP 400 after 1 attempt: This model's maximum context length is 8192 tokens. "
    "However, your messages resulted in 9000 tokens. Please reduce the length of the messages."
)

UNPARSEABLE = ("error", "unparseable")
#: reply → expected outcome for the yes/no judges, for the JSON judges, and overrides for single judges.
TABLE: list[tuple[str, Reply | str, tuple[str, Any], tuple[str, Any], dict[str, tuple[str, Any]]]] = [
    ("zh-refusal", "对不起，我无法判断…", UNPARSEABLE, UNPARSEABLE, {}),
    ("zh-needs-more-info", "是否回应了问题需要更多信息，无法判断", UNPARSEABLE, UNPARSEABLE, {}),
    ("zh-low-relevance", "相关性较低…", UNPARSEABLE, UNPARSEABLE, {}),
    ("zh-uncertain", "不确定…", UNPARSEABLE, UNPARSEABLE, {}),
    ("en-cannot-determine", "I cannot determine whether it is relevant.", UNPARSEABLE, UNPARSEABLE, {}),
    ("answer-is-no", "The answer is: NO. It talks about the cafeteria.", ("ok", 0.0), UNPARSEABLE, {}),
    ("fenced-score", '```json\n{"score": 0.8}\n```', ("ok", 0.8), UNPARSEABLE, {}),
    ("string-score", '{"score": "0.8"}', ("ok", 0.8), UNPARSEABLE, {}),
    ("passages-3-1-2", PASSAGES_3_1_2, UNPARSEABLE, UNPARSEABLE, {"context_precision": ("ok", 1 / 3)}),
    ("passages-duplicate", PASSAGES_DUPLICATE, UNPARSEABLE, UNPARSEABLE, {}),
    ("not-utf8", Reply("是的，相关", encoding="gbk"), ("error", "bad_reply"), ("error", "bad_reply"), {}),
    ("http-400", context_length_exceeded(), ("error", PROVIDER_400), ("error", PROVIDER_400), {}),
]

TRACES = {
    "en": Trace(
        trace_id="en",
        app="shop",
        question="When can I get a refund?",
        answer="You can get a refund within 30 days.",
        expected_answer="Refunds are possible within 30 days of purchase.",
        documents=[
            {"content": c} for c in ("Refunds within 30 days.", "Shipping takes 5 days.", "Lunch at 12.")
        ],
    ),
    "zh": Trace(
        trace_id="zh",
        app="shop",
        question="什么时候可以退款？",
        answer="购买后30天内可以退款。",
        expected_answer="购买后30天内可以申请退款。",
        documents=[{"content": c} for c in ("购买后30天内可以退款。", "发货需要5天。", "食堂八点开门。")],
    ),
}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as srv:
        yield srv


def _expected(judge_id: str, row: tuple[str, Any, Any, Any, Any]) -> tuple[str, Any]:
    _, _, yes_no, json_judges, overrides = row
    expected: tuple[str, Any] = overrides.get(judge_id, yes_no if judge_id in YES_NO else json_judges)
    return expected


@pytest.mark.parametrize(
    "lang",
    [
        "en",
        # slow check (every reply × 8 judges through the scripted server, ~0.5-1 s per row): the Chinese trace runs
        # in the integration lane; the fast lane keeps every reply shape on the English one, docs/dev/testing.md
        pytest.param("zh", marks=pytest.mark.integration),
    ],
)
@pytest.mark.parametrize("row", TABLE, ids=[r[0] for r in TABLE])
async def test_every_quoted_reply_against_every_judge(
    server: ScriptedOpenAIServer, row: tuple[str, Any, Any, Any, Any], lang: str
) -> None:
    settings = Settings(
        judge_base_url=server.base_url,
        judge_model="judge-test",
        judge_api_key="sk-test",
        judge_max_retries=0,
        judge_cache_size=0,
        judge_options={"faithfulness": {"mode": "binary"}},
        judge_checklists={
            "tone": {
                "version": "1",
                "items": [{"id": "polite", "kind": "rubric", "rubric": "The answer is polite."}],
            }
        },
    )
    outcomes: dict[str, tuple[str, Any]] = {}
    async with LLMClient(settings) as client:
        for judge_id, name, options in JUDGES:
            s = settings.replaced(judge_options={name: options})
            judge = build_judges(s, [name], client=client)[name]
            server.reset()
            server.on(row[1])
            j = await judge.judge(TRACES[lang])
            got: Any = j.score if j.status.value == "ok" else j.reason
            expected = _expected(judge_id, row)
            if expected[0] != "ok":
                got = got if expected[1].startswith("judge_unavailable") else j.reason_code
            outcomes[judge_id] = (j.status.value, round(got, 4) if isinstance(got, float) else got)
            assert server.request_count >= 1  # the reply came from the model, not from a shortcut
    want = {
        jid: (e[0], round(e[1], 4) if isinstance(e[1], float) else e[1])
        for jid, e in ((jid, _expected(jid, row)) for jid, _, _ in JUDGES)
    }
    assert outcomes == want
