"""ragpulse.judges.text.checks, forms and answer_type: exact findings on small cases."""

from __future__ import annotations

import pytest

from ragpulse.judges.text.answer_type import asked_type, gives_type
from ragpulse.judges.text.checks import context_edit, is_chat_talk, strip_hedge
from ragpulse.judges.text.forms import form_key, forms_match, zh_found

CTX = (
    "Greenfield Foods acquired Sunloaf in 2019. The deal was not approved by regulators until 2020. "
    "Thom Yorke and Flea formed the band in Los Angeles."
)


@pytest.mark.parametrize(
    ("sentence", "finding"),
    [
        ("Greenfield Foods acquired Sunloaf in 2019.", None),
        ("Sunloaf acquired Greenfield Foods in 2019.", "swap"),
        ("Greenfield Foods acquired Sunloaf in 2017.", "substitution"),
        ("Greenfield Foods acquired Harvest Mill in 2019.", "substitution"),
        ("Greenfield Foods did not acquire Sunloaf in 2019.", "negation"),
        ("The deal was approved by regulators until 2020.", "negation"),
        ("Flea and Thom Yorke formed the band in Los Angeles.", None),  # a list reordered around "and"
        ("The deal was not approved by regulators.", None),  # "until 2020" dropped: a deletion
        ("Regulators looked at the merger for a long time.", None),  # a paraphrase is not checked
    ],
)
def test_context_edit(sentence: str, finding: str | None) -> None:
    assert context_edit(sentence, CTX) == finding


@pytest.mark.parametrize(
    ("sentence", "talk"),
    [
        ("Have you ever been there?", True),
        ("Oh, I love that!", True),
        ("I'd love to learn more about it.", True),
        ("Interesting choice!", True),
        ("Did you know it opened in 2009?", False),  # a number: a claim
        ("Have you heard of Northwind?", False),  # names something
        ("I actually met Stacey Kent in Montreal.", False),  # first person, but names people and places
        ("It is the largest city in the region.", False),
        # addressed to the user, it is a claim (examples/kestrel_kb.jsonl's invented delivery)
        ("Your order was delivered yesterday to your neighbour and signed for;", False),
        ("we will also upgrade you to express shipping for free on all future orders.", False),
        ("款项会在三个工作日内通过支付宝直接转账给您。", False),
        ("你去过那里吗？", True),
    ],
)
def test_is_chat_talk(sentence: str, talk: bool) -> None:
    assert is_chat_talk(sentence) is talk


def test_strip_hedge() -> None:
    assert strip_hedge("If I remember right, the route opened in 2009.") == "the route opened in 2009."
    assert strip_hedge("I'm not sure, but I think it opened in 2009.") == "I think it opened in 2009."
    assert strip_hedge("It opened in 2009, if I recall.") == "It opened in 2009."
    assert strip_hedge("如果我没记错的话，航线于2009年开通。") == "航线于2009年开通。"


def test_word_forms() -> None:
    assert (form_key("lost"), form_key("loss"), form_key("reimbursed")) == ("lost", "loss", "reimburs")
    assert forms_match(form_key("lost"), form_key("loss"))
    assert forms_match(form_key("application"), form_key("apply"))
    assert forms_match(form_key("deliver"), form_key("delivery"))
    assert not forms_match(form_key("cat"), form_key("category"))
    assert not forms_match(form_key("pay"), form_key("paid"))  # irregular forms are not reached
    assert zh_found("报销款", "报销的费用")
    assert not zh_found("丢", "遗失")


@pytest.mark.parametrize(
    ("question", "kind", "answer", "gives"),
    [
        ("How many sick days do I get?", "number", "Twelve a year.", True),
        ("How long does shipping take?", "duration", "Seven to ten business days.", True),
        ("How long does shipping take?", "duration", "Shipping is free over 50 dollars.", False),
        ("When does the trial end?", "time", "Fourteen days after sign-up.", True),
        ("Why was my payment declined?", "reason", "Because the card expired.", True),
        ("Can I carry over vacation days?", "yesno", "Yes, up to five.", True),
        ("How do I reset my password?", "procedure", "Click 'Forgot password' on the sign-in page.", True),
        ("How do I reset my password?", "procedure", "Passwords must be long.", False),
        ("What is the notice period?", None, "", False),
        ("寄到上海要几天？", "duration", "一般三到五个工作日送达。", True),
        ("保险报销牙科治疗吗？", "yesno", "可以，每年一千五百元。", True),
        ("怎么取消订阅？", "procedure", "进入账户的账单页面选择取消。", False),
        ("怎么取消订阅？", "procedure", "请在账单页面选择取消。", True),
    ],
)
def test_answer_types(question: str, kind: str | None, answer: str, gives: bool) -> None:
    assert asked_type(question) == kind
    if kind is not None:
        assert gives_type(kind, answer) is gives
