"""Building the judges of a command or a run, with the resources they share."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack

from ragpulse.config import Settings
from ragpulse.judges.registry import available_judges, opened_judges
from ragpulse.protocols import CaseSource, Judge, TokenLedger
from ragpulse.replay.judge_defaults import JudgeSelection, default_replay_judges
from ragpulse.services.errors import BadRequest

__all__ = ["check_runnable", "known_judge_names", "open_judges", "run_judges", "split_names"]


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


def check_runnable(test_set: CaseSource, judge_names: Sequence[str]) -> None:
    """Refuse a run that could judge nothing: ``test_set`` without cases, or no judge names.

    Raises:
        BadRequest: the one message for either (CLI exit 2, HTTP 422).
    """
    if not test_set.case_count:
        raise BadRequest(
            f"test set {test_set.name!r} has no cases: add cases (portal, API or a test-set file) before "
            "starting a run"
        )
    if not judge_names:
        raise BadRequest(
            "no judges to run: name at least one (--judges, or the run's judges) or enable some "
            "(judge.enabled / RAGPULSE_JUDGE_ENABLED)"
        )


def run_judges(
    settings: Settings, test_set: CaseSource, names: Sequence[str] | None = None
) -> JudgeSelection:
    """The judges of a run of ``test_set`` (:func:`~ragpulse.replay.judge_defaults.default_replay_judges`),
    refusing up front a run that could judge nothing (:func:`check_runnable`) — the one check of
    ``ragpulse replay`` and the portal's run queue.

    Raises:
        BadRequest: the test set has no cases, or no judge would run (``names`` empty); CLI exit 2, HTTP 422.
    """
    selection = default_replay_judges(settings, test_set, names)
    check_runnable(test_set, selection.names)
    return selection
