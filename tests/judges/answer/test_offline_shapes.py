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
from ragpulse.model import JudgementStatus, Trace, Turn

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


def test_hr_correct_answer_sharing_no_question_term_no_longer_passes_by_its_answer_type() -> None:
    # question_coverage/v3 passed it at 0.5 + 0.5 × 0 ("covers 0/6 question terms; gives the asked-for number");
    # v4 gives the answer-type bonus only to an answer that takes up a question term: lexically this correct
    # paraphrase is the off-topic "Staff parking permits cost 40 EUR per month." (a known loss, docs/judges.md)
    score, passed, reason = rel(
        "How many vacation days do new hires get?", "In their first year, staff receive 25 paid holidays."
    )
    assert (score, passed) == (0.0, False)
    assert reason.startswith(
        "covers 0/6 question terms; gives the asked-for number but takes up no question term; missing: days,"
    )


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
    # a yes/no question (…吗？) answered "可以，…": 2 of 5 terms found (年假, 工资) → (2 − ½)/(5 − ½) = 1/3, typed →
    # 0.5 + 0.5 × 1/3 (v4: 3 of 7; v5 joins the nouns 假 and 成 of jieba's dictionary to the word before them: 年假,
    # 折算成)
    score, passed, reason = rel("年假没休完可以折算成工资吗？", "可以，未休的年假按日工资的两倍发放。")
    assert score == pytest.approx(0.5 + 0.5 / 3)
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


# -- the new-user trial (fix-judges): confident wrong verdicts ------------------------------------------------

LEAVE_EN = "Contractors are not eligible for parental leave."
LEAVE_Q = "Are contractors eligible for parental leave?"


@pytest.mark.parametrize(
    ("question", "answer", "context"),
    [
        # "no", "not" are stop words, so the answer's words were a subset of the question's: scored an echo (0.0)
        (LEAVE_Q, "No, contractors are not eligible for parental leave.", LEAVE_EN),
        (LEAVE_Q, "Contractors are not eligible for parental leave.", LEAVE_EN),
        ("外包人员享受育儿假吗？", "不，外包人员不享受育儿假。", "外包人员不享受育儿假。"),
        ("育儿假带薪吗？", "是的，育儿假带薪。", "育儿假为带薪假期，共16周。"),
    ],
    ids=["en-no", "en-negation", "zh-bu", "zh-shide"],
)
def test_trial_stance_on_a_yes_no_question_is_an_answer_not_an_echo(
    question: str, answer: str, context: str
) -> None:
    r_score, r_passed, r_reason = rel(question, answer)
    assert (r_score, r_passed) == (1.0, True), r_reason
    assert not r_reason.startswith("restates_question")
    f_score, f_passed, f_reason = faith(question, answer, context)
    assert f_passed is True, f_reason
    assert f_score >= 0.7, f_reason
    assert not f_reason.startswith("restates_question")


@pytest.mark.parametrize(
    ("question", "answer", "context"),
    [
        # the stance contradicts the context: the dropped negation (context_edit) halves the support
        (LEAVE_Q, "Yes, contractors are eligible for parental leave.", LEAVE_EN),
        ("外包人员享受育儿假吗？", "是的，外包人员享受育儿假。", "外包人员不享受育儿假。"),
        ("育儿假带薪吗？", "不，育儿假不带薪。", "育儿假为带薪假期，共16周。"),
    ],
    ids=["en-yes-wrong", "zh-yes-wrong", "zh-no-wrong"],
)
def test_trial_stance_against_the_context_fails_faithfulness(
    question: str, answer: str, context: str
) -> None:
    score, passed, reason = faith(question, answer, context)
    assert passed is False, reason
    assert score <= 0.5, reason


