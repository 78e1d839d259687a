"""``ragpulse runs list|show|compare``, ``ragpulse trace TRACE_ID`` and ``ragpulse rejudge``.

Exit codes: 0 done, 2 bad input/configuration, an unknown run or trace, or the store could not be opened.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import typer

from ragpulse.cli import _common, _render
from ragpulse.cli import app as _app
from ragpulse.cli.replay_cmd import open_judges, split_names
from ragpulse.config import Settings
from ragpulse.engine import Engine
from ragpulse.errors import ConfigError, StoreError
from ragpulse.model import RunRecord, TraceResult
from ragpulse.protocols import Exporter
from ragpulse.replay.compare import compare_reports
from ragpulse.replay.report import CaseResult, build_report

__all__ = ["parse_since", "rejudge_async", "report_of", "trace_json"]

runs_app = typer.Typer(help="Stored replay runs: list, show, compare.", no_args_is_help=True)
_app.add_typer(runs_app, name="runs")

_T = TypeVar("_T")
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(value: str, *, now: datetime | None = None) -> datetime:
    """``24h``/``30m``/``7d``/``90s``/``2w`` before ``now``, or an ISO-8601 time (UTC when no zone).

    Raises:
        ConfigError: neither a duration nor an ISO time.
    """
    m = _DURATION_RE.match(value)
    if m:
        return (now or datetime.now(UTC)) - timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError as e:
        raise ConfigError(f"--since {value!r}: expected a duration like 24h, 30m, 7d or an ISO time") from e
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _with_store(settings: Settings, fn: Callable[[Any], Awaitable[_T]]) -> _T:
    """Open the store, run ``fn(store)`` in a fresh event loop, close the store; exit 2 on a store error."""
    from ragpulse.store import open_store

    async def main() -> _T:
        async with open_store(settings.store) as store:
            return await fn(store)

    try:
        return asyncio.run(main())
    except StoreError as e:
        raise _common.fail(f"store: {e}") from e


async def report_of(store: Any, run: RunRecord) -> dict[str, Any]:
    """The run's stored report; for a run without one (still running, failed, or traces sent with a run id
    through Kafka/OTLP) a report computed from the run's stored results (``wall_seconds`` 0)."""
    if run.report and "cases" in run.report:
        return dict(run.report)
    results: list[TraceResult] = await store.get_run_results(run.run_id)
    cases = [
        CaseResult(
            case_id=r.trace.test_case_id or r.trace.trace_id,
            result=r,
            judges=tuple(sorted({j.judge for j in r.judgements} or set(run.judges))),
        )
        for r in results
    ]
    report = build_report(
        run_id=run.run_id, test_set=run.test_set, cases=cases, judges=list(run.judges), wall_seconds=0.0
    )
    report["status"] = run.status.value
    return report


def _dump(obj: Any) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False, default=str))


