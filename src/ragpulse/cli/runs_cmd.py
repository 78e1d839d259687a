"""``ragpulse runs list|show|compare``, ``ragpulse trace TRACE_ID`` and ``ragpulse rejudge``: adapters over
:mod:`ragpulse.runs.stored`.

Exit codes: 0 done, 2 bad input/configuration or an unknown run or trace, 3 the store could not be opened or
every judgement of a re-judge is an error.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

import typer

from ragpulse.cli import _common, _render
from ragpulse.cli import app as _app
from ragpulse.errors import NotFoundError

if TYPE_CHECKING:  # the service modules are imported in the commands: `ragpulse --help` stays light
    from ragpulse.model import TraceResult
    from ragpulse.portal.traces import TraceDetail
    from ragpulse.protocols import Store
    from ragpulse.runs.compare import RunComparison
    from ragpulse.runs.stored import RejudgeSummary, RunSummary

#: ``ragpulse.runs.compare.DEFAULT_SCORE_DROP``, repeated here so ``--help`` imports no service module
#: (tests/cli/test_cli_startup.py checks that the two agree).
DEFAULT_SCORE_DROP = 0.1

__all__: list[str] = []

runs_app = typer.Typer(help="Stored replay runs: list, show, compare.", no_args_is_help=True)
_app.add_typer(runs_app, name="runs")


def _dump(obj: Any) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False, default=str))


@runs_app.command("list")
def runs_list(
    limit: int = typer.Option(50, "--limit", min=1, help="Most recent runs to show."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON list."),
) -> None:
    """List stored runs, newest first."""
    from ragpulse.runs import stored as run_service

    s = _common.settings()

    async def q(store: Store) -> list[RunSummary]:
        return await run_service.list_runs(store, limit)

    runs = _common.run_with_store(s, q)
    if json_out:
        _dump([r.to_json() for r in runs])
    else:
        _render.print_runs(runs)


@runs_app.command("show")
def runs_show(
    run_id: str = typer.Argument(..., metavar="RUN_ID", help="Run id."),
    json_out: bool = typer.Option(False, "--json", help="Print the run report as JSON."),
    all_cases: bool = typer.Option(True, "--all/--failing", help="List every case or only failing ones."),
    limit: int = typer.Option(
        _render.CASE_ROWS,
        "--limit",
        min=0,
        help="Case rows to print (0: all); the JSON report has every case.",
    ),
    offset: int = typer.Option(0, "--offset", min=0, help="Skip this many case rows first."),
) -> None:
    """Show a run's report with a per-case table (reasons included), a page of rows at a time (read from the
    store page by page); '--json' streams the whole report, every case included."""
    from ragpulse.runs import stored as run_service

    s = _common.settings()

    async def q(store: Store) -> None:
        report = await run_service.run_report(store, run_id)
        await _render.emit_report(
            store, report, json_out=json_out, cases=all_cases, limit=limit or None, offset=offset
        )

    _common.run_with_store(s, q)


@runs_app.command("compare")
def runs_compare(
    run_a: str = typer.Argument(..., metavar="RUN_A", help="Baseline run id."),
    run_b: str = typer.Argument(..., metavar="RUN_B", help="Candidate run id."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    score_drop: float = typer.Option(
        DEFAULT_SCORE_DROP,
        "--score-drop",
        help="List a case that failed in both runs as a regression when a judge's score dropped by this much "
        "or more (0 < x ≤ 1).",
    ),
) -> None:
    """Averages of two runs side by side, the cases that flipped pass → fail (and back), and the cases that
    failed in both runs with a judge's score down by '--score-drop' or more. Runs that ran different judges
    are compared on the judges both ran (a warning names the others); exit 2 when the runs share no case or no
    judge (every figure n/a). The runs' case rows are read a page at a time and the listed cases spooled to
    temporary files, so memory does not grow with the runs."""
    from ragpulse.runs import stored as run_service
    from ragpulse.runs.compare import FlippedSpool, write_comparison_json

    s = _common.settings()
    with FlippedSpool() as spool:

        async def q(store: Store) -> RunComparison:
            # a run is read through a cursor while the other is looked up: two connections (else pages)
            return await run_service.compare_runs(
                store, run_a, run_b, spool, cursor=s.store.pool_max > 1, score_drop=score_drop
            )

        cmp = _common.run_with_store(s, q)
        if cmp.warning:
            typer.secho(f"warning: {cmp.warning}", err=True, fg=typer.colors.YELLOW)
        if json_out:
            write_comparison_json(cmp, spool, sys.stdout)
            sys.stdout.flush()
        else:
            _render.print_compare(cmp, flipped=spool)
    if not cmp.comparable:
        raise typer.Exit(2)


@_app.command("trace")
def trace(
    trace_id: str = typer.Argument(
        ..., metavar="TRACE_ID", help="Trace id (hex ids are matched case-insensitively)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the trace and its judgements as JSON."),
    all_versions: bool = typer.Option(
        False, "--all-versions", help="List the claims of every stored judge version (default: the newest)."
    ),
    full: bool = typer.Option(
        False,
        "--full",
        help="Print the whole question and answer (default: the first 2,000 characters of each).",
    ),
) -> None:
    """Show one trace and every judgement made on it, with reasons.

    All judge versions are listed; the claims of the newest judgement of each judge (ranks and indices from 1).
    A long question or answer is cut to 2,000 characters ('--full': all of it; '--json' always has all of it).
    """
    from ragpulse.model import normalize_trace_id

    s = _common.settings()
    try:
        tid = normalize_trace_id(trace_id)
    except ValueError as e:
        raise _common.fail(str(e)) from e

    if json_out:  # the document of GET /api/v1/traces/{id}: one service, one shape
        from ragpulse.portal.traces import get_trace

        async def detail(store: Store) -> TraceDetail:
            return await get_trace(store, tid, prices=s.export.model_prices)

        _dump(_common.run_with_store(s, detail).model_dump(mode="json"))
        return

    async def q(store: Store) -> TraceResult | None:
        return await store.get_trace(tid)

    result = _common.run_with_store(s, q)
    if result is None:
        raise NotFoundError(f"no trace {tid[:100]!r}")
    _render.print_trace(result, all_versions=all_versions, full=full)


@_app.command("rejudge")
def rejudge(
    app: str | None = typer.Option(None, "--app", help="Only traces of this app (default: all apps)."),
    since: str = typer.Option("24h", "--since", help="Traces received since: 24h, 30m, 7d or an ISO time."),
    judges: str | None = typer.Option(
        None, "--judges", help="Comma-separated judges (default: enabled_judges)."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most this many traces."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    force: bool = typer.Option(
        False, "--force", help="Judge again traces the current judge version already judged (spends tokens)."
    ),
) -> None:
    """Re-evaluate stored traces with the current judge versions (backfill after a prompt or model change).

    A judge version that already judged a trace (a stored ok/skipped judgement of the same content) is not
    run again: nothing is spent, and the summary says so ('already judged by <version>') unless '--force'.
    Only stored judgements are counted."""
    from ragpulse.judges.selection import split_names
    from ragpulse.runs import stored as run_service
    from ragpulse.runs.stored import parse_since

    s = _common.settings()
    since_dt = parse_since(since)
    from ragpulse.export import build_exporters, shutdown_exporters

    exporters = build_exporters(s.export)

    async def main() -> RejudgeSummary:
        async with _common.open_cli_store(s) as store:
            return await run_service.rejudge(
                s,
                store,
                app=app,
                since=since_dt,
                judge_names=split_names(judges),
                limit=limit,
                exporters=exporters,
                force=force,
            )

    try:
        summary = asyncio.run(main())
    finally:
        shutdown_exporters(exporters)
    if json_out:
        _dump(summary.to_json())
    else:
        c = summary.counts
        typer.echo(
            f"rejudged {summary.traces} trace(s): stored {summary.stored}, failed {summary.failed}; "
            f"judgements pass {c.pass_} fail {c.fail} error {c.error} skipped {c.skipped} abstained {c.abstained}"
        )
        if summary.kept_good:
            typer.echo(
                f"kept {summary.kept_good} good judgement(s): their error re-judgements were not stored"
            )
        if summary.reused:
            typer.echo(
                "reused stored shadow judgements (no model call): "
                + ", ".join(
                    f"{n} {k} reused, {summary.judged.get(n, 0)} judged"
                    for n, k in sorted(summary.reused.items())
                )
            )
        for name, n in sorted(summary.already_judged.items()):
            typer.echo(
                f"{name}: {n} trace(s) already judged by {summary.judges[name]}: not judged again, nothing "
                "spent (--force judges them again)"
            )
        typer.echo("judge versions: " + ", ".join(f"{n}={v}" for n, v in summary.judges.items()))
    if summary.all_errors:
        raise _common.fail(
            f"every judgement of the {summary.traces} re-judged trace(s) is an error", _common.EXIT_RUNTIME
        )
