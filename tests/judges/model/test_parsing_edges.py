"""Edges of the judge-reply parser that the mutation run (docs/dev/testing.md) found unchecked: which JSON object
is the verdict, quoted text that must not count, the closing-line rule's word limit, the score scale of a yes/no
judge, error codes, and the keys and reasons of scores."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ragpulse.errors import JudgeError
from ragpulse.judges.model.parsing import (
    normalize_verdict_word,
    parse_score,
    parse_verdict,
    strip_reasoning,
    to_score,
)


def _code(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(JudgeError) as ei:
        fn(*args, **kwargs)
    return ei.value.code


def test_an_unclosed_reasoning_block_is_cut_whatever_its_case() -> None:
    assert strip_reasoning("NO\n<THINKING>the model ran out of room") == "NO\n"
    assert strip_reasoning("YES <Reasoning>unfinished") == "YES "
    assert parse_verdict(strip_reasoning("<THINK>yes, surely</THINK>\nNO")) == 0.0


@pytest.mark.parametrize(
    ("value", "verdict"),
    [(1, True), (0, False), (1.0, True), (0.0, False), (2, None), (0.5, None), (True, True), (None, None)],
)
def test_numbers_are_verdicts_only_as_0_and_1(value: Any, verdict: bool | None) -> None:
    assert normalize_verdict_word(value) is verdict


def test_the_verdict_object_is_the_first_with_a_verdict_key() -> None:
    assert parse_verdict('{"note": 1}\n{"verdict": "no"}') == 0.0
    assert parse_verdict('{"note": 1} then {"supported": true}') == 1.0


def test_an_object_quoted_from_the_answer_is_not_the_verdict() -> None:
    answer = 'The policy reply was {"verdict": "yes"} in full.'
    assert parse_verdict('The answer quotes {"verdict": "yes"}.\nNO', untrusted=[answer]) == 0.0


def test_a_yes_no_judge_takes_scores_on_0_1_only() -> None:
    assert parse_verdict('{"score": 1}') == 1.0
    assert parse_verdict("0.7") == 0.7
    assert _code(parse_verdict, '{"score": 1.5}') == "out_of_range"
    assert _code(parse_verdict, '{"rating": "2"}') == "out_of_range"
    assert _code(parse_verdict, "1.5") == "out_of_range"


def test_a_verdict_word_that_opens_a_hedging_line_is_still_the_verdict() -> None:
    assert parse_verdict("NO - I cannot determine any support for the claim in the context.") == 0.0
    assert _code(parse_verdict, "I cannot determine this.\nYES") == "unparseable"


def test_labelled_lines_skip_the_quoted_ones_and_only_those() -> None:
    quoted = "Answer: yes (as the answer claims)"
    assert parse_verdict(f"{quoted}\nVerdict: no", untrusted=[f"It says {quoted}."]) == 0.0
    # the label's key alone appearing in the inputs does not make the line a quotation
    assert parse_verdict("Verdict: no", untrusted=["The Verdict was announced."]) == 0.0


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("The context covers the claim.\nYes", 1.0),
        ("The context covers the claim.\nYes, definitely", 1.0),
        ("The context covers the claim.\n**No**", 0.0),
    ],
)
def test_a_closing_line_of_one_or_two_words_is_the_verdict(reply: str, score: float) -> None:
    assert parse_verdict(reply) == score


@pytest.mark.parametrize(
    ("reply", "untrusted"),
    [
        ("The context covers the claim.\nyes it is", []),
        ("The context covers the claim.\nYes it clearly is", []),
        ("The answer ends with\nYes indeed.", ["and the reply was: Yes indeed."]),
    ],
)
def test_a_longer_or_quoted_closing_line_is_no_verdict(reply: str, untrusted: list[str]) -> None:
    assert _code(parse_verdict, reply, untrusted=untrusted) == "unparseable"


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (True, "unparseable"),
        ("high", "unparseable"),
        ([3], "unparseable"),
        (None, "unparseable"),
        ("**2", "unparseable"),
        (3.5, "out_of_range"),
        (-0.1, "out_of_range"),
        (math.nan, "out_of_range"),
        ("inf", "out_of_range"),
    ],
)
def test_a_bad_score_names_its_fault(value: Any, code: str) -> None:
    with pytest.raises(JudgeError) as ei:
        to_score(value, scale_max=3.0)
    assert ei.value.code == code
    assert str(ei.value)  # a message that says what was wrong, not an empty one


@pytest.mark.parametrize(("value", "score"), [(0, 0.0), (3, 3.0), ("2**", 2.0), (" 2__ ", 2.0), ("1.5", 1.5)])
def test_a_score_on_the_scale_is_kept(value: Any, score: float) -> None:
    assert to_score(value, scale_max=3.0) == score


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ('{"rating": 2}', (2.0, "")),
        ('{"score": 2, "explanation": "mostly right"}', (2.0, "mostly right")),
        ('{"score": 2, "reason": "r", "explanation": "e"}', (2.0, "r")),
        ("Score: 2 - mostly right.", (2.0, "mostly right")),
        ("Rating: 1", (1.0, "")),
        ("2. Mostly right", (2.0, "Mostly right")),
        ("3; fully supported", (3.0, "fully supported")),
    ],
)
def test_score_keys_and_reasons(reply: str, parsed: tuple[float, str]) -> None:
    assert parse_score(reply, scale_max=3.0) == parsed


def test_a_score_object_needs_a_score_key() -> None:
    assert parse_score('{"note": "x"} {"score": 1}', scale_max=3.0) == (1.0, "")


def test_braces_that_are_not_json_do_not_hide_the_object_after_them() -> None:
    assert parse_verdict('Weighing {both sides} here.\n{"verdict": "no"}') == 0.0
    assert parse_score('My notes {draft} then {"score": 2}', scale_max=3.0) == (2.0, "")


def test_a_closing_line_of_decoration_only_is_not_the_last_line() -> None:
    assert parse_verdict("The context covers the claim.\nYes\n**") == 1.0


def test_a_leading_number_off_the_scale_is_out_of_range_not_unparseable() -> None:
    assert _code(parse_score, "7 is my score", scale_max=3.0) == "out_of_range"
    assert _code(parse_score, "great answer", scale_max=3.0) == "unparseable"
