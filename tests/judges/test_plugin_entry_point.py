"""A judge written in Python, installed as a distribution with a ``ragpulse.judges`` entry point."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.registry import available_judges, build_judges
from ragpulse.model import Backend, JudgementStatus, Trace

PLUGIN = '''
"""An example plugin: passes answers that thank the user (a business rule in Python)."""
from typing import Any, Mapping

from ragpulse.judges.frame import CallLog, Decision, JudgeBase
from ragpulse.model import Trace


class PolitenessJudge(JudgeBase):
    name = "politeness"
    DEFAULT_THRESHOLD = 1.0

    def version_settings(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "rule": "thanks-v1"}

    async def decide(self, trace: Trace, log: CallLog) -> Decision:
        polite = any(w in (trace.answer or "").lower() for w in ("thank", "谢谢"))
        return Decision(1.0 if polite else 0.0, "thanks" if polite else "no thanks", "rule")


def build(settings: Any, options: Mapping[str, Any]) -> PolitenessJudge:
    return PolitenessJudge(settings, options)
'''


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    (tmp_path / "acme_politeness.py").write_text(PLUGIN, encoding="utf-8")
    dist = tmp_path / "acme_politeness-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-politeness\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [ragpulse.judges]
            politeness = acme_politeness:build
            """
        ),
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("acme_politeness", None)


async def test_plugin_judge_through_entry_point(installed_plugin: None) -> None:
    assert "politeness" in available_judges()
    judges = build_judges(
        Settings(judge_options={"politeness": {"threshold": 0.5}}), ["politeness", "context_precision"]
    )
    j = judges["politeness"]
    assert j.backend is Backend.HEURISTIC
    assert j.threshold == 0.5
    r = await j.judge(Trace(trace_id="p", question="q", answer="Thanks for asking: it ships today."))
    assert (r.status, r.score, r.passed, r.version) == (JudgementStatus.OK, 1.0, True, j.version)
    skipped = await j.judge(Trace(trace_id="p2", question="q", answer="I don't know."))
    assert skipped.reason_code == "abstained"
    with pytest.raises(
        ConfigError,
        match=r"^judge\.options\.politeness\.treshold: unknown option; allowed: shadow, threshold$",
    ):
        build_judges(Settings(judge_options={"politeness": {"treshold": 0.5}}), ["politeness"])
