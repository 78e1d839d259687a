"""docs/settings.md is generated from the settings in code (:func:`ragpulse.config.settings_reference`); this
test fails when the committed file differs. Regenerate it with the command in the file's header comment."""

from __future__ import annotations

from pathlib import Path

from ragpulse.config import FLAT_NAMES, SECRETS, env_name, settings_reference

DOC = Path(__file__).resolve().parents[1] / "docs" / "settings.md"


def test_docs_settings_md_is_the_generated_reference() -> None:
    assert DOC.read_text(encoding="utf-8") == settings_reference()


def test_the_reference_lists_every_setting_once_with_secrets_marked() -> None:
    text = settings_reference()
    rows = [line for line in text.splitlines() if line.startswith("| `RAGPULSE_")]
    assert len(rows) == len(FLAT_NAMES)
    for section, field in SECRETS:
        row = next(r for r in rows if r.startswith(f"| `{env_name(section, field)}`"))
        assert "(environment only)" in row
