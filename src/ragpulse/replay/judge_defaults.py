"""The judges a replay runs when the user names none (``ragpulse replay`` without ``--judges``).

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
from dataclasses import dataclass

from ragpulse.config import Settings
from ragpulse.model import TestCase
from ragpulse.protocols import CaseSource

__all__ = ["RETRIEVAL_JUDGES", "JudgeSelection", "default_replay_judges", "measures_retrieval"]

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
