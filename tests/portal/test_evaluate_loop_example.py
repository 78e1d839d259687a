"""examples/evaluate_loop.py against a started serve: the first draft fails faithfulness with the unsupported
sentence in the feedback; the second, written with that feedback, passes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from portal_testutil import Portal

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "evaluate_loop.py"


def test_the_loop_fixes_the_unsupported_sentence(portal: Portal) -> None:
    spec = importlib.util.spec_from_file_location("evaluate_loop_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with portal.client() as client:
        rounds = mod.evaluate_loop("How long do refunds take?", client=client)
    assert [r["passed"] for r in rounds] == [False, True]
    assert "Shipping back is always free." in rounds[0]["feedback"]
    assert rounds[1]["feedback"] == ""
    assert rounds[0]["trace_id"] != rounds[1]["trace_id"]
