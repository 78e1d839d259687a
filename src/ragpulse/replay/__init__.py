"""Test sets and judging their cases as synthetic traces (the run around it: :mod:`ragpulse.services.replay`)."""

from ragpulse.replay.runner import CaseResult, case_to_trace, case_trace_id, judge_cases, new_run_id
from ragpulse.replay.testset import TestSetError, load_test_set, open_test_set

__all__ = [
    "CaseResult",
    "TestSetError",
    "case_to_trace",
    "case_trace_id",
    "judge_cases",
    "load_test_set",
    "new_run_id",
    "open_test_set",
]
