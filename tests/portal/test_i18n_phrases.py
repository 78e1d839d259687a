"""Fixed phrases of the offline relevancy judge and of test-set import errors, shown in Chinese on Chinese pages
(found untranslated by a new-user trial); ids, field names and Python's own JSON message stay as written."""

from __future__ import annotations

from ragpulse.portal.ui.i18n import error_text, reason_html, translator

ZH = translator("zh")
EN = translator("en")


def test_relevancy_phrases_in_chinese() -> None:
    assert str(reason_html("covers 1/6 question terms; gives the asked-for number", ZH)) == (
        "覆盖 1/6 个问题词; 给出了所问的数字"
    )
    assert str(reason_html("restates_question: the answer only repeats the question", ZH)) == (
        '<span class="reason" title="restates_question">复述问题 <small class="code">restates_question</small>'
        "</span>: 答案只是复述了问题"
    )
    assert str(reason_html("short direct answer", ZH)) == "简短的直接回答"
    assert str(reason_html("answers with a question", ZH)) == "以问题回答问题"
    assert (
        str(reason_html("gives the asked-for yesno", EN)) == "gives the asked-for yesno"
    )  # as the judge writes it
    assert str(reason_html("gives the asked-for yesno", ZH)) == "给出了所问的是或否"


def test_import_errors_in_chinese() -> None:
    why = "question is required (question, query, user_input): a case without one cannot be judged"
    assert error_text(why, ZH) == "缺少问题（question, query, user_input）: 没有问题的用例无法评估"
    assert error_text(why, EN) == why
    assert (
        error_text("not valid JSON: Expecting value (column 1)", ZH)
        == "不是有效的 JSON: Expecting value (column 1)"
    )
