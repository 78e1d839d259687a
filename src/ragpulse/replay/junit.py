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

A case row (``report["cases"]``) maps to: ``passed`` → a passing test case; a scored judgement that failed →
``failure``; otherwise an ``error`` judgement → ``error``; otherwise (all skipped, not evaluable) →
``skipped``. ``time`` attributes are seconds (the run's ``wall_seconds`` on the case suite).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ThresholdOutcome", "junit_xml", "write_junit"]


@dataclass(frozen=True)
class ThresholdOutcome:
    """One gate threshold: ``metric >= minimum``; ``actual`` is ``None`` when the run has no value."""

    metric: str
    minimum: float
    actual: float | None
    met: bool
    message: str


def _judgement_lines(row: Mapping[str, Any]) -> str:
    lines = []
    for name, j in (row.get("judgements") or {}).items():
        score = j.get("score")
        s = "-" if score is None else f"{float(score):.3f}"
        outcome = j.get("status") if j.get("status") != "ok" else ("pass" if j.get("passed") else "fail")
        lines.append(f"{name}: {s} {outcome} {j.get('reason') or ''}".rstrip())
    return "\n".join(lines)


def _case(suite: ET.Element, classname: str, row: Mapping[str, Any]) -> str:
    tc = ET.SubElement(suite, "testcase", classname=classname, name=str(row.get("case_id")), time="0")
    if row.get("passed"):
        return "pass"
    reason = str(row.get("reason") or "not passed")
    body = _judgement_lines(row)
    statuses = {j.get("status") for j in (row.get("judgements") or {}).values()}
    failed = any(
        j.get("status") == "ok" and not j.get("passed") for j in (row.get("judgements") or {}).values()
    )
    if failed:
        el = ET.SubElement(tc, "failure", message=reason, type="quality")
        el.text = body
        return "failure"
    if "error" in statuses:
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


def junit_xml(report: Mapping[str, Any], thresholds: Sequence[ThresholdOutcome]) -> ET.Element:
    """Build the ``<testsuites>`` element for a run report and its threshold outcomes."""
    run_id = str(report.get("run_id", ""))
    test_set = str(report.get("test_set", "run"))
    root = ET.Element("testsuites", name=f"ragpulse gate {run_id}")
    classname = f"ragpulse.{test_set}"
    cases = ET.SubElement(root, "testsuite", name=classname)
    props = ET.SubElement(cases, "properties")
    for key in ("run_id", "test_set", "status", "pass_rate", "coverage"):
        if report.get(key) is not None:
            ET.SubElement(props, "property", name=key, value=str(report[key]))
    case_results = [_case(cases, classname, row) for row in report.get("cases") or []]
    wall = float(report.get("wall_seconds") or 0.0)
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


def write_junit(path: str | Path, report: Mapping[str, Any], thresholds: Sequence[ThresholdOutcome]) -> None:
    """Write the JUnit XML (UTF-8, with an XML declaration) to ``path``, creating parent directories.

    Raises:
        OSError: the file cannot be written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tree = ET.ElementTree(junit_xml(report, thresholds))
    ET.indent(tree)
    tree.write(p, encoding="utf-8", xml_declaration=True)
