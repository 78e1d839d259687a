"""Building the judges of a command or a run, with the resources they share."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack

from ragpulse.config import Settings
from ragpulse.judges.registry import available_judges, opened_judges
from ragpulse.protocols import Judge, TokenLedger

__all__ = ["known_judge_names", "open_judges", "split_names"]


async def open_judges(
    stack: AsyncExitStack, settings: Settings, names: Sequence[str] | None, *, ledger: object = None
) -> dict[str, Judge]:
    """Build the judges (:func:`ragpulse.judges.registry.opened_judges`): ``stack`` closes what they share (the
    LLM client) and what each holds (an embeddings client) once, on exit.

    ``ledger``: the store; when it is a :class:`~ragpulse.protocols.TokenLedger` the daily token budget is
    kept there, shared by every process on that database (else per process).

    Raises:
        ConfigError: unknown judge name or bad judge configuration.
    """
    shared = ledger if isinstance(ledger, TokenLedger) else None
    return await stack.enter_async_context(opened_judges(settings, names, ledger=shared))


def known_judge_names(settings: Settings) -> set[str]:
    """Every judge name a run can have: registered judges (built-ins and plugins) and configured checklists."""
    return set(available_judges()) | set(settings.judge.checklists)


def split_names(value: str | None) -> list[str] | None:
    """``"a, b"`` → ``["a", "b"]``; ``None``/empty → ``None`` (use the configured judges)."""
    if not value:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    return names or None
