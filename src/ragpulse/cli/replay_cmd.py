"""``ragpulse replay TESTSET``: replay a test set through the judges and print the run report.

Exit codes: 0 done (and every ``--fail-under`` threshold met), 1 a threshold was breached, 2 bad input or
configuration, or the store could not be opened.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragpulse.cli import _common, _render
from ragpulse.cli import app as _app
from ragpulse.config import Settings
from ragpulse.errors import ConfigError, IngestError, StoreError
from ragpulse.judges.registry import opened_judges
from ragpulse.model import TestSet
from ragpulse.protocols import Exporter, Judge
from ragpulse.replay import evaluate_thresholds, load_test_set, parse_thresholds, run_replay
from ragpulse.replay.judge_defaults import default_replay_judges
from ragpulse.replay.rag_client import RagClient
from ragpulse.replay.runner import ProgressCallback
from ragpulse.store import open_store

__all__ = ["open_judges", "replay", "replay_async", "split_names"]


async def open_judges(
    stack: AsyncExitStack, settings: Settings, names: Sequence[str] | None
) -> dict[str, Judge]:
    """Build the judges (:func:`ragpulse.judges.registry.opened_judges`): ``stack`` closes what they share (the
    LLM client) and what each holds (an embeddings client) once, on exit.

    Raises:
        ConfigError: unknown judge name or bad judge configuration.
    """
    return await stack.enter_async_context(opened_judges(settings, names))


def split_names(value: str | None) -> list[str] | None:
    """``"a, b"`` → ``["a", "b"]``; ``None``/empty → ``None`` (use the configured judges)."""
    if not value:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    return names or None


@contextmanager
def progress_bar(total: int, label: str, *, enabled: bool = True) -> Iterator[ProgressCallback]:
    """A rich progress bar on stderr; yields the ``progress(done, total)`` callback (a no-op when disabled
    or stderr is not a terminal)."""
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


async def replay_async(
    settings: Settings,
    test_set: TestSet,
    *,
    judge_names: Sequence[str] | None = None,
    run_id: str | None = None,
    exporters: Sequence[Exporter] = (),
    progress: bool = True,
) -> dict[str, Any]:
    """Build the judges, open the store (embedded PostgreSQL when no URL), replay, and return the report.

    Without ``judge_names`` the judges are ``enabled_judges`` plus, when the test set can measure retrieval,
    ``context_precision``/``context_recall`` (:func:`ragpulse.replay.judge_defaults.default_replay_judges`).

    Everything asyncio-bound is created inside the running loop, so several calls (each in its own
    ``asyncio.run``) work in one process.

    Raises:
        ConfigError: unknown judge name or bad judge configuration.
        StoreError: the store could not be opened or written.
    """
    async with AsyncExitStack() as stack:
        selection = default_replay_judges(settings, test_set, judge_names)
        judges = await open_judges(stack, settings, selection.names)
        store = await stack.enter_async_context(open_store(settings.store))
        rag = None
        if settings.rag.endpoint_url:
            rag = await stack.enter_async_context(RagClient(settings))
        with progress_bar(len(test_set.cases), f"replay {test_set.name}", enabled=progress) as cb:
            report: dict[str, Any] = await run_replay(
                test_set,
                judges=judges,
                store=store,
                settings=settings,
                run_id=run_id,
                exporters=exporters,
                rag_client=rag,
                progress=cb,
                judges_added=selection.added,
            )
        return report


@_app.command("replay")
def replay(
    testset: Annotated[
        Path, typer.Argument(help="Test set file: .jsonl (one case per line), .json or .csv.")
    ],
    judges: str | None = typer.Option(
        None,
        "--judges",
        help="Comma-separated judges, e.g. relevancy,faithfulness,keyword (default: enabled_judges, plus "
        "context_precision,context_recall when the test set has chunk labels, reference contexts, or "
        "expected answers on cases without answers).",
    ),
    run_id: str | None = typer.Option(
        None, "--run-id", help="Run id; re-using one re-judges the same traces idempotently."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
    fail_under: list[str] = typer.Option(  # noqa: B008
        [],
        "--fail-under",
        help="Threshold METRIC=MIN (pass_rate, coverage, JUDGE, JUDGE.pass_rate); repeatable. "
        "Adds coverage>=coverage_threshold unless given.",
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
) -> None:
    """Replay a test set as synthetic traces through the judges and print the run report."""
    s = _common.settings()
    try:
        thresholds = parse_thresholds(fail_under)
        ts = load_test_set(testset, name, encoding=encoding, csv_delimiter=csv_delimiter)
    except ConfigError as e:
        raise _common.fail(str(e)) from e
    from ragpulse.export import build_exporters, push_to_gateway, shutdown_exporters

    exporters = build_exporters(s.export, redact_text=s.store.redact_text)
    try:
        if via:
            from ragpulse.cli.replay_via import Via, replay_via_async

            if via not in {v.value for v in Via}:
                raise ConfigError(f"--via must be kafka or otlp, not {via!r}")
            report = asyncio.run(
                replay_via_async(s, ts, Via(via), judge_names=split_names(judges), run_id=run_id, wait_s=wait)
            )
        else:
            report = asyncio.run(
                replay_async(s, ts, judge_names=split_names(judges), run_id=run_id, exporters=exporters)
            )
    except IngestError as e:
        raise _common.fail(f"ingest: {e}") from e
    except ConfigError as e:
        raise _common.fail(str(e)) from e
    except StoreError as e:
        raise _common.fail(f"store: {e}") from e
    finally:
        shutdown_exporters(exporters)
    if s.export.pushgateway_url:
        push_to_gateway(s.export, report["run_id"])
    if json_out:
        typer.echo(json.dumps(report, ensure_ascii=False))
    else:
        _render.print_report(report, cases=cases)
    breaches = evaluate_thresholds(report, thresholds, default_coverage=s.replay.coverage_threshold)
    if breaches:
        for b in breaches:
            typer.secho(f"threshold breached: {b.message}", err=True, fg=typer.colors.RED)
        raise typer.Exit(1)
