"""Test sets, replay runs, run reports and thresholds (``ragpulse replay``, ``runs``, ``gate``)."""

from ragpulse.replay.report import CaseResult, build_report, run_status
from ragpulse.replay.runner import case_to_trace, case_trace_id, new_run_id, run_replay
from ragpulse.replay.testset import TestSetError, load_test_set
from ragpulse.replay.thresholds import Breach, Threshold, evaluate_thresholds, parse_thresholds

__all__ = [
    "Breach",
    "CaseResult",
    "TestSetError",
    "Threshold",
    "build_report",
    "case_to_trace",
    "case_trace_id",
    "evaluate_thresholds",
    "load_test_set",
    "new_run_id",
    "parse_thresholds",
    "run_replay",
    "run_status",
]
