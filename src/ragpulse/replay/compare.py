"""Compare two run reports: summary metrics and per-judge averages side by side, and flipped cases.

Cases are matched by case id. A case flips ``pass → fail`` when it passed in run A and did not pass in run B
(an unscored case is not a pass), and ``fail → pass`` the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["compare_reports"]


def _delta(a: Any, b: Any) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return round(float(b) - float(a), 6)
    return None


def compare_reports(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``{"run_a", "run_b", "metrics": {name: {"a", "b", "delta"}}, "pass_to_fail": [...],
    "fail_to_pass": [...]}``.

    ``metrics`` holds ``pass_rate``, ``coverage`` and one entry per judge mean (the judge's name), over the
    union of both runs' judges; ``delta`` is ``b - a`` (``None`` when either side has no value). Flipped cases
    are ``{"case_id", "reason_a", "reason_b"}`` in run B's case order.
    """
    metrics: dict[str, dict[str, Any]] = {}
    for key in ("pass_rate", "coverage"):
        metrics[key] = {"a": a.get(key), "b": b.get(key), "delta": _delta(a.get(key), b.get(key))}
    av_a: Mapping[str, Any] = a.get("averages") or {}
    av_b: Mapping[str, Any] = b.get("averages") or {}
    for name in dict.fromkeys([*av_a, *av_b]):
        metrics[name] = {
            "a": av_a.get(name),
            "b": av_b.get(name),
            "delta": _delta(av_a.get(name), av_b.get(name)),
        }
    cases_a = {c["case_id"]: c for c in a.get("cases") or []}
    p2f: list[dict[str, Any]] = []
    f2p: list[dict[str, Any]] = []
    for cb in b.get("cases") or []:
        ca = cases_a.get(cb["case_id"])
        if ca is None:
            continue
        row = {"case_id": cb["case_id"], "reason_a": ca.get("reason"), "reason_b": cb.get("reason")}
        if ca.get("passed") and not cb.get("passed"):
            p2f.append(row)
        elif not ca.get("passed") and cb.get("passed"):
            f2p.append(row)
    return {
        "run_a": a.get("run_id"),
        "run_b": b.get("run_id"),
        "metrics": metrics,
        "pass_to_fail": p2f,
        "fail_to_pass": f2p,
    }
