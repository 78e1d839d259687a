"""Building the judges of a command or a run, with the resources they share."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack

from ragpulse.config import Settings
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.registry import available_judges, build_judges
from ragpulse.protocols import Judge, TokenLedger

__all__ = ["known_judge_names", "open_judges", "split_names"]


async def open_judges(
    stack: AsyncExitStack, settings: Settings, names: Sequence[str] | None, *, ledger: object = None
) -> dict[str, Judge]:
    """Build the judges with one shared LLM client (when a judge model is configured) that ``stack`` closes.

    ``ledger``: the store; when it is a :class:`~ragpulse.protocols.TokenLedger` the daily token budget is
    kept there, shared by every process on that database (else per process).

    Raises:
        ConfigError: unknown judge name or bad judge configuration.
    """
    client = None
    if settings.judge.uses_llm:
        shared = ledger if isinstance(ledger, TokenLedger) else None
        client = await stack.enter_async_context(LLMClient(settings, ledger=shared))
    return build_judges(settings, names, client=client)


def known_judge_names(settings: Settings) -> set[str]:
    """Every judge name a run can have: registered judges (built-ins and plugins) and configured checklists."""
    return set(available_judges()) | set(settings.judge.checklists)


def split_names(value: str | None) -> list[str] | None:
    """``"a, b"`` → ``["a", "b"]``; ``None``/empty → ``None`` (use the configured judges)."""
    if not value:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    return names or None