def test_trial_restating_a_yes_no_question_as_a_statement_answers_it() -> None:
    # question_coverage/v4 scored "Contractors are eligible for parental leave." an echo (0.0): the statement
    # of a yes/no question affirms it (v5); the question itself, or its words without a full stop, still echo
    assert rel(LEAVE_Q, "Contractors are eligible for parental leave.") == (
        1.0,
        True,
        "covers 4/4 question terms",
    )
    assert rel("育儿假带薪吗？", "育儿假带薪。")[:2] == (1.0, True)
    for echo in ("Are contractors eligible for parental leave?", "contractors eligible parental leave"):
        score, passed, reason = rel(LEAVE_Q, echo)
        assert (score, passed) == (0.0, False)
        assert reason.startswith("restates_question")
    assert rel("育儿假带薪吗？", "育儿假带薪吗？")[0] == 0.0


def test_trial_bare_yes_no_keeps_passing_relevancy() -> None:
    # no words of its own after the yes/no word: the asked-for answer itself (v4 gave "No." 0.5 + 0.5 × 0)
    for answer in ("No.", "Yes.", "No, it is not."):
        assert rel(LEAVE_Q, answer) == (1.0, True, "direct yes/no answer")
    assert rel("育儿假带薪吗？", "是的。") == (1.0, True, "direct yes/no answer")


WEEKS_EN = "How many weeks of parental leave do employees get?"
WEEKS_ZH = "育儿假有多少周？"


@pytest.mark.parametrize(
    ("question", "answer", "reason"),
    [
        # was 0.545 "covers 1/6 question terms; gives the asked-for number": parking ~ parental by the stem rule
        # (park/parent share "par"), and the bonus 0.5 + 0.5 × coverage
        (
            WEEKS_EN,
            "Staff parking permits cost 40 EUR per month.",
            "covers 0/6 question terms; gives the asked-for number but takes up no question term; missing:",
        ),
        # was 0.5: "no" read as a number
        (WEEKS_EN, "No idea, our canteen serves pizza on Fridays.", "covers 0/6 question terms; missing:"),
        # was 0.5 with "covers 0/4 question terms"
        (
            WEEKS_ZH,
            "员工停车证每月40欧元。",
            "covers 0/3 question terms; gives the asked-for number but takes up no question term; missing:",
        ),
        # was 0.5: 一 inside 一起 read as a number
        (WEEKS_ZH, "我们一起去吃午饭吧，食堂今天有饺子。", "covers 0/3 question terms; missing:"),
    ],
    ids=["en-parking", "en-no-idea", "zh-parking", "zh-yiqi"],
)
def test_trial_off_topic_answer_gets_no_answer_type_bonus(question: str, answer: str, reason: str) -> None:
    score, passed, got = rel(question, answer)
    assert (score, passed) == (0.0, False), got
    assert got.startswith(reason), got


@pytest.mark.parametrize(
    ("question", "answer", "score"),
    [
        (WEEKS_EN, "16 weeks.", 0.5 + 0.5 * 0.5 / 5.5),  # weeks covered, 1 of 6 terms, the asked-for number
        (WEEKS_EN, "Employees get 16 weeks of paid parental leave.", 0.5 + 0.5 * 4.5 / 5.5),
        (WEEKS_ZH, "16周。", 0.5 + 0.5 * 0.5 / 2.5),  # 周 covered, 1 of 3 terms
        (WEEKS_ZH, "十六周。", 0.5 + 0.5 * 0.5 / 2.5),  # 十六 is a number word
    ],
)
def test_trial_correct_short_answers_to_how_many_keep_passing(
    question: str, answer: str, score: float
) -> None:
    got, passed, reason = rel(question, answer)
    assert got == pytest.approx(score), reason
    assert passed is True


def test_trial_chinese_numerals_only_as_number_words() -> None:
    from ragpulse.judges.text.answer_type import gives_type

    assert gives_type("number", "共十六周。")
    assert gives_type("number", "三个月。")
    assert not gives_type("number", "我们一起去吃午饭吧。")
    assert not gives_type("number", "有一些员工。")
    assert not gives_type("number", "No idea.")


