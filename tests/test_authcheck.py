"""The one token check of every listener (:mod:`ragpulse.authcheck`): constant-time comparison, the bearer
header's form, and that no listener compares a token another way."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragpulse.authcheck import bearer_matches, token_matches

SRC = Path(__file__).resolve().parents[1] / "src" / "ragpulse"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Bearer s3cret", True),
        ("bearer   s3cret  ", True),  # scheme case-insensitive, blanks around the token ignored
        ("Bearer s3cre", False),  # a prefix of the token
        ("Bearer s3cret-and-more", False),
        ("Basic s3cret", False),
        ("s3cret", False),
        ("Bearer", False),
        ("", False),
        (None, False),
    ],
)
def test_bearer_matches(header: str | None, expected: bool) -> None:
    assert bearer_matches(header, "s3cret") is expected


def test_token_matches_never_raises_on_text_that_cannot_be_encoded() -> None:
    assert token_matches("\ud800", "s3cret") is False  # a lone surrogate (a form field can carry one)
    assert token_matches("口令", "口令") is True


def test_tokens_are_compared_in_one_place() -> None:
    """``hmac.compare_digest`` appears in authcheck (the tokens) and, besides, only where MACs are compared:
    the portal's session and CSRF MACs (portal/auth.py) and the flash cookie's (portal/ui/flash.py); a token
    check anywhere else would have to compare a second way."""
    users = {
        str(p.relative_to(SRC)): p.read_text("utf-8").count("compare_digest(")
        for p in SRC.rglob("*.py")
        if "compare_digest(" in p.read_text("utf-8")
    }
    assert users == {"authcheck.py": 1, "portal/auth.py": 2, "portal/ui/flash.py": 1}
    for p in SRC.rglob("*.py"):
        text = p.read_text("utf-8")
        assert "def token_matches" not in text or p.name == "authcheck.py", p
        assert "def bearer_matches" not in text or p.name == "authcheck.py", p
