"""JUnit XML for a gated run, so any CI shows the failing test cases (standard library ElementTree).

Layout::

    <testsuites name="ragpulse gate <run_id>" tests= failures= errors= skipped= time=>
      <testsuite name="ragpulse.<test set>" …>          one <testcase> per test case of the run
        <properties> run_id, test_set, status, pass_rate, coverage </properties>
        <testcase classname="ragpulse.<test set>" name="<case id>" time="0">
          <failure message="<why>" type="quality">judge: score status reason, one per line</failure>
          | <error message="…" type="judge_error"> | <skipped message="…"/>
        </testcase>
      </testsuite>
      <testsuite name="ragpulse.thresholds" …>           one <testcase> per threshold
        <testcase classname="ragpulse.thresholds" name="pass_rate>=0.8"> [<failure message="pass_rate 0.750 < 0.8"/>]
      </testsuite>
    </testsuites>

A case row (``report.cases``) maps to: ``passed`` → a passing test case; a scored judgement that failed →
``failure``; otherwise an ``error`` judgement → ``error``; otherwise (all skipped, not evaluable) →
``skipped``. ``time`` attributes are seconds (the run's ``wall_seconds`` on the case suite).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from ragpulse.model import JudgementStatus
from ragpulse.services.gate import ThresholdOutcome
from ragpulse.services.report_model import CaseRow, RunReport

__all__ = ["junit_xml", "write_junit"]


def _judgement_lines(row: CaseRow) -> str:
    lines = []
    for name, j in row.judgements.items():
        s = "-" if j.score is None else f"{j.score:.3f}"
        outcome = j.status.value if j.status is not JudgementStatus.OK else ("pass" if j.passed else "fail")
        lines.append(f"{name}: {s} {outcome} {j.reason or ''}".rstrip())
    return "\n".join(lines)


def _case(suite: ET.Element, classname: str, row: CaseRow) -> str:
    tc = ET.SubElement(suite, "testcase", classname=classname, name=row.case_id, time="0")
    if row.passed:
        return "pass"
    reason = row.reason or "not passed"
    body = _judgement_lines(row)
    js = row.judgements.values()
    if any(j.status is JudgementStatus.OK and not j.passed for j in js):
        el = ET.SubElement(tc, "failure", message=reason, type="quality")
        el.text = body
        return "failure"
    if any(j.status is JudgementStatus.ERROR for j in js):
        el = ET.SubElement(tc, "error", message=reason, type="judge_error")
        el.text = body
        return "error"
    ET.SubElement(tc, "skipped", message=reason)
    return "skipped"


def _counts(suite: ET.Element, results: Sequence[str], time_s: float) -> dict[str, int]:
    c = {
        "tests": len(results),
        "failures": results.count("failure"),
        "errors": results.count("error"),
        "skipped": results.count("skipped"),
    }
    for k, v in c.items():
        suite.set(k, str(v))
    suite.set("time", f"{time_s:.3f}")
    return c


def junit_xml(report: RunReport, thresholds: Sequence[ThresholdOutcome]) -> ET.Element:
    """Build the ``<testsuites>`` element for a run report and its threshold outcomes."""
    root = ET.Element("testsuites", name=f"ragpulse gate {report.run_id}")
    classname = f"ragpulse.{report.test_set or 'run'}"
    cases = ET.SubElement(root, "testsuite", name=classname)
    props = ET.SubElement(cases, "properties")
    for key, value in (
        ("run_id", report.run_id),
        ("test_set", report.test_set),
        ("status", report.status.value),
        ("pass_rate", report.pass_rate),
        ("coverage", report.coverage),
    ):
        ET.SubElement(props, "property", name=key, value=str(value))
    case_results = [_case(cases, classname, row) for row in report.cases]
    wall = report.wall_seconds
    totals = _counts(cases, case_results, wall)
    ts = ET.SubElement(root, "testsuite", name="ragpulse.thresholds")
    t_results: list[str] = []
    for t in thresholds:
        tc = ET.SubElement(
            ts, "testcase", classname="ragpulse.thresholds", name=f"{t.metric}>={t.minimum:g}", time="0"
        )
        if t.met:
            t_results.append("pass")
        else:
            ET.SubElement(tc, "failure", message=t.message, type="threshold")
            t_results.append("failure")
    t_totals = _counts(ts, t_results, 0.0)
    for k in totals:
        root.set(k, str(totals[k] + t_totals[k]))
    root.set("time", f"{wall:.3f}")
    return root


def write_junit(path: str | Path, report: RunReport, thresholds: Sequence[ThresholdOutcome]) -> None:
    """Write the JUnit XML (UTF-8, with an XML declaration) to ``path``, creating parent directories.

    Raises:
        OSError: the file cannot be written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tree = ET.ElementTree(junit_xml(report, thresholds))
    ET.indent(tree)
    tree.write(p, encoding="utf-8", xml_declaration=True)
