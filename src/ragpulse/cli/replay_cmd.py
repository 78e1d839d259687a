"""``ragpulse replay TESTSET`` / ``ragpulse replay --test-set NAME``: replay a test set through the judges and
print the run report (:mod:`ragpulse.runs.replay`).

Exit codes: 0 done (and every ``--fail-under`` threshold met), 1 a threshold was breached, 2 bad input or
configuration (bad file, unknown test set, bad or unknown threshold metric), 3 the store or a source failed or
every judgement of the run is an error.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragpulse.cli import _common, _render
from ragpulse.cli import app as _app
from ragpulse.errors import ConfigError

if TYPE_CHECKING:  # imported in the command itself: `ragpulse replay --help` loads no service module
    from ragpulse.config import Settings
    from ragpulse.protocols import CaseSource, Exporter, Store
    from ragpulse.runs.replay import Via
    from ragpulse.runs.report_model import RunReport
    from ragpulse.runs.runner import ProgressCallback

__all__ = ["replay"]


@contextmanager
def progress_bar(total: int, label: str, *, enabled: bool = True) -> Iterator[ProgressCallback]:
    """A rich progress bar on stderr; yields the ``progress(done, total)`` callback (a no-op when disabled
    or stderr is not a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda done, total: None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done, _total: bar.update(task, completed=done)


async def _replay(
    s: Settings,
    *,
    ts: CaseSource | None,
    stored: str | None,
    judge_names: list[str] | None,
    run_id: str | None,
    via: Via | None,
    wait_s: float,
    exporters: list[Exporter],
    serve_url: str | None,
    replace_run: bool,
    replace_test_set: bool,
    json_out: bool,
    cases: bool,
) -> tuple[RunReport, str]:
    """Replay, print the report (its case rows read from the store), and return it with its first error
    judgement (``-`` when none)."""
    async with _common.open_cli_store(s) as store:
        report = await _run(
            s,
            store,
            ts=ts,
            stored=stored,
            judge_names=judge_names,
            run_id=run_id,
            via=via,
            wait_s=wait_s,
            exporters=exporters,
            serve_url=serve_url,
            replace_run=replace_run,
            replace_test_set=replace_test_set,
        )
        await _render.emit_report(store, report, json_out=json_out, cases=cases)
        return report, (await _first_error(store, report) if report.all_errors else "-")


async def _run(
    s: Settings,
    store: Store,
    *,
    ts: CaseSource | None,
    stored: str | None,
    judge_names: list[str] | None,
    run_id: str | None,
    via: Via | None,
    wait_s: float,
    exporters: list[Exporter],
    serve_url: str | None,
    replace_run: bool,
    replace_test_set: bool,
) -> RunReport:
    from ragpulse.runs.replay import replay_test_set, replay_via, stored_test_set

    if ts is None:
        assert stored is not None
        spooled = await stored_test_set(store, stored)
        try:
            return await _run(
                s,
                store,
                ts=spooled,
                stored=None,
                judge_names=judge_names,
                run_id=run_id,
                via=via,
                wait_s=wait_s,
                exporters=exporters,
                serve_url=serve_url,
                replace_run=replace_run,
                replace_test_set=replace_test_set,
            )
        finally:
            spooled.close()
    if via is not None:
        return await replay_via(
            s,
            store,
            ts,
            via,
            judge_names=judge_names,
            run_id=run_id,
            wait_s=wait_s,
            serve_url=serve_url,
            replace_run=replace_run,
            replace_test_set=replace_test_set,
        )
    with progress_bar(ts.case_count, f"replay {ts.name}") as cb:
        return await replay_test_set(
            s,
            store,
            ts,
            judge_names=judge_names,
            run_id=run_id,
            exporters=exporters,
            progress=cb,
            replace_run=replace_run,
            replace_test_set=replace_test_set,
        )


def _warm_up(s: Settings) -> None:
    """Get the process ready for a long batch: import the judge model's HTTP client (``openai``, ~0.4 s of CPU)
    in a thread while the store is opened and the run created (mostly waits on PostgreSQL), instead of at the
    first model call; and, when the process is the command's own (the console script, not a test runner),
    move everything imported so far out of the garbage collector's way (:func:`gc.freeze`: the collections
    during the replay no longer walk the modules' objects), as again at exit (the interpreter's last collection
    skips what the report left)."""
    if s.judge.uses_llm:
        threading.Thread(
            target=importlib.import_module, args=("openai",), name="ragpulse-import-openai"
        ).start()
    if _common.STATE.whole_process:
        gc.freeze()
        atexit.register(gc.freeze)


async def _first_error(store: Store, report: RunReport) -> str:
    """``judge: reason`` of the first error judgement among the first cases not judged (then failing), ``-``
    when none."""
    from ragpulse.model import JudgementStatus
    from ragpulse.runs.reports import case_rows_page

    rows, _ = await case_rows_page(store, report, limit=50, not_judged=True)
    more, _ = await case_rows_page(store, report, limit=50, failing=True)
    for case in [*rows, *more]:
        for name, j in case.judgements.items():
            if j.status is JudgementStatus.ERROR:
                return f"{name}: {j.reason or 'error'}"
    return "-"


@_app.command("replay")
def replay(
    testset: Annotated[
        Path | None,
        typer.Argument(
            metavar="FILE",
            help="Test set file: .jsonl (one case per line), .json or .csv (or use --test-set).",
        ),
    ] = None,
    test_set: str | None = typer.Option(
        None,
        "--test-set",
        help="A test set stored under this name (by an earlier replay or the portal); a file path also works.",
    ),
    judges: str | None = typer.Option(
        None,
        "--judges",
        help="Comma-separated judges, e.g. relevancy,faithfulness,keyword (default: enabled_judges, plus "
        "context_precision,context_recall when the test set has chunk labels, reference contexts, or "
        "expected answers on cases without answers).",
    ),
    run_id: str | None = typer.Option(
        None,
        "--run-id",
        help="Run id; re-using one with the same cases re-judges the same traces idempotently (with other "
        "cases it is an error unless --replace-run).",
    ),
    replace_run: bool = typer.Option(
        False,
        "--replace-run",
        help="Re-use --run-id even though that run replayed other cases (replaces it).",
    ),
    replace_test_set: bool = typer.Option(
        False,
        "--replace-test-set",
        help="Replace the stored test set of the same name even though its cases differ from this file's.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
    fail_under: list[str] = typer.Option(  # noqa: B008 (typer's documented list-option default)
        [],
        "--fail-under",
        help="Threshold METRIC=MIN (pass_rate, coverage, JUDGE, JUDGE.pass_rate, JUDGE.coverage); "
        "repeatable. Adds coverage>=coverage_threshold unless given.",
    ),
    name: str | None = typer.Option(None, "--name", help="Test set name (default: the file name)."),
    encoding: str | None = typer.Option(
        None,
        "--encoding",
        help="Text encoding of the file, e.g. gbk (default: UTF-8, or its byte-order mark).",
    ),
    csv_delimiter: str | None = typer.Option(
        None,
        "--csv-delimiter",
        help="CSV delimiter, e.g. ';' (default: detected from the header row among , ; tab |).",
    ),
    cases: bool = typer.Option(False, "--cases", help="List every case, not only the failing ones."),
    via: str | None = typer.Option(
        None,
        "--via",
        help="Send the synthetic traces through a running `ragpulse serve`: kafka (events) or otlp (spans), "
        "and wait for their judgements in the store.",
    ),
    wait: float = typer.Option(300.0, "--wait", help="With --via: seconds to wait for the judgements."),
    serve_url: str | None = typer.Option(
        None,
        "--serve-url",
        help="With --via: base URL of serve's health port, whose /readyz says which database serve writes to "
        "(default: http://<http_address>).",
    ),
) -> None:
    """Replay a test set as synthetic traces through the judges and print the run report."""
    from ragpulse.judges.selection import known_judge_names, split_names
    from ragpulse.runs import open_test_set
    from ragpulse.runs.gate import evaluate_thresholds, parse_thresholds
    from ragpulse.runs.replay import Via
    from ragpulse.runs.testsets import check_name

    s = _common.settings()
    if test_set is not None and Path(test_set).is_file():
        testset, test_set = (Path(test_set) if testset is None else testset), None
    if (testset is None) == (test_set is None):
        raise ConfigError(
            "give a test set file (TESTSET) or a stored test set name (--test-set NAME), not both"
        )
    if run_id is not None:
        check_name(run_id, "run id")  # the API's rule (exit 2)
    if via is not None and via not in {v.value for v in Via}:
        raise ConfigError(f"--via must be kafka or otlp, not {via!r}")
    thresholds = parse_thresholds(fail_under, judges=known_judge_names(s))
    ts = open_test_set(testset, name, encoding=encoding, csv_delimiter=csv_delimiter) if testset else None
    from ragpulse.export import build_exporters, push_to_gateway, shutdown_exporters

    exporters = build_exporters(s.export)
    _warm_up(s)
    try:
        report, first_error = asyncio.run(
            _replay(
                s,
                ts=ts,
                stored=test_set,
                judge_names=split_names(judges),
                run_id=run_id,
                via=Via(via) if via else None,
                wait_s=wait,
                exporters=exporters,
                serve_url=serve_url,
                replace_run=replace_run,
                replace_test_set=replace_test_set,
                json_out=json_out,
                cases=cases,
            )
        )
    finally:
        shutdown_exporters(exporters)
    if s.export.pushgateway_url:
        push_to_gateway(s.export, report.run_id)
    if report.all_errors:
        raise _common.fail(
            f"every judgement of run {report.run_id} is an error (first: {first_error})",
            _common.EXIT_RUNTIME,
        )
    breaches = evaluate_thresholds(report, thresholds, default_coverage=s.replay.coverage_threshold)
    if breaches:
        for b in breaches:
            typer.secho(f"threshold breached: {b.message}", err=True, fg=typer.colors.RED)
        raise typer.Exit(_common.EXIT_BREACHED)
