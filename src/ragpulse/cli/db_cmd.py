"""``ragpulse db info`` and ``ragpulse db prune``: look at and trim the result store.

Both open the configured store (``RAGPULSE_STORE_DATABASE_URL`` or the embedded PostgreSQL), which applies pending
migrations first.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import typer

from ragpulse.cli import _common
from ragpulse.cli import app as _app
from ragpulse.protocols import Store

__all__ = ["db_app"]

db_app = typer.Typer(help="Inspect and prune the result store (PostgreSQL).", no_args_is_help=True)
_app.add_typer(db_app, name="db")


@db_app.command("info")
def info(
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    exact: bool = typer.Option(
        False,
        "--exact",
        help="Count every table exactly (slow on large tables; default: estimate over 1 M rows).",
    ),
) -> None:
    """Server version, schema version, database size and row counts (tables over 1 M rows: the planner's
    estimate, marked ~, unless --exact)."""
    settings = _common.settings()

    async def main(store: Store) -> dict[str, Any]:
        facts = await (store.info(exact_below=None) if exact else store.info())
        facts["embedded"] = not settings.store.database_url
        return facts

    facts = _common.run_with_store(settings, main)
    if json_out:
        typer.echo(json.dumps(facts, default=str))
        return
    estimated = set(facts.get("estimated", ()))
    for key, value in facts.items():
        if key == "estimated":
            continue
        typer.echo(f"{key:>15}: {'~' if key in estimated else ''}{value}")


@db_app.command("prune")
def prune(
    older_than_days: float | None = typer.Option(
        None, "--older-than-days", min=0.0, help="Age in days (default: the retention_days setting)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Delete traces (with their judgements) and dead letters older than the given age."""
    settings = _common.settings()
    days = older_than_days if older_than_days is not None else settings.store.retention_days
    if days is None:
        raise _common.fail("give --older-than-days or set retention_days")
    try:
        age = timedelta(days=days)
        _ = datetime.now(UTC) - age  # the cutoff must be a date (PostgreSQL's BC dates are not)
    except (OverflowError, ValueError):
        raise _common.fail(f"--older-than-days {days:g}: too large (reaches before year 1)") from None

    async def main(store: Store) -> int:
        return await store.prune(age)

    deleted = _common.run_with_store(settings, main)
    if json_out:
        typer.echo(json.dumps({"traces_deleted": deleted, "older_than_days": days}))
    else:
        typer.echo(f"deleted {deleted} traces older than {days:g} days")
