"""Judges: feedback functions that score one RAG trace each (relevancy, faithfulness, keyword, …).

This package depends only on :mod:`ragpulse.model`, :mod:`ragpulse.protocols`, :mod:`ragpulse.config`
and :mod:`ragpulse.errors`; never on the engine, store, export or ingest layers.

For judge authors (a plugin registered under the ``ragpulse.judges`` entry point, docs/reference-metrics.md),
the names below are the public face: subclass :class:`JudgeBase`, return a :class:`Decision` from ``decide``, build
judgements with :func:`ok`, :func:`skipped`, :func:`error`. Everything else in this package may change without
notice.
"""

from ragpulse.judges.frame import CallLog, Decision, JudgeBase, compute_version, error, ok, precheck, skipped
from ragpulse.judges.options import JudgeOptions
from ragpulse.judges.registry import ENTRY_POINT_GROUP, JudgeSpec, available_judges, build_judges

__all__ = [
    "ENTRY_POINT_GROUP",
    "CallLog",
    "Decision",
    "JudgeBase",
    "JudgeOptions",
    "JudgeSpec",
    "available_judges",
    "build_judges",
    "compute_version",
    "error",
    "ok",
    "precheck",
    "skipped",
]
