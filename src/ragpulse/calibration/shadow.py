"""``ragpulse judges compare NAME``: agreement between a judge's current (main) version and its shadow version.

Input: the pairs :meth:`ragpulse.store.postgres.PostgresStore.shadow_pairs` returns — every shadow judgement of
the judge at the configured shadow version (made since ``since``) with the trace's judgement at the configured
main version (:func:`ragpulse.calibration.promotion.judge_versions`; a judge without a shadow configuration, or
whose main and shadow versions are equal, is a usage error). Only pairs where both are ``ok`` are compared
(``pairs`` counts all, ``scored`` the compared ones). Positive class: ``passed``.

- **Cohen's κ** of the two verdicts over the scored pairs: (p_o − p_e) / (1 − p_e); ``None`` when p_e = 1
  and the verdicts are not all equal, 1 when they are.
- **confusion**: ``both_pass``, ``main_only`` (main passed, shadow failed), ``shadow_only``, ``both_fail``.
- **pass-rate difference** shadow − main = (shadow_only − main_only) / n, with a 95 % Wald interval for paired
  proportions: SE = √((main_only + shadow_only) − (shadow_only − main_only)² / n) / n, ±1.96 SE (the pairs
  are the same traces, so the unpaired interval would be too wide).
- **tokens and latency**: mean prompt + completion tokens and mean latency (s) per judgement of each version
  over all pairs, and the difference shadow − main.
- **labels** (optional, ``{trace_id: label}``, 1 = passes): per version, n, accuracy and κ against the labels
  over the scored pairs that have a label.

Gates: ``--min metric=value`` on ``kappa``, ``agreement``, ``main_label_accuracy``, ``shadow_label_accuracy``,
``main_label_kappa``, ``shadow_label_kappa``; a metric without a value breaches.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from ragpulse.calibration.promotion import judge_versions
from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.jsonutil import strict_loads

__all__ = [
    "GATE_METRICS",
    "Comparison",
    "GateOutcome",
    "compare_pairs",
    "compare_shadow",
    "gate",
    "load_labels",
    "parse_minimums",
    "write_junit",
]

GATE_METRICS = (
    "kappa",
    "agreement",
    "main_label_accuracy",
    "shadow_label_accuracy",
    "main_label_kappa",
    "shadow_label_kappa",
)


class _PairSource(Protocol):
    async def shadow_pairs(
        self, judge: str, main_version: str, shadow_version: str, since: datetime | None = None
    ) -> list[tuple[str, dict[str, Any], dict[str, Any]]]: ...


class Comparison(BaseModel):
    """The comparison of one judge's main and shadow versions (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    judge: str
    main_versions: list[str]
    shadow_versions: list[str]
    pairs: int
    scored: int
    kappa: float | None
    agreement: float | None
    confusion: dict[str, int]
    main_pass_rate: float | None
    shadow_pass_rate: float | None
    pass_rate_difference: float | None
    pass_rate_difference_lower: float | None
    pass_rate_difference_upper: float | None
    main_tokens: float | None
    shadow_tokens: float | None
    tokens_difference: float | None
    main_latency_s: float | None
    shadow_latency_s: float | None
    latency_difference_s: float | None
    labelled: int = 0
    main_label_accuracy: float | None = None
    shadow_label_accuracy: float | None = None
    main_label_kappa: float | None = None
    shadow_label_kappa: float | None = None


def _kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    n = len(pairs)
    if n == 0:
        return None
    po = sum(a == b for a, b in pairs) / n
    pa = sum(a for a, _ in pairs) / n
    pb = sum(b for _, b in pairs) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    if pe >= 1.0:
        return 1.0 if po == 1.0 else None
    return (po - pe) / (1 - pe)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def compare_pairs(
    judge: str,
    pairs: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
    labels: Mapping[str, bool] | None = None,
) -> Comparison:
    """Compare ``(trace_id, main, shadow)`` pairs (see the module docstring)."""
    scored = [
        (tid, bool(m["passed"]), bool(s["passed"]))
        for tid, m, s in pairs
        if m["status"] == s["status"] == "ok"
    ]
    verdicts = [(m, s) for _, m, s in scored]
    n = len(verdicts)
    both_pass = sum(m and s for m, s in verdicts)
    main_only = sum(m and not s for m, s in verdicts)
    shadow_only = sum(s and not m for m, s in verdicts)
    both_fail = n - both_pass - main_only - shadow_only
    diff = lower = upper = None
    if n:
        diff = (shadow_only - main_only) / n
        se = math.sqrt(max(0.0, (main_only + shadow_only) - (shadow_only - main_only) ** 2 / n)) / n
        lower, upper = max(-1.0, diff - 1.96 * se), min(1.0, diff + 1.96 * se)

    def tokens(side: Mapping[str, Any]) -> float:
        return float(side["prompt_tokens"] + side["completion_tokens"])

    main_tokens = _mean([tokens(m) for _, m, _ in pairs])
    shadow_tokens = _mean([tokens(s) for _, _, s in pairs])
    main_latency = _mean([float(m["latency_s"]) for _, m, _ in pairs])
    shadow_latency = _mean([float(s["latency_s"]) for _, _, s in pairs])
    out: dict[str, Any] = {}
    if labels is not None:
        lab = [(labels[tid], m, s) for tid, m, s in scored if tid in labels]
        out["labelled"] = len(lab)
        if lab:
            out["main_label_accuracy"] = sum(t == m for t, m, _ in lab) / len(lab)
            out["shadow_label_accuracy"] = sum(t == s for t, _, s in lab) / len(lab)
            out["main_label_kappa"] = _kappa([(t, m) for t, m, _ in lab])
            out["shadow_label_kappa"] = _kappa([(t, s) for t, _, s in lab])
    return Comparison(
        judge=judge,
        main_versions=sorted({str(m["version"]) for _, m, _ in pairs}),
        shadow_versions=sorted({str(s["version"]) for _, _, s in pairs}),
        pairs=len(pairs),
        scored=n,
        kappa=_kappa(verdicts),
        agreement=(both_pass + both_fail) / n if n else None,
        confusion={
            "both_pass": both_pass,
            "main_only": main_only,
            "shadow_only": shadow_only,
            "both_fail": both_fail,
        },
        main_pass_rate=(both_pass + main_only) / n if n else None,
        shadow_pass_rate=(both_pass + shadow_only) / n if n else None,
        pass_rate_difference=diff,
        pass_rate_difference_lower=lower,
        pass_rate_difference_upper=upper,
        main_tokens=main_tokens,
        shadow_tokens=shadow_tokens,
        tokens_difference=_diff(main_tokens, shadow_tokens),
        main_latency_s=main_latency,
        shadow_latency_s=shadow_latency,
        latency_difference_s=_diff(main_latency, shadow_latency),
        **out,
    )


