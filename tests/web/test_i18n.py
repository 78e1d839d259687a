"""Every English label has a Chinese one (and the other way round); the language choice rules."""

from __future__ import annotations

import re

import pytest

from ragpulse.portal.ui.i18n import MESSAGES, pick_language


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

    import ragpulse.portal.ui

    templates = Path(ragpulse.portal.ui.__file__).parent / "templates"
    used = {
        (f.name, key)
        for f in templates.glob("*.html")
        for key in re.findall(r"\bt\.([A-Za-z_]\w*)", f.read_text(encoding="utf-8"))
    }
    assert used
    assert {(name, key) for name, key in used if key not in MESSAGES["en"]} == set()
    assert {(name, key) for name, key in used if hasattr(dict, key)} == set()


def test_reason_codes_get_labels_in_both_languages_and_keep_the_code() -> None:
    from ragpulse.portal.ui.i18n import reason_html, translator

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
    from ragpulse.portal.ui.i18n import notice, translator

    zh = translator("zh")
    assert notice(zh, "err", "compare_help") == "选择两次运行进行对比。"
    assert notice(zh, "msg", "saved") == "已保存。"
    assert notice(zh, "err", "<script>alert(1)</script>") is None
    assert notice(zh, "err", "app_title") is None  # a catalogue key that is not a notice
    assert notice(zh, "msg", None) is None


def test_ragpulse_reason_phrases_are_shown_in_chinese_and_judge_model_text_stays() -> None:
    from ragpulse.portal.ui.i18n import reason_html, translator

    en, zh = translator("en"), translator("zh")
    assert str(
        reason_html("faithfulness: 1/2 claims supported; keyword: 2/3 keywords found (from keywords)", zh)
    ) == ("faithfulness: 1/2 个论断有依据; keyword: 找到 2/3 个关键词（来自 keywords）")
    assert str(reason_html("no_context: no retrieved context to check the answer against", zh)) == (
        '<span class="reason" title="no_context">没有检索到的上下文 <small class="code">no_context</small></span>'
        ": 没有可用来核对答案的检索上下文"
    )
    # a judge model's words after ragpulse's prefix stay as written
    assert str(reason_html("rating 2/3: the answer covers refunds only", zh)) == (
        "评分 2/3: the answer covers refunds only"
    )
    assert (
        str(reason_html("3 of 4 chunks labelled relevant were retrieved", zh))
        == "4 个标注为相关的片段中检索到 3 个"
    )
    # English pages show the phrases exactly as the judges wrote them
    for text in (
        "1/2 claims supported",
        "3 of 5 reference statements supported by the context",
        "4/5 items passed",
        "2/3 keywords found (from expected_answer)",
        "3 of 4 reference contexts were retrieved",
        "covers 2/3 question terms",
        "no judge model",
    ):
        assert str(reason_html(text, en)) == text


def test_every_reason_phrase_reads_back_its_english_template() -> None:
    from ragpulse.portal.ui.i18n import REASON_PHRASES

    for pattern, key in REASON_PHRASES:
        args = ["7", "9", "3", "4", "1", "5"]
        if key == "rp_keywords_found":
            args[2] = "keywords"
        sample = MESSAGES["en"][key].format(*args)
        assert pattern.fullmatch(sample), key


