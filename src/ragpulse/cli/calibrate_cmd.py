"""``ragpulse calibrate`` and ``ragpulse calibrations``: a judge's agreement with human labels, and the stored
calibration profiles that correct pass rates for judge error.

``calibrate FILE --judge J --label L`` judges every case of a labelled JSONL file the way the sidecar would
(see :mod:`ragpulse.calibration.calibrate` for the file format) and prints accuracy, balanced accuracy with a
bootstrap interval, F1 of the failing class, Spearman and the confusion counts. ``--save NAME`` also stores
the judge version's calibration profile (sensitivity and specificity with Wilson intervals) in PostgreSQL;
``calibrations list`` shows the stored profiles. A file with no cases is an error (exit 2); with one label
class only the balanced accuracy is ``n/a`` and a warning says why.

``calibrate --judge J --from-reviews`` takes the labels reviewers gave in the portal's review queue instead of a
file: the stored judgements of J's current version (``--version`` for another) against the human verdicts, the
same metrics, nothing judged again. ``--save`` is refused there: those labels already count in the corrected
pass rates (a profile made of them would count them twice).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ragpulse.cli import _common
from ragpulse.cli import app as _app
from ragpulse.errors import ConfigError, StoreError

if TYPE_CHECKING:  # the calibration service is imported in the command: `ragpulse --help` stays light
    from ragpulse.calibration.agreement import CalibrationReport
    from ragpulse.config import Settings
    from ragpulse.model import CalibrationProfile

__all__: list[str] = []

#: Names of saved profiles follow the rule of test-set and run names.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

calibrations_app = typer.Typer(help="Stored calibration profiles of judges (from calibrate --save).")
_app.add_typer(calibrations_app, name="calibrations")


async def _save(settings: Settings, profile: CalibrationProfile) -> None:
    from ragpulse.store import open_store

    async with open_store(settings.store) as store:
        await store.save_calibration_profile(profile)


async def _list(settings: Settings, judge: str | None) -> list[CalibrationProfile]:
    from ragpulse.store import open_store

    async with open_store(settings.store) as store:
        return await store.list_calibration_profiles(judge)


def _fmt(v: float | None, none: str = "—") -> str:
    return none if v is None else f"{v:.3f}"


def _print_table(report: CalibrationReport, judge: str, source: str, label: str) -> None:
    table = Table(title=f"calibration of {judge} ({report.backend}) on {source} [{label}]")
    table.add_column("metric")
    table.add_column("value", justify="right")
    ci = report.balanced_accuracy_ci
    table.add_row("scored cases (n)", str(report.n))
    table.add_row("unscored (skipped/error)", str(report.n_unscored))
    for code, count in sorted(report.unscored_reasons.items()):
        table.add_row(f"  {code}", str(count))
    table.add_row("threshold", _fmt(report.threshold))
    table.add_row("accuracy", _fmt(report.accuracy))
    table.add_row(
        "balanced accuracy (95% CI)",
        f"{_fmt(report.balanced_accuracy)} [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "n/a",
    )
    table.add_row("F1 of failing class (label 0)", _fmt(report.f1))
    table.add_row("Spearman (score vs label)", _fmt(report.spearman))
    c = report.confusion
    table.add_row("confusion tp / fp / tn / fn", f"{c.tp} / {c.fp} / {c.tn} / {c.fn}")
    Console().print(table)


@_app.command("calibrate")
def calibrate_command(
    judge: Annotated[str, typer.Option("--judge", help="Judge name: faithfulness, relevancy, keyword, …")],
    file: Annotated[
        Path | None,
        typer.Argument(metavar="FILE", help="JSONL: question, contexts, answer and the 0/1 label field."),
    ] = None,
    label: Annotated[
        str | None, typer.Option("--label", help="Name of the 0/1 human label field (1 = good).")
    ] = None,
    from_reviews: Annotated[
        bool,
        typer.Option(
            "--from-reviews",
            help="Use the portal's review labels of the judge's stored judgements instead of a file.",
        ),
    ] = False,
    version: Annotated[
        str | None,
        typer.Option("--version", help="With --from-reviews: this judge version (default: current)."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold", min=0.0, max=1.0, help="Pass threshold to apply instead of the judge's own."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N cases.")] = None,
    save: Annotated[
        str | None,
        typer.Option(
            "--save",
            metavar="NAME",
            help="Store this judge version's calibration profile under the data set name NAME.",
        ),
    ] = None,
) -> None:
    """Measure a judge's agreement with human labels (accuracy, balanced accuracy + 95% CI, F1, Spearman)."""
    settings = _common.settings()
    if save is not None and not _NAME.match(save):
        raise _common.fail(f"--save {save!r}: a name is 1-128 letters, digits, '.', '_' or '-'")
    if from_reviews:
        if file is not None or label is not None or save is not None:
            raise _common.fail(
                "--from-reviews takes no FILE, --label or --save (review labels already count in the corrected "
                "pass rates)"
            )
        try:
            from ragpulse.calibration.calibrate import review_calibration

            run = review_calibration(settings, judge_name=judge, version=version, threshold=threshold)
        except ConfigError as e:
            raise _common.fail(str(e)) from e
        except StoreError as e:
            raise _common.fail(f"cannot read the review labels: {e}", code=3) from e
    elif file is None or label is None:
        raise _common.fail("give FILE and --label (or --from-reviews)")
    else:
        try:
            from ragpulse.calibration.calibrate import run_calibration

            run = run_calibration(
                settings, file, judge_name=judge, label=label, threshold=threshold, limit=limit
            )
        except ConfigError as e:
            raise _common.fail(str(e)) from e
        except (OSError, ValueError) as e:
            raise _common.fail(f"{file}: {e}") from e
    report = run.report
    if save is not None:
        try:
            from ragpulse.calibration.calibrate import profile_of

            asyncio.run(_save(settings, profile_of(run, save)))
        except StoreError as e:
            raise _common.fail(f"cannot store the calibration profile: {e}", code=3) from e
        typer.secho(f"saved calibration profile {save!r} for {judge} version {run.judge_version}", err=True)
    for warning in report.warnings:
        typer.secho(f"warning: {warning}", err=True, fg=typer.colors.YELLOW)
    if json_out:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        _print_table(
            report, judge, file.name if file else f"review labels of {run.judge_version}", label or "reviews"
        )


@calibrations_app.command("list")
def calibrations_list(
    judge: Annotated[str | None, typer.Option("--judge", help="Only this judge's profiles.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON lines instead of a table.")] = False,
) -> None:
    """List stored calibration profiles, newest first (the newest of a judge version is the one in use)."""
    settings = _common.settings()
    try:
        profiles = asyncio.run(_list(settings, judge))
    except StoreError as e:
        raise _common.fail(f"cannot read calibration profiles: {e}", code=3) from e
    if json_out:
        for p in profiles:
            typer.echo(p.model_dump_json())
        return
    if not profiles:
        typer.echo(
            "no calibration profiles yet: save one with ragpulse calibrate FILE --judge J --label L --save NAME"
        )
        return
    table = Table(title="calibration profiles")
    for col in ("name", "judge", "version", "n", "sensitivity [95% CI]", "specificity [95% CI]", "saved"):
        table.add_column(col)
    for p in profiles:
        table.add_row(
            p.name,
            p.judge,
            p.judge_version,
            str(p.n),
            f"{_fmt(p.sensitivity)} [{_fmt(p.sensitivity_lower)}, {_fmt(p.sensitivity_upper)}]",
            f"{_fmt(p.specificity)} [{_fmt(p.specificity_lower)}, {_fmt(p.specificity_upper)}]",
            p.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    Console().print(table)
