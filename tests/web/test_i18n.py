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