def test_reason_phrases_with_colons_causes_and_ranks_are_shown_in_chinese() -> None:
    """The capped mean support holds ``: `` (it was split apart and left in English), the attribution's cause
    note and context precision's ranks/average precision come from the judges' own code."""
    from ragpulse.judges.answer.attribution import cause_note
    from ragpulse.portal.ui.i18n import reason_html, translator

    en, zh = translator("en"), translator("zh")
    capped = (
        "faithfulness: mean support 0.75 (capped at the least supported + 0.25: 0.50) over 3 sentence(s), "
        "1 below 0.70; least supported (0.25): Paris is big"
        + cause_note({"retrieval_misses": 0, "generation_errors": 1})
    )
    assert str(reason_html(capped, zh)) == (
        "faithfulness: 平均支持度 0.75（以最低支持度 + 0.25 封顶：0.50；共 3 句，1 句低于 0.70）; "
        "支持度最低（0.25）: Paris is big; 原因：0 处检索遗漏，1 处生成错误"
    )
    precision = "context_precision: 0 of 1 retrieved chunks useful (ranks none); average precision 0.0000"
    assert (
        str(reason_html(precision, zh))
        == "context_precision: 1 个检索片段中有 0 个有用（排名 无）; 平均精度 0.0000"
    )
    assert (
        str(reason_html("2 of 3 retrieved chunks useful (ranks 1, 3)", zh))
        == "3 个检索片段中有 2 个有用（排名 1, 3）"
    )
    for text in (capped, precision):  # English pages keep the judges' words
        assert str(reason_html(text, en)) == text


def test_error_messages_of_the_services_are_shown_in_chinese_with_ids_kept() -> None:
    """The messages come from the code that raises them; ids and the judge model's text stay as written."""
    from datetime import timedelta

    from ragpulse.errors import BadRequest
    from ragpulse.judges.selection import NO_JUDGES
    from ragpulse.portal.ui.i18n import error_text, translator
    from ragpulse.query import window
    from ragpulse.runs.testsets import check_name

    en, zh = translator("en"), translator("zh")
    with pytest.raises(ValueError) as bad_id:
        check_name("bad id!")
    with pytest.raises(BadRequest) as bad_time:
        window("abc", None, timedelta(hours=24))
    cases = {
        f"run_id: {bad_id.value}": "run_id: 无效的运行 ID 'bad id!': 只能使用字母、数字、“.”、“_”和“-”，"
        "以字母或数字开头，最多 128 个字符（模式 ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$）",
        NO_JUDGES: "没有要运行的评估器: 请至少指定一个（--judges，或运行的评估器），或启用一些"
        "（judge.enabled / RAGPULSE_JUDGE_ENABLED）",
        str(bad_time.value): "无效的时间 'abc': 应为 ISO-8601（2026-12-01T10:00:00Z）或时间跨度（24h）",
        "run 'r1' exists already": "运行 'r1' 已存在",
        "trace 'nope' not found": "未找到链路 'nope'",
        "Not Found": "未找到",
        "min_score: 'abc' is not a number; outcome: 'meh' is not one of pass, fail": (
            "min_score: 'abc' 不是数字; outcome: 'meh' 不是以下之一：pass, fail"
        ),
        "judge model said: no": "judge model said: no",  # not ragpulse's phrase: as written
    }
    for english, chinese in cases.items():
        assert error_text(english, zh) == chinese
        assert error_text(english, en) == english


def test_diagnosis_summary_in_both_languages_from_the_counts() -> None:
    """The catalogue's English summary is the one :mod:`ragpulse.runs.diagnosis` stores, side by side."""
    from typing import get_args

    from ragpulse.runs.diagnosis import DiagnosisTally
    from ragpulse.runs.report_model import WeakSide

    en, zh = MESSAGES["en"], MESSAGES["zh"]

    for side in get_args(WeakSide):
        tally = DiagnosisTally()
        tally.counts.update({"retrieval": 3, "generation": 1} if side == "retrieval" else {})
        tally.counts.update({"retrieval": 1, "generation": 2} if side == "generation" else {})
        tally.counts.update({"retrieval": 2, "generation": 2} if side == "both" else {})
        tally.counts.update({"none": 1} if side == "none" else {})
        overall = tally.diagnosis().overall
        assert overall.weak_side == side
        r, g = overall.cases["retrieval"], overall.cases["generation"]
        assert en[f"diag_summary_{side}"].format(r=r, g=g) == overall.summary
        assert zh[f"diag_summary_{side}"].format(r=r, g=g) != overall.summary
    assert zh["diag_summary_retrieval"].format(r=3, g=1).startswith("检索是薄弱环节：3 个用例")
