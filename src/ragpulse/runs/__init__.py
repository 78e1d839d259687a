"""Runs: test sets replayed through the judges, their reports, comparisons and the CI gate.

A **test set** is read from a JSON, JSONL or CSV file (:func:`open_test_set`, :func:`load_test_set`) or stored
under a name (:mod:`ragpulse.runs.testsets`); :func:`replay_test_set` judges its cases as synthetic traces through
an engine and returns the :class:`RunReport` of the **run** (pass rate, coverage, per-judge statistics,
diagnosis). A stored run's report is :func:`run_report`; :func:`compare_runs` sets two side by side;
:func:`evaluate_gate` applies thresholds (``--fail-under``, ``gate --min``) and :func:`write_junit` writes the
result for CI. Portal-started runs go through :mod:`ragpulse.runs.queue`.

The names below are the public face of this package; its modules may change without notice.
"""

from ragpulse.runs.gate import GateResult, evaluate_gate
from ragpulse.runs.junit import write_junit
from ragpulse.runs.replay import replay_test_set
from ragpulse.runs.report_model import RunReport
from ragpulse.runs.runner import CaseResult, case_to_trace, case_trace_id, judge_cases, new_run_id
from ragpulse.runs.stored import compare_runs, run_report
from ragpulse.runs.testset_files import TestSetError, load_test_set, open_test_set

__all__ = [
    "CaseResult",
    "GateResult",
    "RunReport",
    "TestSetError",
    "case_to_trace",
    "case_trace_id",
    "compare_runs",
    "evaluate_gate",
    "judge_cases",
    "load_test_set",
    "new_run_id",
    "open_test_set",
    "replay_test_set",
    "run_report",
    "write_junit",
]