async def compare_shadow(
    settings: Settings,
    store: _PairSource,
    judge: str,
    since: datetime | None = None,
    labels: Mapping[str, bool] | None = None,
) -> Comparison:
    """Compare the configured main and shadow versions of ``judge`` on the pairs stored since ``since``.

    Raises:
        ConfigError: unknown judge, no shadow configuration, or main version == shadow version.
    """
    main_version, shadow_version = await judge_versions(settings, judge)
    pairs = await store.shadow_pairs(judge, main_version, shadow_version, since)
    return compare_pairs(judge, pairs, labels).model_copy(
        update={"main_versions": [main_version], "shadow_versions": [shadow_version]}
    )


def load_labels(path: Path) -> dict[str, bool]:
    """Human labels from a JSONL file: one ``{"trace_id": "…", "label": 0|1}`` per line (1 = passes).

    Raises:
        ConfigError: the file cannot be read, or a line is not such an object (``FILE:LINE: problem``).
    """
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read labels {path}: {e}") from e
    out: dict[str, bool] = {}
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = strict_loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{no}: not JSON ({e.msg})") from None
        except ValueError as e:  # TooDeep ("too_deep: …"), NaN / Infinity
            raise ConfigError(f"{path}:{no}: {e}") from None
        tid, label = (row.get("trace_id"), row.get("label")) if isinstance(row, dict) else (None, None)
        if not isinstance(tid, str) or label not in (0, 1, True, False):
            raise ConfigError(f'{path}:{no}: expected {{"trace_id": "…", "label": 0 or 1}}')
        out[tid] = bool(label)
    return out


def parse_minimums(items: Sequence[str]) -> dict[str, float]:
    """``["kappa=0.7", …]`` → ``{"kappa": 0.7}``.

    Raises:
        ConfigError: not ``metric=number``, or a metric not in :data:`GATE_METRICS`.
    """
    out: dict[str, float] = {}
    for item in items:
        metric, sep, value = item.partition("=")
        metric = metric.strip()
        if not sep or metric not in GATE_METRICS:
            raise ConfigError(
                f"--min {item!r}: expected METRIC=VALUE with METRIC one of {', '.join(GATE_METRICS)}"
            )
        try:
            out[metric] = float(value)
        except ValueError:
            raise ConfigError(f"--min {item!r}: {value!r} is not a number") from None
    return out


class GateOutcome(BaseModel):
    """One ``--min``: ``actual >= minimum`` (``actual`` ``None``: no value, breached)."""

    model_config = ConfigDict(frozen=True)

    metric: str
    minimum: float
    actual: float | None
    met: bool


def gate(comparison: Comparison, minimums: Mapping[str, float]) -> list[GateOutcome]:
    """Check each minimum against the comparison."""
    out = []
    for metric, minimum in minimums.items():
        actual = getattr(comparison, metric)
        out.append(
            GateOutcome(
                metric=metric, minimum=minimum, actual=actual, met=actual is not None and actual >= minimum
            )
        )
    return out


def write_junit(path: str | Path, comparison: Comparison, outcomes: Sequence[GateOutcome]) -> None:
    """JUnit XML: one test case per ``--min`` (a failure when breached), suite ``ragpulse.judges.compare``."""
    suite = ET.Element(
        "testsuite",
        name=f"ragpulse.judges.compare.{comparison.judge}",
        tests=str(len(outcomes)),
        failures=str(sum(not o.met for o in outcomes)),
    )
    for o in outcomes:
        case = ET.SubElement(suite, "testcase", classname=f"judges.compare.{comparison.judge}", name=o.metric)
        if not o.met:
            actual = "no value" if o.actual is None else f"{o.actual:.4f}"
            ET.SubElement(case, "failure", message=f"{o.metric} {actual} < {o.minimum}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