@runs_app.command("list")
def runs_list(
    limit: int = typer.Option(50, "--limit", min=1, help="Most recent runs to show."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON list."),
) -> None:
    """List stored runs, newest first."""
    s = _common.settings()

    async def q(store: Any) -> list[RunRecord]:
        runs: list[RunRecord] = await store.list_runs(limit)
        return runs

    runs = _with_store(s, q)
    if json_out:
        _dump(
            [
                {
                    **r.model_dump(mode="json", exclude={"report"}),
                    **{k: (r.report or {}).get(k) for k in ("cases_total", "pass_rate", "coverage")},
                }
                for r in runs
            ]
        )
    else:
        _render.print_runs(runs)


@runs_app.command("show")
def runs_show(
    run_id: str = typer.Argument(..., help="Run id."),
    json_out: bool = typer.Option(False, "--json", help="Print the run report as JSON."),
    all_cases: bool = typer.Option(True, "--all/--failing", help="List every case or only failing ones."),
) -> None:
    """Show a run's report with a per-case table (reasons included)."""
    s = _common.settings()

    async def q(store: Any) -> dict[str, Any] | None:
        run = await store.get_run(run_id)
        return None if run is None else await report_of(store, run)

    report = _with_store(s, q)
    if report is None:
        raise _common.fail(f"no run {run_id!r}")
    if json_out:
        _dump(report)
    else:
        _render.print_report(report, cases=all_cases)


@runs_app.command("compare")
def runs_compare(
    run_a: str = typer.Argument(..., help="Baseline run id."),
    run_b: str = typer.Argument(..., help="Candidate run id."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Averages of two runs side by side, and the cases that flipped pass → fail (and back)."""
    s = _common.settings()

    async def q(store: Any) -> tuple[dict[str, Any], dict[str, Any]] | str:
        reports = []
        for rid in (run_a, run_b):
            run = await store.get_run(rid)
            if run is None:
                return rid
            reports.append(await report_of(store, run))
        return reports[0], reports[1]

    got = _with_store(s, q)
    if isinstance(got, str):
        raise _common.fail(f"no run {got!r}")
    cmp = compare_reports(*got)
    if json_out:
        _dump(cmp)
    else:
        _render.print_compare(cmp)


def trace_json(result: TraceResult) -> dict[str, Any]:
    """The ``trace --json`` document: the trace's fields, ``outcome``, ``outcome_reason``, ``received_at`` and
    ``judgements`` (``name``, ``version``, ``backend``, ``score``, ``passed``, ``status``, ``reason``, plus
    ``model``, ``threshold``, ``latency_s``, ``prompt_tokens``, ``completion_tokens``, ``flags``)."""
    doc: dict[str, Any] = result.trace.model_dump(mode="json")
    doc["outcome"] = result.outcome.value
    doc["outcome_reason"] = result.outcome_reason
    doc["received_at"] = result.received_at.isoformat()
    doc["judgements"] = [
        {
            "name": j.judge,
            "version": j.version,
            "backend": j.backend.value,
            "score": j.score,
            "passed": j.passed,
            "status": j.status.value,
            "reason": j.reason,
            "model": j.model,
            "threshold": j.threshold,
            "latency_s": j.latency_s,
            "prompt_tokens": j.prompt_tokens,
            "completion_tokens": j.completion_tokens,
            "flags": j.flags.model_dump(mode="json"),
        }
        for j in result.judgements
    ]
    return doc


@_app.command("trace")
def trace(
    trace_id: str = typer.Argument(..., help="Trace id (hex ids are matched case-insensitively)."),
    json_out: bool = typer.Option(False, "--json", help="Print the trace and its judgements as JSON."),
) -> None:
    """Show one trace and every judgement made on it (all judge versions), with reasons."""
    from ragpulse.model import normalize_trace_id

    s = _common.settings()
    try:
        tid = normalize_trace_id(trace_id)
    except ValueError as e:
        raise _common.fail(str(e)) from e

    async def q(store: Any) -> TraceResult | None:
        result: TraceResult | None = await store.get_trace(tid)
        return result

    result = _with_store(s, q)
    if result is None:
        raise _common.fail(f"no trace {tid!r}")
    if json_out:
        _dump(trace_json(result))
    else:
        _render.print_trace(result)


async def rejudge_async(
    settings: Settings,
    *,
    app: str | None,
    since: datetime,
    judge_names: Sequence[str] | None = None,
    limit: int | None = None,
    exporters: Sequence[Exporter] = (),
) -> dict[str, Any]:
    """Re-evaluate stored traces of ``app`` received since ``since`` with the current judge versions.

    New judgements are stored next to the old ones (keyed by version); an unchanged version re-writes
    nothing new. Returns ``{"traces", "stored", "failed", "counts": {pass, fail, error, skipped},
    "judges": {name: version}}``.

    Raises:
        ConfigError: unknown judge or bad judge configuration.
        StoreError: the store could not be opened or read.
    """
    from ragpulse.store import open_store

    counts = {"pass": 0, "fail": 0, "error": 0, "skipped": 0}
    summary: dict[str, Any] = {"traces": 0, "stored": 0, "failed": 0, "counts": counts}

    async def ack(result: TraceResult, ok: bool) -> None:
        summary["stored" if ok else "failed"] += 1
        for j in result.judgements:
            counts[j.outcome] += 1

    engine_settings = settings.engine.model_copy(update={"sampling_rate": 1.0})
    async with AsyncExitStack() as stack:
        judges = await open_judges(stack, settings, judge_names)
        summary["judges"] = {n: j.version for n, j in judges.items()}
        store = await stack.enter_async_context(open_store(settings.store))
        engine = await stack.enter_async_context(
            Engine(judges, store, engine_settings, exporters, routes=settings.judge.routes)
        )
        async for t in store.traces_for_rejudge(app, since, limit):
            await engine.submit(t, ack)
            summary["traces"] += 1
        await engine.drain(None)
    return summary


@_app.command("rejudge")
def rejudge(
    app: str | None = typer.Option(None, "--app", help="Only traces of this app (default: all apps)."),
    since: str = typer.Option("24h", "--since", help="Traces received since: 24h, 30m, 7d or an ISO time."),
    judges: str | None = typer.Option(
        None, "--judges", help="Comma-separated judges (default: enabled_judges)."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most this many traces."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Re-evaluate stored traces with the current judge versions (backfill after a prompt or model change)."""
    s = _common.settings()
    try:
        since_dt = parse_since(since)
    except ConfigError as e:
        raise _common.fail(str(e)) from e
    from ragpulse.export import build_exporters, shutdown_exporters

    exporters = build_exporters(s.export, redact_text=s.store.redact_text)
    try:
        summary = asyncio.run(
            rejudge_async(
                s, app=app, since=since_dt, judge_names=split_names(judges), limit=limit, exporters=exporters
            )
        )
    except ConfigError as e:
        raise _common.fail(str(e)) from e
    except StoreError as e:
        raise _common.fail(f"store: {e}") from e
    finally:
        shutdown_exporters(exporters)
    if json_out:
        _dump(summary)
    else:
        c = summary["counts"]
        typer.echo(
            f"rejudged {summary['traces']} trace(s): stored {summary['stored']}, failed {summary['failed']}; "
            f"judgements pass {c['pass']} fail {c['fail']} error {c['error']} skipped {c['skipped']}"
        )
        typer.echo("judge versions: " + ", ".join(f"{n}={v}" for n, v in summary["judges"].items()))
