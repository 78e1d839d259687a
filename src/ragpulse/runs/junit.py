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

A case row (``report.cases``) maps by its verdict (``CaseRow.verdict``): ``pass`` → a passing test case;
``fail`` (a scored judgement failed, the answer did not abstain) → ``failure``; ``not_judged`` → ``error`` when
a judge errored, else ``skipped`` (abstained, skipped, not evaluable) — never a failure. ``time`` attributes are seconds (the run's ``wall_seconds`` on the case suite).

:func:`write_junit` streams: the case rows are read from the store through one cursor and each ``<testcase>``
is written to a temporary file as it is made (the counts go in the start tags, so the document is assembled
once they are known), so memory does not grow with the run. The file is the one :func:`junit_xml` (the whole
tree in memory) gives, indented by ``ElementTree.indent``.
"""

from __future__ import annotations

import shutil
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from ragpulse.model import JudgementStatus
from ragpulse.protocols import RunStore
from ragpulse.runs.gate import ThresholdOutcome
from ragpulse.runs.report_model import CaseRow, RunReport
from ragpulse.runs.reports import iter_case_rows

__all__ = ["junit_xml", "write_junit"]

#: A case suite's count attribute of each test case result (``pass`` counts in ``tests`` only).
_COUNTED = {"failure": "failures", "error": "errors", "skipped": "skipped"}
#: Stands for the test cases in the document written around them (a tag no escaped content can contain).
_CASES_MARK = "ragpulse-junit-cases"


def _judgement_lines(row: CaseRow) -> str:
    lines = []
    for name, j in row.judgements.items():
        s = "-" if j.score is None else f"{j.score:.3f}"
        outcome = j.status.value if j.status is not JudgementStatus.OK else ("pass" if j.passed else "fail")
        lines.append(f"{name}: {s} {outcome} {j.reason or ''}".rstrip())
    return "\n".join(lines)


def _case(classname: str, row: CaseRow) -> tuple[ET.Element, str]:
    """The ``<testcase>`` of a case row and its result (``pass``, ``failure``, ``error``, ``skipped``)."""
    tc = ET.Element("testcase", classname=classname, name=row.case_id, time="0")
    if row.verdict == "pass":
        return tc, "pass"
    reason = row.reason or "not passed"
    body = _judgement_lines(row)
    js = row.judgements.values()
    if row.verdict == "fail":
        el = ET.SubElement(tc, "failure", message=reason, type="quality")
        el.text = body
        return tc, "failure"
    if any(j.status is JudgementStatus.ERROR for j in js):
        el = ET.SubElement(tc, "error", message=reason, type="judge_error")
        el.text = body
        return tc, "error"
    ET.SubElement(tc, "skipped", message=reason)
    return tc, "skipped"


class _Tally:
    def __init__(self) -> None:
        self.counts = dict.fromkeys(("tests", *_COUNTED.values()), 0)

    def add(self, result: str) -> None:
        self.counts["tests"] += 1
        if result != "pass":
            self.counts[_COUNTED[result]] += 1

    def set_on(self, suite: ET.Element, time_s: float) -> None:
        for k, v in self.counts.items():
            suite.set(k, str(v))
        suite.set("time", f"{time_s:.3f}")


def _document(
    report: RunReport, thresholds: Sequence[ThresholdOutcome], cases: Iterable[ET.Element], totals: _Tally
) -> ET.Element:
    """The ``<testsuites>`` element with ``cases`` (``totals`` counted over them) in the case suite."""
    root = ET.Element("testsuites", name=f"ragpulse gate {report.run_id}")
    suite = ET.SubElement(root, "testsuite", name=f"ragpulse.{report.test_set or 'run'}")
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("run_id", report.run_id),
        ("test_set", report.test_set),
        ("status", report.status.value),
        ("pass_rate", report.pass_rate),
        ("coverage", report.coverage),
    ):
        ET.SubElement(props, "property", name=key, value=str(value))
    suite.extend(cases)
    wall = report.wall_seconds
    totals.set_on(suite, wall)
    ts = ET.SubElement(root, "testsuite", name="ragpulse.thresholds")
    t_totals = _Tally()
    for t in thresholds:
        tc = ET.SubElement(
            ts, "testcase", classname="ragpulse.thresholds", name=f"{t.metric}>={t.minimum:g}", time="0"
        )
        if t.met:
            t_totals.add("pass")
        else:
            ET.SubElement(tc, "failure", message=t.message, type="threshold")
            t_totals.add("failure")
    t_totals.set_on(ts, 0.0)
    for k, v in totals.counts.items():
        root.set(k, str(v + t_totals.counts[k]))
    root.set("time", f"{wall:.3f}")
    return root


def junit_xml(report: RunReport, thresholds: Sequence[ThresholdOutcome]) -> ET.Element:
    """Build the ``<testsuites>`` element for a run report (its in-memory ``cases``) and its threshold
    outcomes."""
    classname = f"ragpulse.{report.test_set or 'run'}"
    totals = _Tally()
    cases = []
    for row in report.cases:
        tc, result = _case(classname, row)
        totals.add(result)
        cases.append(tc)
    return _document(report, thresholds, cases, totals)


async def write_junit(
    path: str | Path,
    store: RunStore,
    report: RunReport,
    thresholds: Sequence[ThresholdOutcome],
    *,
    chunk: int = 1000,
) -> None:
    """Write the JUnit XML of ``report`` (UTF-8, with an XML declaration, indented) to ``path``, creating parent
    directories: one test case per case row, read from the store through one cursor (``chunk`` rows at a time,
    :func:`~ragpulse.runs.reports.iter_case_rows`) and spooled to a temporary file as XML, so memory does not
    grow with the run. ``path`` is written once every row is read.

    Raises:
        StoreError: the store failed (``path`` is not written).
        OSError: the file cannot be written.
    """
    classname = f"ragpulse.{report.test_set or 'run'}"
    totals = _Tally()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogatepass", newline="") as spool:
        sep = ""
        async for row in iter_case_rows(store, report, chunk=chunk):
            tc, result = _case(classname, row)
            totals.add(result)
            ET.indent(tc, level=2)  # as ElementTree.indent of the whole document indents it
            spool.write(sep + ET.tostring(tc, encoding="unicode"))
            sep = "\n    "
        _write_document(Path(path), report, thresholds, totals, spool)


def _write_document(
    path: Path, report: RunReport, thresholds: Sequence[ThresholdOutcome], totals: _Tally, cases: IO[str]
) -> None:
    """Write the document to ``path`` with the test cases read from ``cases`` (serialized, indented, one after
    another) where the case suite holds them: what ``ElementTree.write(path, encoding="utf-8",
    xml_declaration=True)`` writes of the indented tree with those test cases in it."""
    mark = [ET.Element(_CASES_MARK)] if totals.counts["tests"] else []
    root = _document(report, thresholds, mark, totals)
    ET.indent(root)
    head, _, tail = ET.tostring(root, encoding="unicode").partition(f"<{_CASES_MARK} />")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", errors="xmlcharrefreplace") as out:
        out.write("<?xml version='1.0' encoding='utf-8'?>\n")
        out.write(head)
        cases.seek(0)
        shutil.copyfileobj(cases, out)
        out.write(tail)
