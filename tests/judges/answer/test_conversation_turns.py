"""Earlier turns of a conversation in judging (issue 28): a follow-up question passes relevancy with its
history and fails without it, on the LLM path (the scripted judge model sees the turns in the prompt) and on
the offline path; the judges read the last ``judge.history_turns`` turns and their version records that number."""

from __future__ import annotations

from ragpulse.config import Settings
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge, LLMFaithfulnessJudge
from ragpulse.judges.answer.relevancy import HeuristicRelevancyJudge, LLMRelevancyJudge
from ragpulse.judges.model.client import LLMClient
from ragpulse.model import Trace, Turn
from ragpulse.testing.openai_server import ScriptedOpenAIServer

EARLIER = (
    Turn(question="Where is the canteen?", answer="On the ground floor."),
    Turn(
        question="How long is parental leave?",
        answer="Parental leave is sixteen weeks at full pay for all permanent employees.",
    ),
)
CONTEXT = "Part-time employees get the same sixteen weeks of parental leave, paid pro rata."
FOLLOW_UP = Trace(
    trace_id="t-follow",
    question="And what about part-timers?",
    answer="Part-time employees get the same sixteen weeks of parental leave, paid pro rata.",
    documents=[CONTEXT],
    turns=EARLIER,
)
ALONE = FOLLOW_UP.model_copy(update={"turns": ()})


def _script(server: ScriptedOpenAIServer) -> None:
    """The judge model understands the follow-up only with the turn it follows: YES when the prompt has it."""
    server.on(
        "YES, it answers the follow-up on parental leave.", contains="User: How long is parental leave?"
    )
    server.on("NO, 'part-timers' alone does not say what is asked.")


async def test_llm_relevancy_passes_with_history_and_fails_without(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    _script(openai_server)
    judge = LLMRelevancyJudge(llm_settings, {}, client=llm_client)
    with_history = await judge.judge(FOLLOW_UP)
    prompt = openai_server.requests[-1].prompt_text
    without = await judge.judge(ALONE)
    assert (with_history.score, with_history.passed) == (1.0, True)
    assert (without.score, without.passed) == (0.0, False)
    # the turns come first, oldest first, fenced as data; the question and answer blocks follow
    positions = [
        prompt.index("<<<CONVERSATION\nUser: Where is the canteen?\nAssistant: On the ground floor.\n"),
        prompt.index("User: How long is parental leave?\nAssistant: Parental leave is sixteen weeks"),
        prompt.index("CONVERSATION>>>"),
        prompt.index("<<<QUESTION\nAnd what about part-timers?"),
    ]
    assert positions == sorted(positions)
    assert "CONVERSATION" not in openai_server.requests[-1].prompt_text


async def test_only_the_last_n_turns_are_sent(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings
) -> None:
    _script(openai_server)
    settings = llm_settings.model_copy(
        update={"judge": llm_settings.judge.model_copy(update={"history_turns": 1})}
    )
    client = LLMClient(settings)
    try:
        j = await LLMRelevancyJudge(settings, {}, client=client).judge(FOLLOW_UP)
    finally:
        await client.aclose()
    prompt = openai_server.requests[-1].prompt_text
    assert j.passed is True
    assert "canteen" not in prompt
    assert "User: How long is parental leave?" in prompt


async def test_history_off_judges_the_question_alone(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings
) -> None:
    _script(openai_server)
    off = llm_settings.model_copy(
        update={"judge": llm_settings.judge.model_copy(update={"history_turns": 0})}
    )
    async with LLMClient(off) as client:
        judge = LLMRelevancyJudge(off, {}, client=client)
        j = await judge.judge(FOLLOW_UP)
    assert j.passed is False
    assert "CONVERSATION" not in openai_server.requests[-1].prompt_text
    # the version records the number of turns read: another N is another version
    async with LLMClient(llm_settings) as client:
        assert LLMRelevancyJudge(llm_settings, {}, client=client).version != judge.version


async def test_llm_faithfulness_prompt_carries_the_turns(
    openai_server: ScriptedOpenAIServer, llm_settings: Settings, llm_client: LLMClient
) -> None:
    openai_server.on('{"claims": [{"claim": "Part-timers get sixteen weeks pro rata.", "supported": true}]}')
    j = await LLMFaithfulnessJudge(llm_settings, {}, client=llm_client).judge(FOLLOW_UP)
    prompt = openai_server.requests[-1].prompt_text
    assert j.passed is True
    assert "User: How long is parental leave?" in prompt
    assert prompt.index("CONVERSATION>>>") < prompt.index("<<<QUESTION")


def test_offline_relevancy_passes_with_history_and_fails_without() -> None:
    judge = HeuristicRelevancyJudge(Settings(), {})
    with_history = judge.evaluate(FOLLOW_UP)
    without = judge.evaluate(ALONE)
    # alone, "part-timers" is the only question term and the answer does not repeat it: 0
    assert (without.score, without.passed) == (0.0, False)
    # with the turn it follows, the answer takes up "parental" and "leave": (2 − ½) / (3 − ½) = 0.6
    assert with_history.score == 0.6
    assert with_history.passed is True
    assert "2 of the conversation's" in with_history.reason
    off = HeuristicRelevancyJudge(Settings(judge_history_turns=0), {})
    assert off.evaluate(FOLLOW_UP).passed is False
    assert off.version != judge.version


def test_history_terms_never_count_against_an_answer() -> None:
    """A follow-up answered without the earlier topic's words scores as it would alone."""
    judge = HeuristicRelevancyJudge(Settings(), {})
    t = Trace(trace_id="t", question="Is it paid in full?", answer="Yes, it is paid in full.", turns=EARLIER)
    alone = judge.evaluate(t.model_copy(update={"turns": ()}))
    assert judge.evaluate(t).score == alone.score == 1.0


def test_offline_faithfulness_does_not_count_earlier_question_words_as_claims() -> None:
    judge = HeuristicFaithfulnessJudge(Settings(), {})
    assert judge.evaluate(FOLLOW_UP).passed is True
