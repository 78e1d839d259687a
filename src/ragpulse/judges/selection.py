"""Judge selection: which judges a command or a run builds, and building them with the resources they share.

Default choice for a replay (``ragpulse replay`` without ``--judges``):

The default is ``settings.judge.enabled``. When the test set can measure retrieval, the retrieval judges
:data:`RETRIEVAL_JUDGES` (``context_precision``, ``context_recall``) are added for that run, because
otherwise a test set of labelled retrievals without answers (e.g. RGB) would report nothing.

A case makes them computable when it has a question and chunks to judge (recorded ``contexts``, or a RAG
endpoint will retrieve them for a case without a recorded answer), and

1. **retrieval ground truth**: ``context_labels`` or ``reference_contexts`` (decided from the labels, no
   judge-model call); or
2. **a reference but no answer to judge**: an expected answer or keywords, recorded contexts, no recorded
   answer and no RAG endpoint — the answer judges can score nothing there, so retrieval is what the run
   measures (statement recall and precision against the expected answer).

A test set with recorded answers and only expected answers (no labels) keeps ``enabled_judges`` as they are:
its answer judges already score it, and the retrieval judges would add judge-model calls nobody asked for.
``replay_auto_retrieval_judges: false`` turns the addition off; an explicit ``--judges`` always wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass

from ragpulse.config import Settings
from ragpulse.errors import BadRequest
from ragpulse.judges.registry import available_judges, opened_judges
from ragpulse.model import TestCase
from ragpulse.protocols import CaseSource, Judge, TokenLedger

__all__ = [
    "NO_JUDGES",
    "RETRIEVAL_JUDGES",
    "JudgeSelection",
    "check_judges_named",
    "check_runnable",
    "default_replay_judges",
    "known_judge_names",
    "measures_retrieval",
    "open_judges",
    "run_judges",
    "split_names",
]


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
    """``"a, b"`` → ``["a", "b"]``; ``None`` (the option not given) → ``None`` (use the configured judges); a
    given but empty value (``--judges ""``) → ``[]``, which :func:`check_judges_named` refuses."""
    if value is None:
        return None
    return [n.strip() for n in value.split(",") if n.strip()]


#: The one refusal of a run or re-judging with no judge: the CLI (exit 2), the API (422) and the portal say it.
NO_JUDGES = (
    "no judges to run: name at least one (--judges, or the run's judges) or enable some "
    "(judge.enabled / RAGPULSE_JUDGE_ENABLED)"
)


def check_judges_named(names: Sequence[str] | None) -> None:
    """Refuse an explicit choice of no judge (``[]``: an API ``"judges": []``, no box ticked in the portal,
    ``--judges ""``); ``None`` means "the default judges" and passes.

    Raises:
        BadRequest: :data:`NO_JUDGES`.
    """
    if names is not None and not names:
        raise BadRequest(NO_JUDGES)


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
        raise BadRequest(NO_JUDGES)


def run_judges(
    settings: Settings, test_set: CaseSource, names: Sequence[str] | None = None
) -> JudgeSelection:
    """The judges of a run of ``test_set`` (:func:`~ragpulse.judges.selection.default_replay_judges`),
    refusing up front a run that could judge nothing (:func:`check_runnable`) — the one check of
    ``ragpulse replay`` and the portal's run queue.

    Raises:
        BadRequest: the test set has no cases, or no judge would run (``names`` empty); CLI exit 2, HTTP 422.
    """
    selection = default_replay_judges(settings, test_set, names)
    check_runnable(test_set, selection.names)
    return selection


#: Judges added to a replay's default list when the test set can measure retrieval.
RETRIEVAL_JUDGES = ("context_precision", "context_recall")


@dataclass(frozen=True)
class JudgeSelection:
    """The judges of a replay run.

    Attributes:
        names: judge names to build, in display order.
        added: the names added to ``enabled_judges`` for this test set (empty when none were).
    """

    names: tuple[str, ...]
    added: tuple[str, ...] = ()


def _blank(text: str | None) -> bool:
    return not (text and text.strip())


def measures_retrieval(case: TestCase, *, endpoint: bool) -> bool:
    """True when context precision/recall are computable on ``case`` (rules in the module docstring).

    Args:
        case: the test case.
        endpoint: a RAG endpoint is configured (it answers, and retrieves for, cases without an answer).
    """
    if _blank(case.question):
        return False
    asks_endpoint = endpoint and case.answer is None
    has_chunks = bool(case.contexts) or asks_endpoint
    if not has_chunks:
        return False
    if case.context_labels or case.reference_contexts:
        return True
    has_reference = not _blank(case.expected_answer) or bool(case.keywords)
    return has_reference and bool(case.contexts) and _blank(case.answer) and not endpoint


def default_replay_judges(
    settings: Settings, test_set: CaseSource, names: Sequence[str] | None = None
) -> JudgeSelection:
    """The judges to build for replaying ``test_set``.

    Args:
        settings: ``enabled_judges``, ``rag_endpoint_url`` and ``replay_auto_retrieval_judges`` are read.
        test_set: the test set to replay.
        names: the user's explicit selection (``--judges``); when given it is returned unchanged.

    Returns:
        The names (``enabled_judges`` plus :data:`RETRIEVAL_JUDGES` not already in it when some case
        measures retrieval) and which of them were added.
    """
    if names is not None:
        return JudgeSelection(tuple(dict.fromkeys(names)))
    base = tuple(dict.fromkeys(settings.judge.enabled))
    if not settings.replay.auto_retrieval_judges:
        return JudgeSelection(base)
    endpoint = bool(settings.rag.endpoint_url)
    if not any(measures_retrieval(c, endpoint=endpoint) for c in test_set.iter_cases()):
        return JudgeSelection(base)
    added = tuple(n for n in RETRIEVAL_JUDGES if n not in base)
    return JudgeSelection(base + added, added)
