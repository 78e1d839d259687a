"""Structured output (``judge.structured_output``, issue 24 item 8) against the scripted server: each JSON judge
sends its schema as ``response_format`` where the server has it, a server that refuses it gets one retry without
it and later calls omit it, ``off`` never sends it; and each judge's schema accepts every reply its judge scores,
over a table of sample replies."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from ragpulse.config import Settings
from ragpulse.judges.model.schemas import REPLY_SCHEMAS
from ragpulse.judges.registry import build_judges, close_judges
from ragpulse.model import JudgementStatus, Trace
from ragpulse.testing.openai_server import ScriptedOpenAIServer

TRACE = Trace(
    trace_id="t-1",
    question="How many days do I have to return an item?",
    answer="You can return items within 30 days of delivery.",
    expected_answer="Items can be returned within 30 days.",
    documents=["Returns are accepted within 30 days of delivery.", "Shipping is free over $50."],
)
CLAIMS = json.dumps({"claims": [{"claim": "30 days", "supported": True}]})
CHECKLIST = {
    "version": "1",
    "mode": "share",
    "threshold": 0.5,
    "items": [{"id": "polite", "kind": "rubric", "rubric": "The answer is polite."}],
}


def _settings(server: ScriptedOpenAIServer, **kw: Any) -> Settings:
    return Settings(
        judge_base_url=server.base_url,
        judge_model="judge-test",
        judge_api_key="k",
        judge_max_retries=0,
        judge_checklists={"polite_list": CHECKLIST},
        **kw,
    )


async def _judge(settings: Settings, name: str, trace: Trace = TRACE) -> Any:
    judges = build_judges(settings, [name])
    try:
        return await judges[name].judge(trace)
    finally:
        await close_judges(judges)


async def test_auto_sends_the_judges_schema(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.script(CLAIMS)
    j = await _judge(_settings(openai_server), "faithfulness")
    assert (j.status, j.score) == (JudgementStatus.OK, 1.0)
    assert openai_server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "faithfulness_claims",
            "schema": REPLY_SCHEMAS["faithfulness_claims"],
            "strict": False,
        },
    }


async def test_yes_no_judges_send_no_schema(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.script("YES")
    j = await _judge(_settings(openai_server), "relevancy")
    assert j.score == 1.0
    assert "response_format" not in openai_server.requests[0].body


async def test_a_server_refusing_it_gets_one_retry_without_and_later_calls_omit_it(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.refuse("response_format")
    openai_server.script(CLAIMS, CLAIMS)
    settings = _settings(openai_server)
    first = await _judge(settings, "faithfulness")
    second = await _judge(settings, "faithfulness", TRACE.model_copy(update={"trace_id": "t-2"}))
    assert (first.status, first.score, first.flags.retries) == (JudgementStatus.OK, 1.0, 1)
    assert (second.status, second.flags.retries) == (JudgementStatus.OK, 0)
    assert [("response_format" in r.body, r.status) for r in openai_server.requests] == [
        (True, 400),
        (False, 200),
        (False, 200),
    ]


async def test_off_never_sends_it(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.script(CLAIMS)
    j = await _judge(_settings(openai_server, judge_structured_output="off"), "faithfulness")
    assert j.score == 1.0
    assert "response_format" not in openai_server.requests[0].body


async def test_json_schema_insists_a_refusal_is_an_error(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.refuse("response_format")
    j = await _judge(_settings(openai_server, judge_structured_output="json_schema"), "faithfulness")
    assert j.status is JudgementStatus.ERROR
    assert j.reason.startswith(
        "judge_unavailable: HTTP 400 after 1 attempt: Unsupported parameter: 'response_format'"
    )
    assert len(openai_server.requests) == 1


def _o(**kw: Any) -> str:
    return json.dumps(kw)


#: (judge, options, template, sample replies): JSON replies in the shapes models give, good and bad.
SAMPLES: list[tuple[str, dict[str, Any], str, list[str]]] = [
    ("relevancy", {"graded": True}, "relevancy_graded",
     [_o(score=2, reason="ok"), _o(score="3"), _o(rating=1, explanation="weak"), _o(score="4/5"), _o(score=9),
      _o(verdict="YES"), _o(score=None)]),
    ("relevancy", {"graded": True, "mode": "with_context"}, "relevancy_context_graded",
     [_o(score=0), _o(rating="2", reason="partly"), _o(score=1.5), _o(reason="no score")]),
    ("faithfulness", {}, "faithfulness_claims",
     [_o(claims=[{"claim": "30 days", "supported": True}]),
      _o(statements=[{"statement": "30 days", "verdict": "yes"}, {"text": "free", "supported": 0}]),
      _o(claims=[{"claim": "30 days", "supported": "NO"}]), _o(claims=[{"claim": "x"}]), _o(claims="none")]),
    ("context_precision", {}, "context_precision",
     [_o(verdicts=[{"passage": 1, "useful": True}, {"passage": 2, "useful": False}]),
      _o(verdicts=[{"useful": "yes"}, {"useful": "no"}]), _o(verdicts=[{"passage": "2", "useful": 1}, {"passage": "1", "useful": 0}]),
      _o(verdicts=[{"passage": 1, "useful": True}]), _o(verdicts=[{"passage": 3, "useful": True}, {"passage": 1, "useful": True}])]),
    ("context_relevance", {}, "context_relevance",
     [_o(verdicts=[{"passage": 1, "relevant": True}, {"passage": 2, "relevant": False}]),
      _o(verdicts=[{"relevant": "YES"}, {"relevant": False}]), _o(verdicts=[{"passage": 1}])]),
    ("context_recall", {}, "context_recall",
     [_o(statements=[{"statement": "30 days", "supported": True}]),
      _o(statements=[{"statement": "a", "supported": "no"}, {"supported": True}]), _o(statements=[]),
      _o(statements=[{"statement": "a"}])]),
    ("answer_correctness", {}, "answer_correctness",
     [_o(tp=["30 days"], fp=[], fn=[]), _o(TP=["30 days"], FN=["receipt"]), _o(tp=["30 days"], fp=["free"]),
      _o(tp="30 days")]),
    ("polite_list", {}, "checklist_item",
     [_o(**{"pass": True, "reason": "polite"}), _o(passed="no"), _o(**{"pass": 1}), _o(reason="no verdict")]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "options", "template", "replies"), SAMPLES, ids=[s[2] for s in SAMPLES])
async def test_each_schema_accepts_every_reply_its_judge_scores(
    openai_server: ScriptedOpenAIServer, name: str, options: dict[str, Any], template: str, replies: list[str]
) -> None:
    schema = REPLY_SCHEMAS[template]
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    scored = 0
    for i, reply in enumerate(replies):
        openai_server.reset()
        openai_server.script(reply)
        settings = _settings(openai_server, judge_options={name: options} if options else {})
        j = await _judge(settings, name, TRACE.model_copy(update={"trace_id": f"t-{i}"}))
        body = openai_server.requests[0].body
        assert body["response_format"]["json_schema"]["name"] == template
        if j.status is JudgementStatus.OK:
            scored += 1
            errors = [e.message for e in validator.iter_errors(json.loads(reply))]
            assert errors == [], f"{template}: {reply} was scored {j.score} but the schema refuses it"
        else:
            assert j.status is JudgementStatus.ERROR, (reply, j.reason)
    assert 2 <= scored < len(replies)  # the table holds replies the judge scores and replies it refuses
