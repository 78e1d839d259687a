"""Which judges ``replay`` runs by default: enabled_judges, plus the retrieval judges when they can measure."""

from __future__ import annotations

from typing import Any

from ragpulse.config import Settings
from ragpulse.judges.selection import JudgeSelection, default_replay_judges, measures_retrieval
from ragpulse.model import TestCase, TestSet

BASE = ("relevancy", "faithfulness", "keyword")
ADDED = ("context_precision", "context_recall")


def _s(**kw: Any) -> Settings:
    return Settings(judge_enabled=list(BASE), **kw)


def _ts(*cases: TestCase) -> TestSet:
    return TestSet(name="t", cases=cases)


def _case(**kw: Any) -> TestCase:
    fields: dict[str, Any] = {"id": "c", "question": "q?", "contexts": ("a", "b")}
    fields.update(kw)
    return TestCase(**fields)


def test_labels_or_reference_contexts_add_the_retrieval_judges() -> None:
    labelled = _case(context_labels=(0, 1))
    with_refs = _case(reference_contexts=("b",), answer="recorded")
    for case in (labelled, with_refs, _case(context_labels=(1, 0), answer="recorded")):
        assert default_replay_judges(_s(), _ts(_case(answer="x"), case)) == JudgeSelection(
            BASE + ADDED, ADDED
        )


def test_expected_answers_count_only_on_cases_without_an_answer_to_judge() -> None:
    answerless = _case(expected_answer="b")
    assert measures_retrieval(answerless, endpoint=False)
    assert measures_retrieval(_case(keywords=("b",)), endpoint=False)
    # recorded answers: the answer judges already score the set, nothing is added
    assert not measures_retrieval(_case(expected_answer="b", answer="b"), endpoint=False)
    # an endpoint will answer the case: same
    assert not measures_retrieval(answerless, endpoint=True)
    assert default_replay_judges(_s(), _ts(_case(expected_answer="b", answer="b"))).added == ()
    assert default_replay_judges(_s(), _ts(answerless)).added == ADDED


def test_cases_without_question_or_chunks_do_not_count() -> None:
    assert not measures_retrieval(_case(question=" ", context_labels=(1, 0)), endpoint=False)
    assert not measures_retrieval(_case(contexts=(), expected_answer="b"), endpoint=False)
    assert not measures_retrieval(_case(contexts=(), reference_contexts=("b",)), endpoint=False)
    # without recorded contexts the endpoint retrieves; labels/reference contexts still decide
    assert measures_retrieval(_case(contexts=(), reference_contexts=("b",)), endpoint=True)
    assert not measures_retrieval(_case(), endpoint=False)


def test_explicit_names_setting_off_and_no_duplicates() -> None:
    labelled = _ts(_case(context_labels=(1, 0)))
    assert default_replay_judges(_s(), labelled, ["keyword", "keyword"]) == JudgeSelection(("keyword",))
    assert default_replay_judges(_s(replay_auto_retrieval_judges=False), labelled) == JudgeSelection(BASE)
    s = Settings(judge_enabled=["context_recall", "faithfulness"])
    assert default_replay_judges(s, labelled) == JudgeSelection(
        ("context_recall", "faithfulness", "context_precision"), ("context_precision",)
    )
    assert default_replay_judges(_s(), _ts()) == JudgeSelection(BASE)
