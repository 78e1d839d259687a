"""Calibrating a judge against human labels: read a labelled JSONL file, judge every case the way the sidecar
would, compare with the labels (:mod:`ragpulse.calibration.agreement`), and turn the result into a stored
:class:`~ragpulse.model.CalibrationProfile` (``ragpulse calibrate --save``).

File format: each line is one case with ``question``, ``contexts`` (a list of strings, or one string),
``answer`` and the 0/1 label field named by the caller (``0``/``1``, ``"0"``/``"1"`` or ``true``/``false``).
Optional reference fields go to the judge too: ``expected_answer`` (or ``ground_truth`` / ``reference_answer``)
and ``keywords``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ragpulse.calibration.agreement import CalibrationReport, calibrate
from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.jsonutil import TooDeep, strict_loads
from ragpulse.model import CalibrationProfile, Judgement, Trace

__all__ = [
    "CalibrationRun",
    "load_cases",
    "profile_of",
    "review_calibration",
    "run_calibration",
    "wilson_interval",
]

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
        ValueError: a line is not a JSON object or its label is missing / not 0/1, or the file has no case.
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
                row = strict_loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"line {line_no}: not valid JSON: {e}") from e
            except TooDeep as e:
                raise ValueError(f"line {line_no}: {e}") from e
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
    if not traces:
        raise ValueError("no cases (the file is empty or has only blank lines)")
    return traces, labels


async def _judge_all(
    settings: Settings, judge_name: str, traces: Sequence[Trace]
) -> tuple[str, list[Judgement]]:
    """Build the judge inside the running loop (one shared LLM client when a model is set), judge every
    trace with at most ``settings.judge.max_concurrency`` in flight, then close what the judge holds.

    Returns ``(judge version, judgements in input order)``."""
    from ragpulse.judges.registry import opened_judges

    async with opened_judges(settings, [judge_name]) as judges:
        judge = judges[judge_name]
        sem = asyncio.Semaphore(settings.judge.max_concurrency)

        async def one(trace: Trace) -> Judgement:
            async with sem:
                return await judge.judge(trace)

        return judge.version, list(await asyncio.gather(*(one(t) for t in traces)))


def run_calibration(
    settings: Settings,
    path: Path,
    *,
    judge_name: str,
    label: str,
    threshold: float | None = None,
    limit: int | None = None,
) -> CalibrationRun:
    """Judge every case of ``path`` with the judge ``build_judges`` makes and compare with the labels.

    Metrics: see :func:`ragpulse.calibration.agreement.calibrate`.

    Raises:
        ConfigError: the judge cannot be built (unknown name, bad options, needs a judge model).
        ValueError / OSError: see :func:`load_cases`.
    """
    from ragpulse.judges.registry import available_judges

    if judge_name not in available_judges():
        raise ConfigError(f"unknown judge {judge_name!r}; available: {', '.join(available_judges())}")
    traces, labels = load_cases(path, label, limit)
    version, judgements = asyncio.run(_judge_all(settings, judge_name, traces))
    report = calibrate(judgements, labels, threshold=threshold)
    return CalibrationRun(
        judge=judge_name, judge_version=version, dataset_sha256=_sha256(path), report=report
    )


async def _current_version(settings: Settings, judge_name: str) -> str:
    from ragpulse.judges.registry import opened_judges

    async with opened_judges(settings, [judge_name]) as judges:
        return judges[judge_name].version


def review_calibration(
    settings: Settings,
    *,
    judge_name: str,
    version: str | None = None,
    threshold: float | None = None,
) -> CalibrationRun:
    """Compare the stored judgements of ``judge_name``'s version ``version`` (default: the version the configured
    judge has now) with the reviewers' labels of the portal's review queue — nothing is judged again: the
    judgement each reviewer saw is the prediction, the human verdict (agree keeps it, disagree flips it) the
    label. Metrics as :func:`run_calibration`; ``dataset_sha256`` is ``reviews:<n labels>``.

    Raises:
        ConfigError: an unknown judge (or one that cannot be built to learn its version).
        StoreError: the store cannot be read.
    """
    from ragpulse.judges.registry import available_judges
    from ragpulse.store import open_store

    if judge_name not in available_judges():
        raise ConfigError(f"unknown judge {judge_name!r}; available: {', '.join(available_judges())}")

    async def go() -> tuple[str, list[tuple[Judgement, bool]]]:
        v = version or await _current_version(settings, judge_name)
        async with open_store(settings.store) as store:
            return v, await store.labelled_judgements(judge_name, v)

    v, pairs = asyncio.run(go())
    report = calibrate([j for j, _ in pairs], [int(label) for _, label in pairs], threshold=threshold)
    return CalibrationRun(
        judge=judge_name, judge_version=v, dataset_sha256=f"reviews:{len(pairs)}", report=report
    )


@dataclass(frozen=True)
class CalibrationRun:
    """One calibration: the judge and version that ran, the file's SHA-256 and the metrics."""

    judge: str
    judge_version: str
    dataset_sha256: str
    report: CalibrationReport


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """95 % Wilson score interval of a binomial proportion (Wilson 1927); ``None`` when ``n == 0``."""
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def profile_of(run: CalibrationRun, name: str) -> CalibrationProfile:
    """The profile ``calibrate --save NAME`` stores for ``run``: confusion counts, sensitivity (good answers
    passed) and specificity (bad answers failed) with their Wilson intervals."""
    c = run.report.confusion
    se_ci = wilson_interval(c.tp, c.tp + c.fn)
    sp_ci = wilson_interval(c.tn, c.tn + c.fp)
    return CalibrationProfile(
        name=name,
        judge=run.judge,
        judge_version=run.judge_version,
        dataset_sha256=run.dataset_sha256,
        n=c.n,
        tp=c.tp,
        fp=c.fp,
        tn=c.tn,
        fn=c.fn,
        sensitivity=c.tp / (c.tp + c.fn) if c.tp + c.fn else None,
        sensitivity_lower=se_ci[0] if se_ci else None,
        sensitivity_upper=se_ci[1] if se_ci else None,
        specificity=c.tn / (c.tn + c.fp) if c.tn + c.fp else None,
        specificity_lower=sp_ci[0] if sp_ci else None,
        specificity_upper=sp_ci[1] if sp_ci else None,
        threshold=run.report.threshold,
        backend=run.report.backend,
    )
