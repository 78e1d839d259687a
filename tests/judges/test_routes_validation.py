"""A judge name in ``judge.routes`` that no registry knows is a ConfigError when judges are built; a registered
judge that this run does not build stays ignored (docs/replay.md)."""

from __future__ import annotations

import pytest

from ragpulse.config import JudgeRoute, Settings, load_settings
from ragpulse.engine.routing import Router
from ragpulse.errors import ConfigError
from ragpulse.judges.registry import build_judges
from ragpulse.model import Trace


def test_a_misspelled_judge_in_routes_is_a_config_error() -> None:
    s = Settings(judge_routes=[JudgeRoute(app="hr", judges=["keyword", "faithfullness"])])
    with pytest.raises(
        ConfigError, match=r"^judge\.routes names unknown judge\(s\) faithfullness; available: "
    ):
        build_judges(s, ["keyword"])


def test_the_typo_is_caught_from_the_environment_too() -> None:
    s = load_settings(
        environ={"RAGPULSE_JUDGE_ROUTES": '[{"app": "hr", "judges": ["relevancy", "kyeword"]}]'}
    )
    with pytest.raises(ConfigError, match="kyeword"):
        build_judges(s)


def test_a_registered_judge_not_built_in_this_run_is_ignored() -> None:
    routes = [JudgeRoute(app="hr", judges=["keyword", "context_recall", "my_checklist"])]
    s = Settings(
        judge_routes=routes,
        judge_checklists={"my_checklist": {"items": [{"id": "a", "kind": "contains", "any": ["x"]}]}},
    )
    judges = build_judges(s, ["keyword"])
    assert list(judges) == ["keyword"]
    chosen = Router(judges, routes).select(Trace(trace_id="t", app="hr"))
    assert [j.name for j in chosen] == ["keyword"]
