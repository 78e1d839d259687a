"""``ragpulse gate RUN``: fail a CI job when a stored run is under its quality thresholds
(:mod:`ragpulse.runs.gate`).

Exit codes: 0 every threshold met, 1 a threshold breached (or the run failed), 2 usage/config error (no
threshold, bad threshold, unknown metric or judge, unknown run), 3 the store could not be opened. A run without
a stored report (still running, or traces sent through Kafka/OTLP with a run id) is gated on a report computed
from its stored results. ``--junit FILE`` writes JUnit XML with one test case per test case of the run plus one
per threshold (:mod:`ragpulse.runs.junit`), the case rows streamed from the store.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from ragpulse.cli import _common, app

if TYPE_CHECKING:  # the service modules are imported in the command: `ragpulse --help` stays light
    from ragpulse.protocols import Store
    from ragpulse.runs.gate import GateResult
    from ragpulse.runs.report_model import CaseRow, RunReport

__all__ = ["gate"]

#: Failing cases the text output lists (``--json`` lists all of them).
FAILING_SHOWN = 20


@app.command()
def gate(
    run_id: str = typer.Argument(..., metavar="RUN", help="Run id (see `ragpulse runs list`)."),
    minimum: list[str] = typer.Option(  # noqa: B008 (typer's documented list-option default)
        [],
        "--min",
        help="METRIC=MIN, e.g. pass_rate=0.8, faithfulness=0.9, keyword.pass_rate=0.7 (repeatable; at least "
        "one here or in gate_min).",
    ),
    junit: str | None = typer.Option(None, "--junit", help="Write JUnit XML to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    """Check a finished run against minimum thresholds (also from `gate_min` in the config); exit 0/1."""
    from ragpulse.judges.selection import known_judge_names
    from ragpulse.runs.gate import evaluate_gate, gate_thresholds
    from ragpulse.runs.junit import write_junit
    from ragpulse.runs.reports import case_rows_page
    from ragpulse.runs.stored import run_report

    settings = _common.settings()
    # Checked before the run is read: a typo is a usage error whatever the store says.
    thresholds = gate_thresholds(
        settings.replay.gate_min,
        minimum,
        settings.replay.coverage_threshold,
        judges=known_judge_names(settings),
    )

    async def q(store: Store) -> GateResult:
        report = await run_report(store, run_id)
        result = evaluate_gate(report, thresholds)
        if junit:  # one test case per case, streamed from the store
            try:
                await write_junit(junit, store, report, result.thresholds)
            except OSError as e:
                raise _common.fail(f"cannot write {junit}: {e}") from e
        if as_json:  # every failing case and case not judged, id and reason only, written as read
            await _write_json(store, run_id, report, result)
        else:
            failing, _ = await case_rows_page(store, report, limit=FAILING_SHOWN, failing=True)
            unjudged, _ = await case_rows_page(store, report, limit=FAILING_SHOWN, not_judged=True)
            _print(run_id, report, result, failing, unjudged)
        return result

    result = _common.run_with_store(settings, q)
    raise typer.Exit(result.exit_code)


async def _write_json(store: Store, run_id: str, report: RunReport, result: GateResult) -> None:
    """Print the gate's result as one JSON object on one line, its ``failing_cases`` (verdict ``fail``) and
    ``not_judged_cases`` (abstained, judge errors, skips: not failures) streamed from the store (memory does not
    grow with the run; the cases not judged are spooled to a temporary file meanwhile): the same text as
    ``json.dumps`` of the whole object."""

    from ragpulse.runs.reports import iter_case_rows

    head = {
        "run_id": run_id,
        "passed": result.passed,
        "run_failed": result.run_failed,
        "thresholds": [
            {"metric": t.metric, "minimum": t.minimum, "actual": t.actual, "met": t.met}
            for t in result.thresholds
        ],
    }
    out = sys.stdout
    out.write(json.dumps(head, ensure_ascii=False)[:-1] + ', "failing_cases": [')
    sep = spool_sep = ""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        async for r in iter_case_rows(store, report):
            item = json.dumps({"case_id": r.case_id, "reason": r.reason}, ensure_ascii=False)
            if r.verdict == "fail":
                out.write(sep + item)
                sep = ", "
            elif r.verdict == "not_judged":
                spool.write(spool_sep + item)
                spool_sep = ", "
        out.write('], "not_judged_cases": [')
        spool.seek(0)
        shutil.copyfileobj(spool, out)
    out.write("]}\n")
    out.flush()


def _print(
    run_id: str, report: RunReport, result: GateResult, failing: list[CaseRow], unjudged: list[CaseRow]
) -> None:
    console = Console()
    table = Table(title=f"gate {run_id} ({report.test_set}, {report.cases_total} cases)")
    for col in ("metric", "actual", "minimum", "result"):
        table.add_column(col)
    for t in result.thresholds:
        table.add_row(
            t.metric,
            "-" if t.actual is None else f"{t.actual:.3f}",
            f"{t.minimum:g}",
            "[green]ok[/green]" if t.met else "[red]FAIL[/red]",
        )
    console.print(table)
    if result.run_failed:
        console.print(
            f"[red]the run did not complete (status {report.status}): its numbers cover part of it[/red]"
        )
    for c in failing[:FAILING_SHOWN]:
        console.print(f"  [red]✗[/red] {c.case_id}: {c.reason}")
    more = report.cases_failing - min(len(failing), FAILING_SHOWN)
    if more > 0:
        console.print(f"  … and {more} more failing cases")
    for c in unjudged[:FAILING_SHOWN]:
        console.print(f"  [yellow]?[/yellow] {c.case_id} (not judged): {c.reason}")
    more = (report.cases_not_judged or 0) - min(len(unjudged), FAILING_SHOWN)
    if more > 0:
        console.print(f"  … and {more} more cases not judged")
    console.print("[green]PASSED[/green]" if result.passed else "[red]FAILED[/red]")
