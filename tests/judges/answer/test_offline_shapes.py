"""Issue 29: the shapes the offline judges got wrong, each as a case with its exact verdict.

The HR cases are the shapes of the 14-case HR test set a new user tried (4 of 13 correct answers failed
offline relevancy: "covers 0/4 question terms", "loss" vs "lost", Chinese answers that paraphrase the question);
the set itself is not in the repository, so the cases here are written in its shapes. The dialogue and
summary cases are the shapes of the evaluation sets in examples/eval/.
"""

from __future__ import annotations

import pytest

from ragpulse.config import Settings
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.judges.answer.relevancy import HeuristicRelevancyJudge
from ragpulse.model import JudgementStatus, Trace

S = Settings()


def rel(question: str, answer: str) -> tuple[float, bool, str]:
    j = HeuristicRelevancyJudge(S, {}).evaluate(Trace(trace_id="t", question=question, answer=answer))
    assert j.status is JudgementStatus.OK
    assert j.score is not None
    assert j.passed is not None
    return j.score, j.passed, j.reason


def faith(question: str, answer: str, context: str) -> tuple[float, bool, str]:
    j = HeuristicFaithfulnessJudge(S, {}).evaluate(
        Trace(trace_id="t", question=question, answer=answer, documents=[context])
    )
    assert j.status is JudgementStatus.OK
    assert j.score is not None
    assert j.passed is not None
    return j.score, j.passed, j.reason


# -- relevancy: the HR shapes --------------------------------------------------------------------------------


def test_hr_correct_answer_sharing_no_question_term_passes_by_its_answer_type() -> None:
    # was "covers 0/6 question terms" → 0.0; "How many" asks for a number and "25" is one → 0.5 + 0.5 × 0
    score, passed, reason = rel(
        "How many vacation days do new hires get?", "In their first year, staff receive 25 paid holidays."
    )
    assert (score, passed) == (0.5, True)
    assert reason.startswith("covers 0/6 question terms; gives the asked-for number; missing: days, get,")


def test_hr_loss_meets_lost() -> None:
    # terms employee, badge, lost; "loss" is a form of "lost" (Snowball stems loss/lost share all but the last
    # letter) → 2 of 3: (2 − ½)/(3 − ½) = 0.6; "Report …" is the asked-for procedure → 0.5 + 0.5 × 0.6 = 0.8
    score, passed, reason = rel(
        "What should I do if my employee badge is lost?",
        "Report the loss to security; they deactivate the badge and issue a new one.",
    )
    assert score == pytest.approx(0.8)
    assert passed is True
    assert reason == "covers 2/3 question terms; gives the asked-for procedure; missing: employee"


def test_hr_chinese_paraphrase_answering_yes_passes() -> None:
    # a yes/no question (…吗？) answered "可以，…": 3 of 7 terms found → (3 − ½)/(7 − ½) = 5/13, typed → 0.5 + 0.5 × 5/13
    score, passed, reason = rel("年假没休完可以折算成工资吗？", "可以，未休的年假按日工资的两倍发放。")
    assert score == pytest.approx(0.5 + 0.5 * 5 / 13)
    assert passed is True
    assert "gives the asked-for yesno" in reason


def test_hr_chinese_duration_answer_in_other_words_passes() -> None:
    # 试用期 found, 多长时间 left over; 多长时间 asks for a duration and 三个月 is one → 0.5 + 0.5 × (1 − ½)/(2 − ½)
    score, passed, _ = rel("试用期多长时间？", "新员工的试用期为三个月。")
    assert score == pytest.approx(0.5 + 0.5 / 3)
    assert passed is True


def test_off_topic_answer_sharing_the_topic_word_fails() -> None:
    # 1 of 2 terms (password, not reset) → (1 − ½)/(2 − ½) = 1/3; no procedure given
    score, passed, reason = rel(
        "How do I reset my password?", "Passwords must be at least twelve characters long."
    )
    assert score == pytest.approx(1 / 3)
    assert passed is False
    assert reason == "covers 1/2 question terms; missing: reset"


def test_short_off_topic_sentence_is_not_a_factoid() -> None:
    # 3 content words and a full stop, not the asked-for number: judged by coverage (0 of 5 terms), not as "Delhi"
    score, passed, _ = rel("How many sick days are employees allowed per year?", "The gym opens early.")
    assert (score, passed) == (0.0, False)
    # a factoid fragment still passes
    assert rel("Which city is the head office in?", "Delhi")[:2] == (1.0, True)


# -- faithfulness: dialogue replies and summary sentences ----------------------------------------------------

AIRLINE = "Northwind Airlines flies from Oslo to Bergen twice a day. The route opened in 2009. Tickets are not refundable."


def test_dialogue_reply_with_chat_talk_and_a_hedge_is_supported() -> None:
    # "Oh, I love that airline!" and "Have you ever taken it?" name nothing and talk to or about the speakers:
    # left out; the hedge "If I remember right," is stripped; the fact is fully supported
    score, passed, reason = faith(
        "Have you flown Northwind?",
        "Oh, I love that airline! If I remember right, Northwind Airlines flies from Oslo to Bergen twice a day. "
        "Have you ever taken it?",
        AIRLINE,
    )
    assert (score, passed) == (1.0, True)
    assert reason.startswith("mean support 1.00 over 1 sentence(s)")


def test_dialogue_partial_hallucination_fails() -> None:
    # sentence 1 supported (1.0), sentence 2 invented (0.0): mean 0.5, capped at 0.0 + 0.2
    score, passed, reason = faith(
        "Have you flown Northwind?",
        "Northwind Airlines flies from Oslo to Bergen twice a day. They also started flights to Rome in 2015.",
        AIRLINE,
    )
    assert score == pytest.approx(0.2)
    assert passed is False
    assert "least supported (0.00): They also started flights to Rome in 2015." in reason


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("Northwind Airlines flies from Oslo to Bergen twice a day.", 1.0),  # copied: supported
        ("Northwind Airlines flies from Bergen to Oslo twice a day.", 0.5),  # swapped around "to": halved
        ("Tickets are refundable.", 0.5),  # the context's "not" left out: halved
        # "did not" added (open ~ opened by stem); "did" is not in the context: support 3/4, then halved
        ("The route did not open in 2009.", 0.375),
        ("The route opened in 2011.", 0.5),  # route, opened found (1 + 1), 2011 not (2): 2/4
    ],
)
def test_summary_sentence_edits(answer: str, score: float) -> None:
    assert faith("Summarise the passage.", answer, AIRLINE)[0] == pytest.approx(score)
