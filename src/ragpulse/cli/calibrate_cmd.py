"""``ragpulse calibrate``: agreement of a judge with human labels on a JSONL file.

Each line of FILE is one case: ``question``, ``contexts`` (a list of strings, or one string), ``answer`` and
the 0/1 label field named by ``--label`` (``0``/``1``, ``"0"``/``"1"`` or ``true``/``false``). Optional
reference fields are passed to the judge too: ``expected_answer`` (or ``ground_truth`` /
``reference_answer``) and ``keywords``. Lines without the label are an error (exit 2).

The judge is built the way the sidecar builds it (``ragpulse.judges.registry.build_judges``), so with no
judge model configured this calibrates the offline heuristic backend. Metrics: see
:mod:`ragpulse.judges.calibration`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from ragpulse.cli import _common
from ragpulse.cli import app as _app
from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.calibration import CalibrationReport, calibrate
from ragpulse.model import Judgement, Trace

__all__ = ["load_cases", "run_calibration"]

_EXPECTED_FIELDS = ("expected_answer", "ground_truth", "reference_answer")


def _label(value: Any, field: str, line_no: int) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise ValueError(f"line {line_no}: label {field!r} must be 0 or 1, got {value!r}")


def load_cases(path: Path, label: str, limit: int | None = None) -> tuple[list[Trace], list[int]]:
    """Read FILE into traces and labels (in file order; blank lines skipped).

    Raises:
        ValueError: a line is not a JSON object or its label is missing / not 0/1.
        OSError: the file cannot be read.
    """
    traces: list[Trace] = []
    labels: list[int] = []
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if limit is not None and len(traces) >= limit:
                break
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"line {line_no}: not valid JSON: {e}") from e
            except RecursionError as e:
                raise ValueError(f"line {line_no}: not valid JSON: nested too deeply") from e
            if not isinstance(row, dict):
                raise ValueError(f"line {line_no}: expected a JSON object")
            if label not in row or row[label] is None:
                raise ValueError(f"line {line_no}: no label field {label!r}")
            labels.append(_label(row[label], label, line_no))
            contexts = row.get("contexts") or []
            if isinstance(contexts, str):
                contexts = [contexts]
            expected = next((row[f] for f in _EXPECTED_FIELDS if isinstance(row.get(f), str)), None)
            if not isinstance(contexts, list):
                raise ValueError(f"line {line_no}: contexts must be a list of strings or a string")
            try:
                trace = Trace(
                    trace_id=str(row.get("id") or f"line-{line_no}"),
                    question=row.get("question"),
                    documents=[str(c) for c in contexts if c is not None],
                    answer=row.get("answer"),
                    expected_answer=expected,
                    keywords=row.get("keywords"),
                )
            except ValidationError as e:  # one line naming the field, not pydantic's multi-line report
                err = e.errors()[0]
                where = ".".join(str(x) for x in err["loc"])
                raise ValueError(f"line {line_no}: {where}: {err['msg']}") from e
            traces.append(trace)
    return traces, labels


async def _judge_all(settings: Settings, judge_name: str, traces: Sequence[Trace]) -> list[Judgement]:
    """Build the judge inside the running loop (one shared LLM client when a model is set), judge every
    trace with at most ``settings.judge_max_concurrency`` in flight, then close the client."""
    from ragpulse.judges.model.client import LLMClient
    from ragpulse.judges.registry import build_judges

    client = LLMClient(settings) if settings.uses_llm else None
    try:
        judge = build_judges(settings, [judge_name], client=client)[judge_name]
        sem = asyncio.Semaphore(settings.judge_max_concurrency)

        async def one(trace: Trace) -> Judgement:
            async with sem:
                return await judge.judge(trace)

        return list(await asyncio.gather(*(one(t) for t in traces)))
    finally:
        if client is not None:
            await client.aclose()


def run_calibration(
    settings: Settings,
    path: Path,
    *,
    judge_name: str,
    label: str,
    threshold: float | None = None,
    limit: int | None = None,
) -> CalibrationReport:
    """Judge every case of ``path`` with the judge ``build_judges`` makes and compare with the labels.

    Metrics: see :func:`ragpulse.judges.calibration.calibrate`.

    Raises:
        ConfigError: the judge cannot be built (unknown name, bad options, needs a judge model).
        ValueError / OSError: see :func:`load_cases`.
    """
    from ragpulse.judges.registry import available_judges

    if judge_name not in available_judges():
        raise ConfigError(f"unknown judge {judge_name!r}; available: {', '.join(available_judges())}")
    traces, labels = load_cases(path, label, limit)
    judgements = asyncio.run(_judge_all(settings, judge_name, traces))
    return calibrate(judgements, labels, threshold=threshold)


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def _print_table(report: CalibrationReport, judge: str, path: Path, label: str) -> None:
    table = Table(title=f"calibration of {judge} ({report.backend}) on {path.name} [{label}]")
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
        f"{_fmt(report.balanced_accuracy)} [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "—",
    )
    table.add_row("F1 of failing class (label 0)", _fmt(report.f1))
    table.add_row("Spearman (score vs label)", _fmt(report.spearman))
    c = report.confusion
    table.add_row("confusion tp / fp / tn / fn", f"{c.tp} / {c.fp} / {c.tn} / {c.fn}")
    Console().print(table)


@_app.command("calibrate")
def calibrate_command(
    file: Annotated[Path, typer.Argument(help="JSONL: question, contexts, answer and the 0/1 label field.")],
    judge: Annotated[str, typer.Option("--judge", help="Judge name: faithfulness, relevancy, keyword, …")],
    label: Annotated[str, typer.Option("--label", help="Name of the 0/1 human label field (1 = good).")],
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
) -> None:
    """Measure a judge's agreement with human labels (accuracy, balanced accuracy + 95% CI, F1, Spearman)."""
    settings = _common.settings()
    try:
        report = run_calibration(
            settings, file, judge_name=judge, label=label, threshold=threshold, limit=limit
        )
    except ConfigError as e:
        raise _common.fail(str(e)) from e
    except (OSError, ValueError) as e:
        raise _common.fail(f"{file}: {e}") from e
    if json_out:
        typer.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        _print_table(report, judge, file, label)