def test_trial_stems_differing_in_more_than_a_last_letter_do_not_match() -> None:
    from ragpulse.judges.text.forms import form_key, forms_match

    assert not forms_match(form_key("parking"), form_key("parental"))
    assert forms_match(form_key("loss"), form_key("lost"))
    assert forms_match(form_key("apply"), form_key("application"))
    assert forms_match(form_key("deliver"), form_key("delivery"))


LEAVE_ZH_CTX = "员工可享受16周带薪育儿假。需提前8周在Workday提交申请。"


@pytest.mark.parametrize(
    "answer", ["16周带薪，提前8周在Workday申请。", "16周带薪。", "提前8周在Workday申请。"]
)
def test_trial_two_clauses_of_an_answer_are_not_neighbours_in_the_swap_check(answer: str) -> None:
    # was 0.48 for the joined answer (each half alone passes): 带薪 and 提前, neighbours only across the comma,
    # were read as 带薪 standing in 提前's slot of the context (sentence_support/v5: one clause at a time)
    score, passed, reason = faith("育儿假有多少周，怎么申请？", answer, LEAVE_ZH_CTX)
    assert passed is True, reason
    assert score > 0.9, reason


@pytest.mark.parametrize(
    ("question", "answer", "context"),
    [
        # the numbers exchanged between the two clauses: each still stands in the other's slot within its clause
        ("育儿假有多少周，怎么申请？", "8周带薪，提前16周在Workday申请。", LEAVE_ZH_CTX),
        # a name swapped inside the second clause of a two-clause answer
        (
            "谁被任命了？",
            "三月的例会上，董事会任命王芳为首席风险官。",
            "董事会在三月的例会上正式任命李明为首席风险官，王芳为副总裁。",
        ),
    ],
    ids=["numbers-exchanged", "name-in-second-clause"],
)
def test_trial_swaps_within_a_clause_of_a_longer_answer_still_fail(
    question: str, answer: str, context: str
) -> None:
    _, passed, reason = faith(question, answer, context)
    assert passed is False, reason


# -- relevancy, question_coverage/v5: a yes/no word is no answer by itself; Chinese compounds and procedures ------

OFF_TOPIC_STANCE = (
    "; opens with yes/no but goes on about none of the question's terms: not an answer to it; missing: "
)


@pytest.mark.parametrize(
    ("question", "answer", "covers"),
    [
        # v4 passed both as a "short direct answer" (1.0): the yes/no word opened the way to the factoid rule
        ("Is parental leave paid?", "Yes, the canteen serves pizza.", "covers 0/3 question terms"),
        ("Can I work from home?", "Yes, the gym opens at 7.", "covers 0/2 question terms"),
        ("育儿假带薪吗？", "是的，食堂供应披萨。", "covers 0/2 question terms"),
    ],
    ids=["en-canteen", "en-gym", "zh-canteen"],
)
def test_v5_yes_no_word_before_unrelated_words_is_not_an_answer(
    question: str, answer: str, covers: str
) -> None:
    score, passed, reason = rel(question, answer)
    assert (score, passed) == (0.0, False), reason
    assert reason.startswith(covers + OFF_TOPIC_STANCE), reason


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        ("Is parental leave paid?", "Yes.", (1.0, True, "direct yes/no answer")),
        ("Is parental leave paid?", "No, it is not.", (1.0, True, "direct yes/no answer")),
        # paid covered, 1 of 3 terms: 0.5 + 0.5 × (1 − ½)/(3 − ½)
        (
            "Is parental leave paid?",
            "Yes, it is paid.",
            (0.6, True, "covers 1/3 question terms; gives the asked-for yesno; missing: leave, parental"),
        ),
        ("What is the capital of India?", "Delhi", (1.0, True, "short direct answer")),
        ("公司有多少员工？", "12人", (1.0, True, "short direct answer")),
    ],
)
def test_v5_direct_answers_keep_passing(
    question: str, answer: str, expected: tuple[float, bool, str]
) -> None:
    score, passed, reason = rel(question, answer)
    assert score == pytest.approx(expected[0])
    assert (passed, reason) == expected[1:]


