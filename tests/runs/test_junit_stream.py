"""``gate --junit`` streamed from the store: the file is byte for byte the one the previous code wrote (golden
files written by it, see ``junit_reports.py``), and the one ``ElementTree`` writes of the whole tree for a run
whose rows are in the store."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from junitparser import JUnitXml

from ragpulse.config import Settings
from ragpulse.model import RunRecord, TestCase, TestSet
from ragpulse.runs.junit import junit_xml, write_junit
from ragpulse.runs.report_model import RunReport
from ragpulse.runs.reports import full_report
from ragpulse.runs.stored import run_report
from ragpulse.store import PostgresStore
from ragpulse.testing.fakes import MemoryStore
from runs.junit_reports import CASES, REPORTS, thresholds

GOLDEN = Path(__file__).parent / "golden"


def _tree_file(path: Path, report: RunReport) -> bytes:
    """What the previous ``write_junit`` wrote: the whole tree, indented, written by ElementTree."""
    tree = ET.ElementTree(junit_xml(report, thresholds(report)))
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path.read_bytes()


async def test_streamed_junit_is_the_previous_document(tmp_path: Path) -> None:
    for name, make in REPORTS.items():
        report = make()
        out = tmp_path / "deep" / f"{name}.xml"  # parent directories are created
        await write_junit(out, MemoryStore(), report, thresholds(report), chunk=2)
        assert out.read_bytes() == (GOLDEN / f"{name}.xml").read_bytes(), name
        assert _tree_file(tmp_path / f"{name}-tree.xml", report) == out.read_bytes()
    parsed = JUnitXml.fromfile(str(tmp_path / "deep" / "plain.xml"))
    assert [c.name for s in parsed for c in s][:6] == ["c1", "c2", "c3", "c4", "c5", "c6"]


async def test_a_run_without_cases_writes_the_same_document(tmp_path: Path) -> None:
    empty = next(iter(REPORTS.values()))().model_copy(update={"cases": [], "cases_total": 0})
    out = tmp_path / "empty.xml"
    await write_junit(out, MemoryStore(), empty, thresholds(empty))
    assert out.read_bytes() == _tree_file(tmp_path / "tree.xml", empty)
    assert b"<properties>" in out.read_bytes()


async def test_junit_of_a_stored_run_is_the_tree_of_its_full_report(pg_url: str, tmp_path: Path) -> None:
    store = await PostgresStore.connect(pg_url, Settings(store_database_url=pg_url).store)
    try:
        for name, make in REPORTS.items():
            source = make()
            # the report's own case results, stored under the run
            await store.upsert_test_set(
                TestSet(
                    name=source.test_set,
                    cases=tuple(TestCase(id=c.case_id, question="q") for c in source.cases),
                )
            )
            await store.create_run(RunRecord(run_id=source.run_id, test_set=source.test_set))
            await store.write_results([c.result for c in CASES[name]()])
            report = await run_report(store, source.run_id)
            assert report.case_source == "store"
            assert report.cases_total == source.cases_total
            out = tmp_path / f"{name}.xml"
            await write_junit(out, store, report, thresholds(report), chunk=2)
            assert out.read_bytes() == _tree_file(
                tmp_path / f"{name}-tree.xml", await full_report(store, report)
            )
            cases = [c.name for s in JUnitXml.fromfile(str(out)) for c in s]
            assert cases[: source.cases_total] == [c.case_id for c in source.cases]
    finally:
        await store.close()
