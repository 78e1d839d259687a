"""``judge.max_text_chars``: a text longer than the limit is never judged — ``skipped`` with reason
``text_too_long: …`` from the judges that read it, before anything reads it; the other judges of the trace and
normal traces are judged as before. LLM judges never send such a text to the model."""

from __future__ import annotations

from typing import Any

import pytest

from ragpulse.config import Settings, load_settings
from ragpulse.judges import frame
from ragpulse.judges.frame import precheck
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.registry import build_judges
from ragpulse.judges.text import tokens
from ragpulse.model import Backend, Judgement, JudgementStatus, Trace
from ragpulse.testing.openai_server import ScriptedOpenAIServer, judge_responder

_VERDICTS = '{"verdicts": [{"relevant": true}, {"relevant": true}]}'  # context_relevance, in passage order

LIMIT = 300
REFUNDS = "Refunds are paid within 30 days of purchase."
SHIPPING = "Orders ship from Rotterdam in two days."
QUESTION = "How do refunds and shipping work?"
ANSWER = "Refunds are paid within 30 days. Orders ship from Rotterdam in two days. The shop opened in 1990."
HEURISTIC = ["relevancy", "faithfulness", "keyword", "answer_correctness", "context_relevance"]


def _pad(text: str, chars: int) -> str:
    return (text + " " + "Padding words about refunds and shipping. " * (chars // 40 + 1))[:chars]


def _trace(**kw: Any) -> Trace:
    fields: dict[str, Any] = {
        "trace_id": "t1",
        "question": QUESTION,
        "answer": ANSWER,
        "documents": [REFUNDS, SHIPPING],
        "expected_answer": "Refunds within 30 days; shipping takes two days.",
        "keywords": ("refunds", "Rotterdam"),
    }
    return Trace(**(fields | kw))


def _reason(what: str, chars: int, limit: int = LIMIT) -> str:
    return f"text_too_long: the {what} has {chars:,} characters (limit {limit:,}: judge.max_text_chars)"


async def _judge_all(trace: Trace, names: list[str] = HEURISTIC, limit: int = LIMIT) -> dict[str, Judgement]:
    judges = build_judges(Settings(judge_max_text_chars=limit), names)
    return {n: await j.judge(trace) for n, j in judges.items()}


def test_the_setting_default_environment_variable_and_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().judge.max_text_chars == 100_000
    monkeypatch.setenv("RAGPULSE_JUDGE_MAX_TEXT_CHARS", "250000")
    assert load_settings().judge.max_text_chars == 250_000
    with pytest.raises(ValueError, match="max_text_chars"):
        Settings(judge_max_text_chars=0)


def test_the_reason_and_its_status() -> None:
    assert frame.text_too_long("answer", 10_000_000, 100_000) == (
        "text_too_long: the answer has 10,000,000 characters (limit 100,000: judge.max_text_chars)"
    )
    assert frame.STATUS_BY_CODE["text_too_long"] is JudgementStatus.SKIPPED


def test_precheck_skips_a_long_answer_before_reading_it() -> None:
    kw: dict[str, Any] = {"judge": "j", "version": "v", "backend": Backend.HEURISTIC, "threshold": 0.5}
    long_abstention = "I don't know. " + "x" * 400
    j = precheck(Trace(trace_id="t", question="q", answer=long_abstention), max_text_chars=LIMIT, **kw)
    assert j is not None
    assert (j.status, j.score, j.passed) == (JudgementStatus.SKIPPED, None, None)
    assert j.reason == _reason("answer", len(long_abstention))
    assert long_abstention not in tokens._is_abstention_cached.cache  # the abstention rule never read it
    # at the limit: judged as before (an abstention here); no limit given: no check
    at_limit = "I don't know. " + "x" * (LIMIT - 14)
    j = precheck(Trace(trace_id="t", question="q", answer=at_limit), max_text_chars=LIMIT, **kw)
    assert j is not None
    assert j.reason == "abstained"
    j = precheck(Trace(trace_id="t", question="q", answer=long_abstention), **kw)
    assert j is not None
    assert j.reason == "abstained"


async def test_every_judge_that_reads_the_answer_skips_a_long_one_context_judges_go_on() -> None:
    answer = _pad(ANSWER, LIMIT + 1)
    out = await _judge_all(_trace(answer=answer))
    for name in ("relevancy", "faithfulness", "keyword", "answer_correctness"):
        assert (out[name].status, out[name].reason) == (JudgementStatus.SKIPPED, _reason("answer", LIMIT + 1))
        assert out[name].score is None
    assert out["context_relevance"].status is JudgementStatus.OK  # it does not read the answer


async def test_at_the_limit_every_verdict_is_the_one_without_a_limit() -> None:
    trace = _trace(answer=_pad(ANSWER, LIMIT))
    limited = await _judge_all(trace)
    default = await _judge_all(trace, limit=100_000)
    for name in HEURISTIC:
        assert limited[name].status is JudgementStatus.OK, name
        assert (limited[name].score, limited[name].reason) == (default[name].score, default[name].reason)


@pytest.mark.parametrize(
    ("fields", "what", "skipped"),
    [
        ({"question": _pad(QUESTION, 400)}, "question", {"relevancy", "faithfulness", "context_relevance"}),
        (
            {"documents": [REFUNDS, _pad(SHIPPING, 400)]},
            "retrieved context 2",
            {"faithfulness", "context_relevance"},
        ),
        ({"expected_answer": _pad("Refunds.", 400)}, "expected answer", {"keyword", "answer_correctness"}),
        ({"keywords": ("refunds", _pad("Rotterdam", 400))}, "keyword 2", {"keyword", "answer_correctness"}),
    ],
    ids=["question", "context", "expected_answer", "keyword"],
)
async def test_other_texts_skip_only_the_heuristic_judges_that_read_them(
    fields: dict[str, Any], what: str, skipped: set[str]
) -> None:
    out = await _judge_all(_trace(**fields))
    for name, j in out.items():
        if name in skipped:
            assert (j.status, j.reason) == (JudgementStatus.SKIPPED, _reason(what, 400)), name
        else:
            assert j.status is JudgementStatus.OK, name


async def test_a_long_reference_context_fails_only_the_attribution() -> None:
    trace = _trace(documents=[REFUNDS], reference_contexts=(REFUNDS, _pad(SHIPPING, 400)))
    j = (await _judge_all(trace, ["faithfulness"]))["faithfulness"]
    assert (j.status, j.passed) == (JudgementStatus.OK, False)
    attribution = (j.flags.model_extra or {})["attribution"]
    assert attribution["reason"] == "attribution_failed: " + _reason("reference context 2", 400)
    assert attribution["undecided"] >= 1
    # a long reference context also keeps context_recall from matching it with the retrieved chunks
    recall = (await _judge_all(trace, ["context_recall"]))["context_recall"]
    assert (recall.status, recall.reason) == (JudgementStatus.SKIPPED, _reason("reference context 2", 400))


def _script(server: ScriptedOpenAIServer) -> None:
    server.reset(judge_responder)
    server.on(_VERDICTS, contains='"verdicts"')


def _llm_settings(server: ScriptedOpenAIServer) -> Settings:
    return Settings(
        judge_base_url=server.base_url,
        judge_model="judge-test",
        judge_api_key="sk-test",
        judge_max_retries=0,
        judge_max_text_chars=LIMIT,
        judge_context_budget_chars=200,
    )


async def _judge_llm(server: ScriptedOpenAIServer, trace: Trace, names: list[str]) -> dict[str, Judgement]:
    s = _llm_settings(server)
    async with LLMClient(s) as client:
        judges = build_judges(s, names, client=client)
        return {n: await j.judge(trace) for n, j in judges.items()}


async def test_llm_judges_never_send_a_long_answer_or_question(openai_server: ScriptedOpenAIServer) -> None:
    _script(openai_server)
    names = ["relevancy", "faithfulness", "answer_correctness", "context_relevance"]
    out = await _judge_llm(openai_server, _trace(answer=_pad(ANSWER, 5_000)), names)
    for name in ("relevancy", "faithfulness", "answer_correctness"):
        assert (out[name].status, out[name].reason) == (JudgementStatus.SKIPPED, _reason("answer", 5_000))
        assert out[name].backend is Backend.LLM
    assert out["context_relevance"].status is JudgementStatus.OK
    assert openai_server.request_count == 1  # context_relevance's, without the answer
    assert "Padding words" not in openai_server.requests[0].prompt_text
    _script(openai_server)
    out = await _judge_llm(
        openai_server, _trace(question=_pad(QUESTION, 400)), ["relevancy", "context_relevance"]
    )
    for j in out.values():
        assert (j.status, j.reason) == (JudgementStatus.SKIPPED, _reason("question", 400))
    assert openai_server.request_count == 0


async def test_llm_judges_cut_a_long_context_to_the_budget_instead(
    openai_server: ScriptedOpenAIServer,
) -> None:
    _script(openai_server)
    trace = _trace(documents=[_pad(REFUNDS, 5_000)])
    out = await _judge_llm(openai_server, trace, ["faithfulness", "context_relevance"])
    for j in out.values():
        assert j.status is JudgementStatus.OK
        assert j.flags.context_truncated is True
    assert openai_server.request_count == 2
    assert max(len(r.prompt_text) for r in openai_server.requests) < 5_000


def test_the_limit_is_not_part_of_judge_versions() -> None:
    """It decides whether a text is judged, never how: changing it starts no new judge version."""
    low = build_judges(Settings(judge_max_text_chars=LIMIT), HEURISTIC)
    high = build_judges(Settings(judge_max_text_chars=10 * LIMIT), HEURISTIC)
    assert {n: j.version for n, j in low.items()} == {n: j.version for n, j in high.items()}
