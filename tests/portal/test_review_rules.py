"""Fast checks of the review queue's pieces (issue 31): who the reviewer is, and reviewer names."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from ragpulse.errors import BadRequest
from ragpulse.portal.auth import trusted_reviewer
from ragpulse.portal.review import check_reviewer


def test_the_reviewer_header_counts_only_from_a_trusted_proxy() -> None:
    def req(via_proxy: bool) -> Request:
        return Request(
            {"type": "http", "headers": [(b"x-forwarded-user", b" mei ")], "ragpulse.via_proxy": via_proxy}
        )

    assert trusted_reviewer(req(True), "X-Forwarded-User") == "mei"
    assert trusted_reviewer(req(False), "X-Forwarded-User") is None
    assert trusted_reviewer(req(True), None) is None


def test_reviewer_names_are_collapsed_bounded_and_needed() -> None:
    assert check_reviewer("  Li   Wei ") == "Li Wei"
    assert check_reviewer("x" * 500) == "x" * 120
    with pytest.raises(BadRequest, match="reviewer name is needed"):
        check_reviewer(" \t ")
