"""Per-claim details (``flags.claims``) and faithfulness ``sentence_check``, through the scripted judge server."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ragpulse.config import Settings
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.registry import build_judges
from ragpulse.model import JudgementStatus, Trace
from ragpulse.testing.openai_server import RecordedRequest, Reply, ScriptedOpenAIServer

DOCS = [
    {"id": "refunds", "content": "Refunds are paid within 30 days of purchase."},
    {"id": "shipping", "content": "Orders ship from Rotterdam in two days."},
]
EN = Trace(
    trace_id="en",
    question="How do refunds and shipping work?",
    answer="Refunds are paid within 30 days.  Orders ship from Berlin. Thanks for asking!",
    documents=DOCS,
)
ZH = Trace(
    trace_id="zh",
    question="退款和发货怎么安排？",
    answer="退款在购买后30天内支付。订单从柏林发货。",
    documents=[
        {"id": "r", "content": "退款在购买后30天内支付。"},
        {"id": "s", "content": "订单从鹿特丹发货，需要两天。"},
    ],
)


def _settings(server: ScriptedOpenAIServer, **options: Any) -> Settings:
    return Settings(
        judge_base_url=server.base_url,
        judge_model="bespoke-minicheck",
        judge_api_key="sk-test",
        judge_max_retries=0,
        judge_options={"faithfulness": {"mode": "sentence_check", **options}},
    )


def _minicheck(supported: set[tuple[str, str]]) -> Any:
    """A MiniCheck stand-in: ``Yes`` when (document, claim) is a supported pair, else ``No``."""

    def reply(req: RecordedRequest) -> Reply:
        m = re.fullmatch(r"Document: (.*)\nClaim: (.*)", req.user_text, re.S)
        assert m is not None, req.user_text  # the exact template small fact checkers are trained on
        return Reply("Yes" if (m.group(1), m.group(2)) in supported else "No")

    return reply


async def _judge(server: ScriptedOpenAIServer, trace: Trace, **options: Any) -> Any:
    s = _settings(server, **options)
    async with LLMClient(s) as client:
        return await build_judges(s, ["faithfulness"], client=client)["faithfulness"].judge(trace)


async def test_sentence_check_asks_per_sentence_and_chunk_and_stores_claims(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.reset(_minicheck({(DOCS[0]["content"], "Refunds are paid within 30 days.")}))
    j = await _judge(openai_server, EN)
    # sentence 1: supported by chunk 1 (1 call); 2 and 3: both chunks say no (2 calls each)
    assert openai_server.request_count == 5
    assert (j.status, j.score, j.passed, j.flags.decided_by) == (
        JudgementStatus.OK,
        1 / 3,
        False,
        "sentence_check",
    )
    claims = (j.flags.model_extra or {})["claims"]
    assert [c["verdict"] for c in claims] == ["supported", "unsupported", "unsupported"]
    assert EN.answer is not None
    assert [EN.answer[c["start"] : c["end"]] for c in claims] == [c["text"] for c in claims]
    assert [c["text"] for c in claims] == [
        "Refunds are paid within 30 days.",
        "Orders ship from Berlin.",
        "Thanks for asking!",
    ]
    assert claims[0]["evidence"] == {"doc_id": "refunds", "rank": 0}
    assert claims[1]["evidence"] is None


async def test_sentence_check_caps_calls_and_says_so(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.reset(_minicheck({(ZH.contexts[0], "退款在购买后30天内支付。")}))
    j = await _judge(openai_server, ZH, max_calls_per_trace=2)
    assert openai_server.request_count == 2
    claims = (j.flags.model_extra or {})["claims"]
    assert ZH.answer is not None
    assert [(ZH.answer[c["start"] : c["end"]], c["verdict"]) for c in claims] == [
        ("退款在购买后30天内支付。", "supported"),
        ("订单从柏林发货。", "unchecked"),
    ]
    assert j.score == 1.0  # unchecked sentences are left out of the score
    assert j.reason == "1/1 claims supported; 1 sentence(s) unchecked (max_calls_per_trace 2)"


async def test_sentence_check_custom_template_and_redact_text(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.reset(lambda req: Reply("Yes"))
    s = _settings(openai_server, template="Premise: {document}\nHypothesis: {claim}").replaced(
        store_redact_text=True
    )
    async with LLMClient(s) as client:
        j = await build_judges(s, ["faithfulness"], client=client)["faithfulness"].judge(EN)
    assert openai_server.requests[0].user_text.startswith("Premise: Refunds are paid")
    claims = (j.flags.model_extra or {})["claims"]
    assert all("text" not in c for c in claims)
    assert [(c["start"], c["end"]) for c in claims] == [(0, 32), (34, 58), (59, 77)]


async def test_claims_mode_locates_verbatim_claims_and_leaves_paraphrases_null(
    openai_server: ScriptedOpenAIServer,
) -> None:
    reply = (
        '{"claims": [{"claim": "Refunds are paid within 30 days.", "supported": true},'
        ' {"claim": "orders ship from berlin", "verdict": "contradicted"},'
        ' {"claim": "The shop is polite", "supported": true}]}'
    )
    openai_server.reset(lambda req: Reply(reply))
    s = Settings(
        judge_base_url=openai_server.base_url, judge_model="m", judge_api_key="k", judge_max_retries=0
    )
    async with LLMClient(s) as client:
        j = await build_judges(s, ["faithfulness"], client=client)["faithfulness"].judge(EN)
    claims = (j.flags.model_extra or {})["claims"]
    assert [(c["start"], c["end"], c["verdict"]) for c in claims] == [
        (0, 32, "supported"),
        (34, 57, "contradicted"),
        (None, None, "supported"),
    ]
    assert j.score == 2 / 3


_SENTENCES = st.sampled_from(
    [
        "Refunds are paid within 30 days.",
        "Orders ship from Berlin!",
        "Is it fast?",
        "退款在购买后30天内支付。",
        "订单从柏林发货；",
        "Sorry for the delay.",
        "The context does not mention fees.",
        "df.write.csv works; 3.5 too",
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_SENTENCES, st.sampled_from([" ", "  ", "\n", "", " \n "])), min_size=1, max_size=6)
)
def test_heuristic_claim_offsets_always_slice_the_stored_answer(parts: list[tuple[str, str]]) -> None:
    answer = "".join(s + sep for s, sep in parts)
    trace = Trace(trace_id="p", question="q?", answer=answer, documents=DOCS)
    j = HeuristicFaithfulnessJudge(Settings(), {}).evaluate(trace)
    if j.status is not JudgementStatus.OK or j.flags.decided_by != "sentence_support":
        return
    for c in (j.flags.model_extra or {})["claims"]:
        assert answer[c["start"] : c["end"]] == c["text"]
        assert c["verdict"] in {"supported", "unsupported", "unchecked"}
