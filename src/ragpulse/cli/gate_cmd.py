"""``ragpulse gate RUN``: fail a CI job when a stored run is under its quality thresholds.

Exit codes: 0 every threshold met, 1 a threshold breached (or the run failed), 2 usage/config error (unknown
run, bad threshold, store unavailable). A run without a stored report (still running, or traces sent through
Kafka/OTLP with a run id) is gated on a report computed from its stored results. ``--junit FILE`` writes JUnit XML with one test case per test case
of the run plus one per threshold (:mod:`ragpulse.replay.junit`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from ragpulse.cli import _common, app
from ragpulse.config import Settings
from ragpulse.errors import ConfigError, StoreError

__all__ = ["gate"]


async def _load_report(settings: Settings, run_id: str) -> dict[str, Any]:
    from ragpulse.cli.runs_cmd import report_of
    from ragpulse.store import open_store

    async with open_store(settings.store) as store:
        run = await store.get_run(run_id)
        if run is None:
            raise _common.fail(f"run {run_id!r} not found")
        return dict(await report_of(store, run))


@app.command()
def gate(
    run_id: str = typer.Argument(..., metavar="RUN", help="Run id (see `ragpulse runs list`)."),
    minimum: list[str] = typer.Option(  # noqa: B008
        [],
        "--min",
        help="METRIC=MIN, e.g. pass_rate=0.8, faithfulness=0.9, keyword.pass_rate=0.7 (repeatable).",
    ),
    junit: str | None = typer.Option(None, "--junit", help="Write JUnit XML to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    """Check a finished run against minimum thresholds (also from `gate_min` in the config); exit 0/1."""
    from ragpulse.replay.gate import evaluate_gate, gate_thresholds
    from ragpulse.replay.junit import write_junit

    settings = _common.settings()
    try:
        thresholds = gate_thresholds(settings.replay.gate_min, minimum, settings.replay.coverage_threshold)
    except ConfigError as e:
        raise _common.fail(str(e)) from e
    try:
        report = asyncio.run(_load_report(settings, run_id))
    except StoreError as e:
        raise _common.fail(f"store: {e}") from e
    result = evaluate_gate(report, thresholds)
    if junit:
        try:
            write_junit(junit, report, result.thresholds)
        except OSError as e:
            raise _common.fail(f"cannot write {junit}: {e}") from e
    failing = [c for c in report.get("cases") or [] if not c.get("passed")]
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "run_id": run_id,
                    "passed": result.passed,
                    "run_failed": result.run_failed,
                    "thresholds": [
                        {"metric": t.metric, "minimum": t.minimum, "actual": t.actual, "met": t.met}
                        for t in result.thresholds
                    ],
                    "failing_cases": [
                        {"case_id": c.get("case_id"), "reason": c.get("reason")} for c in failing
                    ],
                },
                ensure_ascii=False,
            )
        )
    else:
        _print(run_id, report, result, failing)
    raise typer.Exit(result.exit_code)


def _print(run_id: str, report: dict[str, Any], result: Any, failing: list[dict[str, Any]]) -> None:
    console = Console()
    table = Table(title=f"gate {run_id} ({report.get('test_set')}, {report.get('cases_total')} cases)")
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
        console.print("[red]the run itself failed[/red]")
    for c in failing[:20]:
        console.print(f"  [red]✗[/red] {c.get('case_id')}: {c.get('reason')}")
    if len(failing) > 20:
        console.print(f"  … and {len(failing) - 20} more failing cases")
    console.print("[green]PASSED[/green]" if result.passed else "[red]FAILED[/red]")