def test_v5_a_yes_no_answer_taking_up_an_earlier_questions_term_is_an_answer() -> None:
    # the follow-up's own terms (apply, contractors) are not in the answer; the earlier question's are
    t = Trace(
        trace_id="t",
        question="Does that apply to contractors?",
        answer="No, only employees get paid parental leave.",
        turns=(Turn(question="Is parental leave paid?", answer="Yes, 16 weeks at full pay."),),
    )
    j = HeuristicRelevancyJudge(S, {}).evaluate(t)
    assert j.passed is True, j.reason
    assert j.reason.startswith(
        "covers 0/2 question terms and 3 of the conversation's; gives the asked-for yesno"
    )
    alone = HeuristicRelevancyJudge(S, {}).evaluate(t.model_copy(update={"turns": ()}))
    assert (alone.score, alone.passed) == (0.0, False)
    assert OFF_TOPIC_STANCE in alone.reason


def test_v5_chinese_procedure_stated_as_when_and_where_passes() -> None:
    # v4: 0.2, "covers 1/3 question terms; missing: 假, 育儿" — jieba cuts 育儿假 into 育儿 + 假, and
    # "提前…在…申请" was no instruction. v5: 假 (a noun in jieba's dictionary) joins 育儿 → terms 申请, 育儿假;
    # 申请 covered → (1 − ½)/(2 − ½) = 1/3, the asked-for procedure → 0.5 + 0.5 × 1/3
    score, passed, reason = rel("怎么申请育儿假？", "提前8周在Workday申请。")
    assert score == pytest.approx(0.5 + 0.5 / 3)
    assert passed is True
    assert reason == "covers 1/2 question terms; gives the asked-for procedure; missing: 育儿假"
    assert rel("怎么申请育儿假？", "在Workday申请育儿假即可。") == (
        1.0,
        True,
        "covers 2/2 question terms; gives the asked-for procedure",
    )


def test_v5_chinese_clause_going_on_after_the_verb_is_no_procedure() -> None:
    # 在职员工申请住房补贴…: 在 opens a word (在职) and 申请 goes on to another object → 1 of 2 terms, no procedure
    score, passed, reason = rel("怎么申请育儿假？", "在职员工申请住房补贴需要三个月。")
    assert score == pytest.approx(1 / 3)
    assert (passed, reason) == (False, "covers 1/2 question terms; missing: 育儿假")


def test_v5_english_procedure_counterpart_passes() -> None:
    # apply, leave covered, 2 of 3 → 0.6; "Apply …" is an instruction → 0.5 + 0.5 × 0.6
    score, passed, reason = rel(
        "How do I apply for parental leave?", "Apply in Workday 8 weeks before the leave starts."
    )
    assert score == pytest.approx(0.8)
    assert (passed, reason) == (
        True,
        "covers 2/3 question terms; gives the asked-for procedure; missing: parental",
    )


def test_v5_only_a_noun_character_joins_the_term_before_it() -> None:
    from ragpulse.judges.answer.relevancy import _terms

    assert _terms("怎么申请育儿假？") == {"申请": ("申请",), "育儿假": ("育儿", "假")}
    assert _terms("高级版多少钱？") == {"高级版": ("高级", "版"), "钱": ("钱",)}
    assert _terms("年假有几天？")["年假"] == ("年", "假")
    # 丢 is no noun (zg): still a term, so an answer about wearing the badge does not cover the question
    assert _terms("工牌丢了怎么办？") == {"工牌": ("工牌",), "丢": ("丢",)}
    score, passed, _ = rel("工牌丢了怎么办？", "进入办公楼时必须佩戴工牌。")
    assert score == pytest.approx(1 / 3)
    assert passed is False
