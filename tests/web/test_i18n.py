"""Every English label has a Chinese one (and the other way round); the language choice rules."""

from __future__ import annotations

import re

import pytest

from ragpulse.web.i18n import MESSAGES, pick_language


def test_catalogues_have_the_same_keys_and_no_empty_label() -> None:
    assert set(MESSAGES["en"]) == set(MESSAGES["zh"])
    assert all(v.strip() for lang in MESSAGES.values() for v in lang.values())
    for key, en in MESSAGES["en"].items():  # the same placeholders in both languages
        assert sorted(re.findall(r"\{\w+\}", en)) == sorted(re.findall(r"\{\w+\}", MESSAGES["zh"][key])), key


@pytest.mark.parametrize(
    ("query", "cookie", "accept", "lang"),
    [
        ("zh", "en", "en", "zh"),
        (None, "zh", "en-US", "zh"),
        ("xx", None, "zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        (None, None, "en-US,en;q=0.9,zh;q=0.8", "en"),
        (None, None, "fr-FR, zh;q=0.5", "zh"),
        (None, None, None, "en"),
    ],
)
def test_pick_language(query: str | None, cookie: str | None, accept: str | None, lang: str) -> None:
    assert pick_language(query, cookie, accept) == lang


def test_templates_use_only_catalogue_keys_that_jinja_can_reach() -> None:
    """Every ``t.KEY`` in a template is a catalogue key, and none is shadowed by a ``dict`` method (Jinja
    resolves ``t.copy`` to ``dict.copy`` before the item: use ``t["copy"]``)."""
    from pathlib import Path

    import ragpulse.web

    templates = Path(ragpulse.web.__file__).parent / "templates"
    used = {
        (f.name, key)
        for f in templates.glob("*.html")
        for key in re.findall(r"\bt\.([A-Za-z_]\w*)", f.read_text(encoding="utf-8"))
    }
    assert used
    assert {(name, key) for name, key in used if key not in MESSAGES["en"]} == set()
    assert {(name, key) for name, key in used if hasattr(dict, key)} == set()


def test_reason_codes_get_labels_in_both_languages_and_keep_the_code() -> None:
    from ragpulse.web.i18n import reason_html, translator

    en, zh = translator("en"), translator("zh")
    assert str(reason_html("over_budget", en)) == (
        '<span class="reason" title="over_budget">Daily token budget used up '
        '<small class="code">over_budget</small></span>'
    )
    assert str(reason_html("truncated_output: finish_reason=length", zh)) == (
        '<span class="reason" title="truncated_output">评估模型回复被截断（令牌上限） '
        '<small class="code">truncated_output</small></span>: finish_reason=length'
    )
    # a run's case reason: "judge: code: detail; judge: code"
    html = str(reason_html("faithfulness: unparseable: <b>no verdict</b>; keyword: unsupported_language", en))
    assert html == (
        'faithfulness: <span class="reason" title="unparseable">No verdict in the judge model&#39;s reply '
        '<small class="code">unparseable</small></span>: &lt;b&gt;no verdict&lt;/b&gt;; keyword: '
        '<span class="reason" title="unsupported_language">Language the heuristic judge cannot read '
        '<small class="code">unsupported_language</small></span>'
    )
    assert str(reason_html("1/2 claims supported", en)) == "1/2 claims supported"  # no code: as it is
    assert str(reason_html(None, en)) == ""


def test_every_documented_reason_code_has_a_label() -> None:
    """The reason codes of docs/llm-judges.md's table and of the judge frame's status table all have labels."""
    from pathlib import Path

    from ragpulse.judges.frame import STATUS_BY_CODE

    doc = (Path(__file__).resolve().parents[2] / "docs" / "llm-judges.md").read_text(encoding="utf-8")
    table = doc.split("| what happened | status | reason code |", 1)[1].split("\n\n", 1)[0]
    codes = {c for row in table.splitlines()[2:] for c in re.findall(r"`([a-z_]+)`", row.split("|")[3])}
    codes |= set(STATUS_BY_CODE)
    assert len(codes) >= 15
    assert {c for c in codes if f"rc_{c}" not in MESSAGES["en"]} == set()


def test_query_notices_are_codes_only() -> None:
    from ragpulse.web.i18n import notice, translator

    zh = translator("zh")
    assert notice(zh, "err", "compare_help") == "选择两次运行进行对比。"
    assert notice(zh, "msg", "saved") == "已保存。"
    assert notice(zh, "err", "<script>alert(1)</script>") is None
    assert notice(zh, "err", "app_title") is None  # a catalogue key that is not a notice
    assert notice(zh, "msg", None) is None
