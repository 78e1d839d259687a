"""``ragpulse judges compare NAME``: a judge's main version against its shadow version
(:mod:`ragpulse.calibration.shadow`). Exit 1 when a ``--min`` is breached, 2 for bad options or a bad
labels file, 3 when the store cannot be read. ``ragpulse judges promote NAME``: the configuration change that
promotes the shadow and what re-judging with it will reuse (:mod:`ragpulse.calibration.promotion`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ragpulse.cli import _common
from ragpulse.cli import app as _app
from ragpulse.cli._render import fmt
from ragpulse.query import before, parse_span

if TYPE_CHECKING:  # the calibration services are imported in the commands: `ragpulse --help` stays light
    from ragpulse.calibration.promotion import Promotion
    from ragpulse.calibration.shadow import Comparison

__all__: list[str] = []

judges_app = typer.Typer(help="Judges: compare a judge's main and shadow versions, promote the shadow.")
_app.add_typer(judges_app, name="judges")


def _print(c: Comparison) -> None:
    console = Console()
    t = Table(
        title=f"{c.judge}: main {', '.join(c.main_versions) or '-'} vs shadow {', '.join(c.shadow_versions) or '-'}"
    )
    t.add_column("metric")
    t.add_column("value")
    diff = fmt(c.pass_rate_difference)
    interval = f"[{fmt(c.pass_rate_difference_lower)}, {fmt(c.pass_rate_difference_upper)}]"
    rows = [
        ("pairs (scored)", f"{c.pairs} ({c.scored})"),
        ("Cohen's kappa", fmt(c.kappa)),
        ("agreement", fmt(c.agreement)),
        ("confusion main/shadow", ", ".join(f"{k} {v}" for k, v in c.confusion.items())),
        ("pass rate main / shadow", f"{fmt(c.main_pass_rate)} / {fmt(c.shadow_pass_rate)}"),
        ("pass rate shadow - main [95% CI]", f"{diff} {interval}"),
        ("tokens per judgement main / shadow", f"{fmt(c.main_tokens, 1)} / {fmt(c.shadow_tokens, 1)}"),
        ("latency s main / shadow", f"{fmt(c.main_latency_s)} / {fmt(c.shadow_latency_s)}"),
    ]
    if c.labelled:
        rows += [
            ("labelled pairs", str(c.labelled)),
            (
                "accuracy vs labels main / shadow",
                f"{fmt(c.main_label_accuracy)} / {fmt(c.shadow_label_accuracy)}",
            ),
            ("kappa vs labels main / shadow", f"{fmt(c.main_label_kappa)} / {fmt(c.shadow_label_kappa)}"),
        ]
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)


@judges_app.command("compare")
def compare(
    name: Annotated[str, typer.Argument(metavar="JUDGE", help="The judge name.")],
    since: Annotated[
        str, typer.Option("--since", help="Shadow judgements of the last SPAN (e.g. 24h, 7d).")
    ] = "24h",
    labels: Annotated[
        Path | None, typer.Option("--labels", help='JSONL of {"trace_id": …, "label": 0|1} human labels.')
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    minimum: Annotated[
        list[str] | None, typer.Option("--min", help="Gate: METRIC=VALUE (e.g. kappa=0.7); repeatable.")
    ] = None,
    junit: Annotated[str | None, typer.Option("--junit", help="Write JUnit XML of the --min gates.")] = None,
) -> None:
    """Agreement between a judge's main and shadow versions (kappa, confusion, pass-rate difference)."""
    from ragpulse.calibration.shadow import compare_shadow, gate, load_labels, parse_minimums, write_junit

    minimums = parse_minimums(minimum or [])
    start = before(datetime.now(UTC), parse_span(since), since)
    truth = load_labels(labels) if labels is not None else None
    settings = _common.settings()

    async def _compare(store: Any) -> Comparison:  # the PostgreSQL store (shadow_pairs)
        return await compare_shadow(settings, store, name, start, truth)

    comparison = _common.run_with_store(settings, _compare)
    outcomes = gate(comparison, minimums)
    if json_out:
        typer.echo(json.dumps({**comparison.model_dump(), "gates": [o.model_dump() for o in outcomes]}))
    else:
        _print(comparison)
        for o in outcomes:
            typer.echo(f"{'ok' if o.met else 'BREACHED'}: {o.metric} {fmt(o.actual)} >= {o.minimum}")
    if junit:
        try:
            write_junit(junit, comparison, outcomes)
        except OSError as e:
            raise _common.fail(f"cannot write {junit}: {e}") from e
    if any(not o.met for o in outcomes):
        raise typer.Exit(_common.EXIT_BREACHED)


@judges_app.command("promote")
def promote(
    name: Annotated[str, typer.Argument(metavar="JUDGE", help="The judge name.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Print the config change that makes a judge's shadow its main configuration, and how many stored shadow
    judgements re-judging with it reuses without a model call. Changes nothing."""
    from ragpulse.calibration.promotion import plan_promotion

    settings = _common.settings()

    async def _plan(store: Any) -> Promotion:  # the PostgreSQL store (shadow_counts)
        return await plan_promotion(settings, store, name)

    plan = _common.run_with_store(settings, _plan)
    if json_out:
        typer.echo(json.dumps(plan.model_dump(mode="json")))
        return
    typer.echo(
        f"judge {plan.judge}: main version {plan.main_version} -> shadow version {plan.shadow_version} "
        f"(shadow share {plan.share:g})"
    )
    typer.echo(f"\n1. In the config file, replace judge.options.{plan.judge} with (the shadow block goes):\n")
    typer.echo(plan.config_yaml.rstrip())
    typer.echo(
        f"\n2. Restart ragpulse, then re-judge the history with the promoted version (old rows are kept):\n"
        f"\n   {plan.rejudge_command}\n"
    )
    typer.echo(
        f"Up to {plan.reusable} stored shadow judgement(s) of version {plan.shadow_version} are reused without "
        f"a model call (those whose trace content has not changed since); {plan.not_reusable} other shadow "
        "judgement(s) (errors, skips) are judged again, like every trace without one."
    )
