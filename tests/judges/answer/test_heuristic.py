"""Heuristic (offline) relevancy and faithfulness judges: hand-computed English and Chinese cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragpulse.calibration.agreement import calibrate
from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.answer.faithfulness import HeuristicFaithfulnessJudge
from ragpulse.judges.answer.relevancy import HeuristicRelevancyJudge
from ragpulse.judges.text import checks
from ragpulse.model import Backend, JudgementStatus, Trace
from ragpulse.protocols import Judge

S = Settings()
PARIS_CTX = "The Eiffel Tower is in Paris. It was completed in 1889."


def faith(question: str, answer: str, contexts: list[str]) -> tuple[float, str, str | None]:
    j = HeuristicFaithfulnessJudge(S, {}).evaluate(
        Trace(trace_id="t", question=question, answer=answer, documents=contexts)
    )
    assert j.status is JudgementStatus.OK
    assert j.score is not None
    return j.score, j.reason, j.flags.decided_by


async def test_faithfulness_is_a_judge_with_heuristic_backend() -> None:
    j = HeuristicFaithfulnessJudge(S, {})
    assert isinstance(j, Judge)
    assert (j.name, j.backend, j.threshold) == ("faithfulness", Backend.HEURISTIC, 0.65)
    out = await j.judge(
        Trace(trace_id="t", question="Where is the Eiffel Tower?", answer="In Paris.", context=PARIS_CTX)
    )
    assert out.backend is Backend.HEURISTIC
    assert out.model is None
    assert out.version == j.version
    assert out.score == 1.0
    assert out.passed is True
    assert out.flags.decided_by == "sentence_support"


def test_faithfulness_fully_supported_english() -> None:
    # sentence 1: new tokens {paris} (eiffel, tower come from the question) → 1
    # sentence 2: {completed, 1889} both in the context → 1
    score, _, _ = faith(
        "Where is the Eiffel Tower?", "The Eiffel Tower is in Paris. It was completed in 1889.", [PARIS_CTX]
    )
    assert score == 1.0


def test_faithfulness_wrong_number_weighs_double() -> None:
    # sentence 2: completed (weight 1, found) + 1925 (weight 2, not found) → 1/3; mean (1 + 1/3) / 2 = 2/3,
    # capped at the least supported sentence + 0.2 = 1/3 + 0.2 (sentence_support/v3): the wrong year fails
    score, reason, _ = faith(
        "Where is the Eiffel Tower?", "The Eiffel Tower is in Paris. It was completed in 1925.", [PARIS_CTX]
    )
    assert score == pytest.approx(1 / 3 + 0.2)
    assert reason.startswith(
        "mean support 0.67 (capped at the least supported + 0.20: 0.53) over 2 sentence(s)"
    )
    assert "least supported (0.33): It was completed in 1925." in reason


def test_redact_text_keeps_answer_text_out_of_reasons() -> None:
    settings = Settings(store_redact_text=True)
    trace = Trace(
        trace_id="t",
        question="Where is the Eiffel Tower?",
        answer="The Eiffel Tower is in Paris. It was completed in 1925.",
        context=PARIS_CTX,
    )
    j = HeuristicFaithfulnessJudge(settings, {}).evaluate(trace)
    assert j.reason.endswith("least supported (0.33): sentence 2")
    assert "1925" not in j.reason
    r = HeuristicRelevancyJudge(settings, {}).evaluate(
        Trace(
            trace_id="t",
            question="How do I delete a file on DBFS?",
            answer="Clusters can be resized from the compute page in the workspace settings.",
        )
    )
    assert r.reason == "covers 0/3 question terms"


def test_relevancy_reason_names_the_missing_question_words_not_their_stems() -> None:
    r = HeuristicRelevancyJudge(S, {}).evaluate(
        Trace(
            trace_id="t",
            question="Which questionnaires mention the onboarding procedure?",
            answer="Clusters can be resized from the compute page in the workspace settings.",
        )
    )
    assert r.reason == "covers 0/4 question terms; missing: mention, onboarding, procedure, questionnaires"


def test_faithfulness_unsupported_answer_fails() -> None:
    # {rome} and {opened, 1925} are absent from the context → both sentences 0
    j = HeuristicFaithfulnessJudge(S, {}).evaluate(
        Trace(
            trace_id="t",
            question="Where is the Eiffel Tower?",
            answer="The Eiffel Tower is in Rome. It opened in 1925.",
            context=PARIS_CTX,
        )
    )
    assert j.score == 0.0
    assert j.passed is False


def test_faithfulness_yes_no_words_are_not_content() -> None:
    assert faith("Is the Eiffel Tower in Paris?", "Yes.", [PARIS_CTX])[0] == 1.0
    assert faith("Is the Eiffel Tower in Paris?", "Yes, it was completed in 1889.", [PARIS_CTX])[0] == 1.0


def test_faithfulness_leaves_courtesy_sentences_out() -> None:
    # "Sorry for the wait." is left out; the other sentence is fully supported → 1.0
    score, _, _ = faith(
        "Where is the Eiffel Tower?", "Sorry for the wait. The Eiffel Tower is in Paris.", [PARIS_CTX]
    )
    assert score == 1.0
    score, _, _ = faith(
        "中国的首都是哪里？",
        "非常抱歉给您带来不便。中国的首都是北京。",
        ["北京是中国的首都。长城位于北京北部。"],
    )
    assert score == pytest.approx(0.75)


def test_faithfulness_code_identifiers_weigh_double() -> None:
    # new tokens use (1, found), foreachbatch (camelCase identifier, 2, absent), method (1, found) → 2/4
    score, _, _ = faith(
        "How do I write batches?", "Use the foreachBatch method.", ["Use the foreach method to write."]
    )
    assert score == pytest.approx(0.5)


def test_faithfulness_checks_each_sentence_against_one_chunk() -> None:
    # new tokens paris (1, sentence-initial) and germany (name, 1.5): chunk 0 has paris → 1/2.5,
    # chunk 1 has germany → 1.5/2.5 = 0.6. A bag of both chunks would have given 1.0.
    chunks = ["Paris is the capital of France.", "Berlin is the capital of Germany."]
    score, _, _ = faith("Which city is a capital?", "Paris is the capital of Germany.", chunks)
    assert score == pytest.approx(0.6)


def test_faithfulness_meta_statement_and_echo_score_zero() -> None:
    score, _, _ = faith(
        "Is the Unity Catalog metastore in the data plane?",
        "Based on the context, it is not explicitly stated whether the metastore is in the data plane.",
        ["Unity Catalog metastore stores metadata in the control plane."],
    )
    assert score == 0.0
    score, reason, decided = faith(
        "shallow clone table performance",
        "Shallow clone table performance.",
        ["Shallow clone table performance is good."],
    )
    assert (score, decided) == (0.0, "echo")
    assert reason.startswith("restates_question")


def test_faithfulness_chinese_tokens_and_bigrams() -> None:
    ctx = ["北京是中国的首都。长城位于北京北部。"]
    # new token 北京 found → 1; new bigrams 是北 (absent), 北京 (found) → 1/2; mean (1 + 0.5) / 2 = 0.75
    score, _, _ = faith("中国的首都是哪里？", "中国的首都是北京。", ctx)
    assert score == pytest.approx(0.75)
    score, _, _ = faith("中国的首都是哪里？", "中国的首都是上海。", ctx)
    assert score == 0.0


REIMBURSE_ZH = (
    "员工需在费用发生后30天内通过 Ledgerly 报销系统提交报销申请，单项超过25欧元的费用须附明细发票。"
)
APPOINT_ZH = "董事会在三月的例会上正式任命李明为首席风险官，王芳为副总裁。"


@pytest.mark.parametrize(
    ("question", "answer", "context", "passed"),
    [
        # a shortened answer drops the clause's middle (通过 Ledgerly 报销系统): the words left beside 提交
        # are not a swap (was 0.50, "提交" taken for a word standing in 通过's place)
        ("报销申请需要在多长时间内提交？", "员工需在费用发生后30天内提交报销申请。", REIMBURSE_ZH, True),
        ("报销申请需要在多长时间内提交？", "费用发生后30天内要提交报销申请。", REIMBURSE_ZH, True),
        ("报销申请需要在多长时间内提交？", "员工需在费用发生后60天内提交报销申请。", REIMBURSE_ZH, False),
        ("谁被任命为首席风险官？", "董事会任命李明为首席风险官。", APPOINT_ZH, True),
        # 王芳 follows 任命 in the context too, but in the next clause (after the comma): still a swap
        ("谁被任命为首席风险官？", "董事会任命王芳为首席风险官。", APPOINT_ZH, False),
    ],
    ids=["shortened", "shortened-reworded", "number-changed", "appointee-kept", "appointee-swapped"],
)
def test_faithfulness_chinese_shortened_answers_pass_and_swaps_still_fail(
    question: str, answer: str, context: str, passed: bool
) -> None:
    score, reason, _ = faith(question, answer, [context])
    assert (score >= 0.65) is passed, reason
    if passed:
        assert score > 0.9, reason


def test_faithfulness_shared_rules() -> None:
    j = HeuristicFaithfulnessJudge(S, {})
    no_ctx = j.evaluate(Trace(trace_id="t", question="q?", answer="Two days."))
    assert (no_ctx.status, no_ctx.score, no_ctx.passed, no_ctx.reason_code) == (
        JudgementStatus.OK,
        0.0,
        False,
        "no_context",
    )
    abst = j.evaluate(Trace(trace_id="t", question="q?", answer="根据现有资料无法回答。", context="c"))
    assert abst.status is JudgementStatus.SKIPPED
    assert abst.reason == "abstained"
    assert j.evaluate(Trace(trace_id="t", question="q?", answer="", context="c")).reason == "no_answer"


def test_threshold_option_changes_version_and_is_validated() -> None:
    a, b = HeuristicFaithfulnessJudge(S, {}), HeuristicFaithfulnessJudge(S, {"threshold": 0.5})
    assert b.threshold == 0.5
    assert a.version != b.version
    assert HeuristicFaithfulnessJudge(S, {}).version == a.version
    with pytest.raises(ConfigError):
        HeuristicFaithfulnessJudge(S, {"threshold": 1.5})
    with pytest.raises(ConfigError):
        HeuristicRelevancyJudge(S, {"threshold": "high"})


def rel(question: str | None, answer: str) -> tuple[JudgementStatus, float | None, str]:
    j = HeuristicRelevancyJudge(S, {}).evaluate(Trace(trace_id="t", question=question, answer=answer))
    return j.status, j.score, j.reason


def test_relevancy_english() -> None:
    j = HeuristicRelevancyJudge(S, {})
    assert (j.name, j.backend, j.threshold) == ("relevancy", Backend.HEURISTIC, 0.5)
    # question terms delete, file, dbfs all in the answer → 1.0
    assert (
        rel(
            "How do I delete a file on DBFS?",
            "To delete a file on DBFS, use dbutils.fs.rm with the file path.",
        )[1]
        == 1.0
    )
    # long answer sharing no question term → 0.0
    assert (
        rel(
            "How do I delete a file on DBFS?",
            "Clusters can be resized from the compute page in the workspace settings.",
        )[1]
        == 0.0
    )
    # short factoid answer → direct answer
    assert rel("The Oberoi Group has its head office in what city?", "Delhi")[1] == 1.0
    # meta statement about the context: coverage × (1 − 1/1) = 0
    _, score, reason = rel(
        "Does Unity Catalog work with Informatica?",
        "Based on the context, there is no clear information on whether Unity Catalog works with Informatica.",
    )
    assert score == 0.0
    assert "talk about the context" in reason
    # answering with a question
    assert (
        rel(
            "How to load data with PySpark in Databricks?",
            "To load data with PySpark in Databricks, what are the steps to follow?",
        )[1]
        == 0.0
    )


def test_relevancy_chinese_and_no_question() -> None:
    # question terms 删除, 集群 (如何 is a question word): both in the answer → 1.0
    assert rel("如何删除集群？", "删除集群需要在计算页面点击删除按钮，然后确认操作即可完成。")[1] == 1.0
    # terms 订单, 延迟, 退款 (什么, 时候 are left out): 订单 and 延迟 found, 退款 absent → (2 − ½)/(3 − ½) = 0.6;
    # 什么时候 asks for a time and "10个工作日" is one → 0.5 + 0.5 × 0.6 = 0.8
    assert rel("订单延迟了什么时候退款？", "订单延迟超过10个工作日的，您可以取消订单并领取优惠券。")[
        1
    ] == pytest.approx(0.8)
    status, score, reason = rel(None, "Some answer.")
    assert status is JudgementStatus.SKIPPED
    assert score is None
    assert reason == "no_question"


def test_sentence_split_keeps_dotted_names_and_splits_chinese() -> None:
    from ragpulse.judges.text.lexical import sentences

    assert sentences("Use df.write.csv here. Version 3.5 works!\nDone") == [
        "Use df.write.csv here.",
        "Version 3.5 works!",
        "Done",
    ]
    assert sentences("北京是首都。长城很长！") == ["北京是首都。", "长城很长！"]


SWAPS = Path(__file__).resolve().parents[1] / "data" / "faithfulness_swaps.jsonl"


def test_entity_and_relation_swaps_are_caught() -> None:
    """The committed set of faithful/swapped sentence pairs (English and Chinese, written for ragpulse):
    balanced accuracy at least 0.70 (0.50 before the slot check: every swap passed)."""
    rows = [json.loads(line) for line in SWAPS.read_text("utf-8").splitlines()]
    assert len(rows) >= 120
    assert {r["lang"] for r in rows} == {"en", "zh"}
    judge = HeuristicFaithfulnessJudge(Settings(), {})
    judgements = [
        judge.evaluate(
            Trace(
                trace_id=r["id"],
                question=r["question"],
                answer=r["answer"],
                documents=[{"content": c} for c in r["contexts"]],
            )
        )
        for r in rows
    ]
    report = calibrate(judgements, [r["faithful"] for r in rows])
    assert report.balanced_accuracy is not None
    assert report.balanced_accuracy >= 0.70
    tom = Trace(
        trace_id="t",
        question="Who was appointed?",
        answer="Harlow Bank appointed Tom Varga as chief risk officer in March.",
        context="Harlow Bank appointed Mira Osei as chief risk officer in March. Her predecessor, Tom Varga, moved.",
    )
    j = judge.evaluate(tom)
    assert (j.passed, (j.flags.model_extra or {})["claims"][0]["verdict"]) == (False, "unsupported")


def test_the_reason_quotes_the_least_supported_clause_without_its_semicolon() -> None:
    """A clause split at ';' was quoted with it, so the cause note after it read "…cheese;; causes: …"."""
    _, reason, _ = faith(
        "How long is parental leave?",
        "The moon is made of green cheese; parental leave is 16 weeks.",
        ["Parental leave is 16 weeks."],
    )
    assert reason.endswith("least supported (0.00): The moon is made of green cheese"), reason


# sentence_support/v6: confident wrong verdicts found by trying the judge as a user would
LEAVE_CTX = (
    "Employees get 16 weeks of paid parental leave. Requests are filed in Workday at least 8 weeks before the "
    "start date."
)
LEAVE_Q = "Is parental leave paid?"
LEAVE_ZH_CTX = "员工可享受16周带薪育儿假。需提前8周在Workday提交申请。"
LEAVE_ZH_Q = "育儿假带薪吗？"


@pytest.mark.parametrize(
    ("answer", "score", "word"),
    [
        # v5: 1.0 — the inversion paraphrases "paid parental leave" and copies no context sentence
        ("Employees get 16 weeks of parental leave, but it is not paid.", 0.5, '"paid"'),
        # v5: 0.8 — "unpaid" is one unsupported word of five; support 0.8, halved
        ("You get 16 weeks, but it is unpaid.", 0.4, '"unpaid"'),
        # v5: 1.0 — the stance "No," is stripped, the rest negates "paid"
        ("No, parental leave is not paid.", 0.5, '"paid"'),
    ],
)
def test_faithfulness_paraphrased_inversion_is_contradicted(answer: str, score: float, word: str) -> None:
    got, reason, _ = faith(LEAVE_Q, answer, [LEAVE_CTX])
    assert got == pytest.approx(score)
    assert reason.endswith(f"; contradicted: negates {word}, which the context states"), reason


def test_faithfulness_negation_the_context_has_too_passes() -> None:
    ctx = LEAVE_CTX + " Leave is not transferable to a partner."
    assert faith("Is leave transferable?", "Leave is not transferable.", [ctx])[0] == 1.0
    # faithful counterparts of the inversions above
    assert faith(LEAVE_Q, "Yes, parental leave is paid.", [LEAVE_CTX])[0] == 1.0
    # another subject: the context sentence with "paid" speaks of employees, not contractors
    ctx = LEAVE_CTX + " Contractors are not eligible."
    assert faith(LEAVE_Q, "Contractors do not get paid parental leave.", [ctx])[0] == 1.0
    # "no later than" negates nothing (v5 read it as a negation added to the context sentence: 0.44)
    no_later = "Requests are filed no later than 8 weeks before the start date."
    assert faith(LEAVE_Q, no_later, [LEAVE_CTX])[0] == pytest.approx(7 / 8)


def test_polarity_conflict_leaves_a_limited_negation_alone() -> None:
    # "not … after 14 days" limits the negation to what "within 14 days" implies: no conflict of polarity
    ctx = "Refunds are issued within 14 days."
    assert checks.polarity_conflict("Refunds are not issued after 14 days.", ctx) is None
    assert checks.polarity_conflict("Refunds are not issued.", ctx) == checks.PolarityConflict("issued", True)


def test_faithfulness_states_what_the_context_negates() -> None:
    # v5: 1.0 — every word is in the context, and no context sentence is copied
    ctx = "Parental leave is not transferable to a partner. Partners can take their own leave."
    score, reason, _ = faith(
        "Can my partner use my parental leave?",
        "Parental leave is transferable, so partners can take it.",
        [ctx],
    )
    assert score == 0.5
    assert reason.endswith('; contradicted: states "transferable", which the context negates'), reason


def test_faithfulness_chinese_inversion_is_contradicted() -> None:
    # 育儿假 and 带薪 come from the question; the bigrams 假不/不带 are nowhere in the context (0.5)
    assert faith(LEAVE_ZH_Q, "育儿假不带薪。", [LEAVE_ZH_CTX])[0] == 0.5
    assert checks.polarity_conflict("育儿假不带薪。", LEAVE_ZH_CTX) == checks.PolarityConflict("带薪", True)
    ctx = LEAVE_ZH_CTX + "育儿假不可转让。"
    assert checks.polarity_conflict("育儿假不可转让。", ctx) is None
    assert faith("育儿假可以转让吗？", "育儿假不可转让。", [ctx])[0] == 1.0


def test_faithfulness_common_word_in_place_of_a_name_fails() -> None:
    # v5: 0.89 — "email" is one unsupported word of nine; it stands where the context sentence has "Workday"
    score, reason, _ = faith(
        LEAVE_Q, "Requests are filed by email at least 8 weeks before the start date.", [LEAVE_CTX]
    )
    assert score == pytest.approx(8 / 9 / 2)
    assert reason.endswith(
        "; edited: a word the context does not hold in place of a context sentence's name or number"
    ), reason
    # the same with Chinese text: 邮件 (email) where the context has the Ledgerly system
    ctx = "员工需在费用发生后30天内通过 Ledgerly 报销系统提交报销申请，逾期不予受理。"
    assert faith("如何报销？", "员工需在费用发生后30天内通过邮件提交报销申请。", [ctx])[0] < 0.65


def test_faithfulness_paraphrase_of_a_copied_sentence_passes() -> None:
    # faithful counterparts: a verb reworded, a number spelled out, the name dropped ("the system")
    for answer in (
        "Requests are submitted in Workday at least 8 weeks before the start date.",
        "Requests are filed in Workday at least eight weeks before the start date.",
    ):
        assert faith(LEAVE_Q, answer, [LEAVE_CTX])[0] > 0.65, answer
    ctx = "员工需在费用发生后30天内通过 Ledgerly 报销系统提交报销申请，逾期不予受理。"
    assert faith("如何报销？", "员工需在费用发生后30天内通过系统提交报销申请。", [ctx])[0] > 0.65


@pytest.mark.parametrize(
    ("question", "answer", "context", "score", "reason"),
    [
        # v5: 1.0 "mean support 1.00" and 1.0 "no content words to check"
        (LEAVE_Q, "Yes.", LEAVE_CTX, 1.0, "bare yes: the context states what the question asks"),
        (
            LEAVE_Q,
            "No.",
            LEAVE_CTX,
            0.0,
            "contradicted: bare no, but the context states what the question asks",
        ),
        (LEAVE_ZH_Q, "是的。", LEAVE_ZH_CTX, 1.0, "bare yes: the context states what the question asks"),
        (
            LEAVE_ZH_Q,
            "不是。",
            LEAVE_ZH_CTX,
            0.0,
            "contradicted: bare no, but the context states what the question asks",
        ),
        (
            "Is leave transferable?",
            "No.",
            "Leave is not transferable.",
            1.0,
            "bare no: the context negates what the question asks",
        ),
    ],
)
def test_faithfulness_bare_yes_no_is_decided_against_the_question(
    question: str, answer: str, context: str, score: float, reason: str
) -> None:
    assert faith(question, answer, [context]) == (score, reason, "yes_no")


@pytest.mark.parametrize(
    ("question", "answer", "reason"),
    [
        # "Acme" is in no context sentence: the context does not say whether the proposition holds
        (
            "Is parental leave paid at Acme?",
            "Yes.",
            "no_claims: a bare yes; the context does not state for sure whether the question's proposition holds",
        ),
        (
            "What is the leave policy?",
            "Yes.",
            "no_claims: a bare yes to a question that is not a yes/no question",
        ),
        ("Is parental leave not paid?", "No.", "no_claims: a bare no to a negated question is not checked"),
        # v5: 1.0 "no content words to check"
        (LEAVE_Q, "Thanks!", "no_claims: the answer has no content words to check"),
    ],
)
def test_faithfulness_nothing_checkable_is_skipped(question: str, answer: str, reason: str) -> None:
    j = HeuristicFaithfulnessJudge(S, {}).evaluate(
        Trace(trace_id="t", question=question, answer=answer, documents=[LEAVE_CTX])
    )
    assert (j.status, j.score, j.reason) == (JudgementStatus.SKIPPED, None, reason)
