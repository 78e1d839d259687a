"""``ragpulse judges promote NAME``: what promoting a judge's shadow configuration means, before doing it.

A promotion is a configuration change: the judge's options become the shadow's (``judge.options.<name>.shadow`` over
the main options, without ``share``; :func:`ragpulse.judges.registry.shadow_options`), so the main judge gets
the shadow's version. ragpulse never edits the configuration file; :func:`plan_promotion` says what to write,
checks that the promoted main judge really has the shadow's version, and counts the stored shadow judgements
that judging with it will reuse: after the change, ``ragpulse rejudge --judges NAME`` (and the engine on
redelivered or replayed traces) copies every ``ok`` shadow judgement of that version into ``judgements`` for
the same trace content instead of calling the model (``flags.reused_from = "shadow"``, 0 tokens); the other
traces are judged. The old main judgements are kept (another version).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.registry import available_judges, opened_judges, shadow_options

__all__ = ["Promotion", "judge_versions", "plan_promotion"]


class _ShadowCounts(Protocol):
    async def shadow_counts(self, judge: str, version: str) -> dict[str, Any]: ...


class Promotion(BaseModel):
    """The plan of promoting ``judge``'s shadow.

    Attributes:
        judge: the judge name.
        main_version / shadow_version: versions now; after the change the main judge has ``shadow_version``.
        share: the shadow's share of judged traces (0–1).
        options: the judge's options after the change (``judge.options.<judge>`` in the config file).
        config_yaml: the same as a YAML snippet to put in the config file.
        reusable: stored ``ok`` shadow judgements of ``shadow_version`` with a content hash: reused without a
            call unless their trace's content changed since (an upper bound).
        not_reusable: other stored shadow judgements of that version (errors, skips, rows from before
            migration 155): their traces are judged again.
        since: when the oldest trace with a reusable shadow judgement was received (``None``: none).
        rejudge_command: the command that re-judges that history with the promoted version.
    """

    model_config = ConfigDict(frozen=True)

    judge: str
    main_version: str
    shadow_version: str
    share: float
    options: dict[str, Any]
    config_yaml: str
    reusable: int
    not_reusable: int
    since: datetime | None
    rejudge_command: str


def _known_judge(settings: Settings, name: str) -> None:
    """Raise :class:`ConfigError` naming the known judges when ``name`` is none of them."""
    known = [*available_judges(), *sorted(settings.judge.checklists)]
    if name not in known:
        raise ConfigError(f"unknown judge {name!r} (known judges: {', '.join(known)})")


async def _shadow_setup(settings: Settings, name: str, what: str) -> tuple[dict[str, Any], float, str, str]:
    """``(promoted options, shadow share, main version, shadow version)`` of judge ``name``."""
    _known_judge(settings, name)
    raw = settings.judge.options.get(name)
    if not isinstance(raw, dict) or raw.get("shadow") is None:
        raise ConfigError(
            f"judge.options.{name} has no shadow configuration to {what} (judge.options.{name}.shadow)"
        )
    promoted, share = shadow_options(raw)
    async with opened_judges(settings, [name]) as judges:
        main = judges[name]
        spec: Any = getattr(main, "shadow", None)
        if spec is None:  # a plugin judge that ignores the shadow option
            raise ConfigError(f"judge {name!r} has no shadow judge")
        return promoted, share, main.version, spec.judge.version


async def judge_versions(settings: Settings, name: str) -> tuple[str, str]:
    """``(main version, shadow version)`` of judge ``name`` as configured now (what ``judges compare``
    compares).

    Raises:
        ConfigError: ``name`` is not a judge (the message lists the known ones), has no ``shadow`` option, or its main and shadow have the same
            version (nothing to compare).
    """
    _, _, main_version, shadow_version = await _shadow_setup(settings, name, "compare")
    if main_version == shadow_version:
        raise ConfigError(
            f"judge.options.{name}: the main and the shadow configuration have the same version {main_version}; "
            "nothing to compare"
        )
    return main_version, shadow_version


async def plan_promotion(settings: Settings, store: _ShadowCounts, name: str) -> Promotion:
    """The promotion of judge ``name``'s shadow (see the module docstring); changes nothing.

    Raises:
        ConfigError: ``name`` is not a judge (the message lists the known ones), has no ``shadow`` option, or the promoted options would not give
            the shadow's version (a judge whose version depends on more than its options).
        StoreError: the store could not be read.
    """
    promoted, share, main_version, shadow_version = await _shadow_setup(settings, name, "promote")
    after = settings.replaced(judge_options={**settings.judge.options, name: promoted})
    async with opened_judges(after, [name]) as judges:
        if judges[name].version != shadow_version:
            raise ConfigError(
                f"judge.options.{name}: the promoted options give version {judges[name].version}, not the shadow's "
                f"{shadow_version}"
            )
    counts = await store.shadow_counts(name, shadow_version)
    since: datetime | None = counts["since"]
    command = f"ragpulse rejudge --judges {name}"
    if since is not None:
        command += f" --since {since.isoformat(timespec='seconds')}"
    return Promotion(
        judge=name,
        main_version=main_version,
        shadow_version=shadow_version,
        share=share,
        options=promoted,
        config_yaml=yaml.safe_dump(
            {"judge": {"options": {name: promoted}}}, sort_keys=False, allow_unicode=True
        ),
        reusable=counts["reusable"],
        not_reusable=counts["other"],
        since=since,
        rejudge_command=command,
    )
