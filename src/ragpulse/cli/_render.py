"""Human-readable output of run reports, runs and traces (rich tables on stdout)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from ragpulse.model import RunRecord, TraceResult

__all__ = ["fmt", "print_compare", "print_report", "print_runs", "print_trace", "stdout"]


def stdout() -> Console:
    """A console on stdout; 200 columns wide when stdout is not a terminal (pipes, CI logs), so tables do
    not wrap at 80."""
    c = Console(highlight=False)
    return c if c.is_terminal else Console(highlight=False, width=200)


def fmt(x: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals, ``-`` for ``None``."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _cut(text: str | None, n: int = 90) -> str:
    t = (text or "").replace("\n", " ")
    return t if len(t) <= n else t[: n - 1] + "…"


def print_report(report: Mapping[str, Any], *, cases: bool = False, console: Console | None = None) -> None:
    """Summary, per-judge table and failing cases of a run report (all cases when ``cases``)."""
    c = console or stdout()
    counts = report.get("counts", {})
    tokens = report.get("tokens", {})
    c.print(
        f"run {report.get('run_id')}  test set {report.get('test_set')}  status {report.get('status', '-')}"
    )
    c.print(
        f"cases {report.get('cases_total', 0)}  pass rate {fmt(report.get('pass_rate'))}  "
        f"coverage {fmt(report.get('coverage'))}  wall {fmt(report.get('wall_seconds'), 2)} s  "
        f"tokens {tokens.get('prompt', 0)} prompt / {tokens.get('completion', 0)} completion"
    )
    names = list(report.get("judges") or {})
    if names:
        added = list(report.get("judges_added") or [])
        note = f"  (added for this test set: {', '.join(added)})" if added else ""
        c.print(f"judges: {', '.join(names)}{note}")
    c.print(
        f"judgements: pass {counts.get('pass', 0)}  fail {counts.get('fail', 0)}  "
        f"error {counts.get('error', 0)}  skipped {counts.get('skipped', 0)}"
    )
    t = Table("judge", "mean", "pass rate", "coverage", "pass", "fail", "error", "skipped")
    for name, d in (report.get("judges") or {}).items():
        t.add_row(
            name,
            fmt(d.get("mean")),
            fmt(d.get("pass_rate")),
            fmt(d.get("coverage")),
            *(str(d.get(k, 0)) for k in ("pass", "fail", "error", "skipped")),
        )
    c.print(t)
    rows = [r for r in report.get("cases", []) if cases or not r.get("passed")]
    if rows:
        total = len(report.get("cases", []))
        title = "cases" if cases else f"failing cases ({len(rows)} of {total})"
        ct = Table("case", "outcome", "passed", *(report.get("judges") or {}), "reason", title=title)
        for r in rows:
            js = r.get("judgements", {})
            ct.add_row(
                str(r.get("case_id")),
                str(r.get("outcome")),
                fmt(r.get("passed")),
                *(
                    fmt(js[n]["score"])
                    if n in js and js[n]["status"] == "ok"
                    else (js[n]["status"] if n in js else "-")
                    for n in (report.get("judges") or {})
                ),
                _cut(r.get("reason")),
            )
        c.print(ct)
    _print_diagnosis(report, c)


def _print_diagnosis(report: Mapping[str, Any], c: Console) -> None:
    """The diagnosis (weak side: retrieval or generation) when the report has the metrics for it."""
    diag = report.get("diagnosis") or {}
    overall = diag.get("overall") or {}
    if not overall or overall.get("weak_side") == "undetermined":
        return
    c.print(f"diagnosis: {overall.get('summary')}")
    weak = [d for d in diag.get("cases", []) if d.get("weak_side") in ("retrieval", "generation")]
    if weak:
        t = Table("case", "weak side", "why", title="diagnosis")
        for d in weak:
            t.add_row(str(d.get("case_id")), str(d.get("weak_side")), _cut(d.get("reason")))
        c.print(t)


def print_runs(runs: Sequence[RunRecord], console: Console | None = None) -> None:
    """One row per run: id, test set, status, started, pass rate, coverage, cases."""
    c = console or stdout()
    t = Table("run", "test set", "status", "started (UTC)", "cases", "pass rate", "coverage")
    for r in runs:
        rep = r.report or {}
        t.add_row(
            r.run_id,
            r.test_set,
            r.status.value,
            f"{r.started_at:%Y-%m-%d %H:%M:%S}",
            fmt(rep.get("cases_total")),
            fmt(rep.get("pass_rate")),
            fmt(rep.get("coverage")),
        )
    c.print(t)


def print_compare(cmp: Mapping[str, Any], console: Console | None = None) -> None:
    """Averages side by side and the cases that flipped (see :func:`ragpulse.replay.compare.compare_reports`)."""
    c = console or stdout()
    a, b = cmp["run_a"], cmp["run_b"]
    t = Table("metric", a, b, "delta")
    for name, row in cmp["metrics"].items():
        d = row["delta"]
        t.add_row(name, fmt(row["a"]), fmt(row["b"]), "-" if d is None else f"{d:+.3f}")
    c.print(t)
    for key, title in (("pass_to_fail", "pass → fail"), ("fail_to_pass", "fail → pass")):
        flipped = cmp[key]
        c.print(f"{title}: {len(flipped)} case(s)")
        if flipped:
            ft = Table("case", f"reason in {b}")
            for f in flipped:
                ft.add_row(str(f["case_id"]), _cut(f.get("reason_b")))
            c.print(ft)


def print_trace(result: TraceResult, console: Console | None = None) -> None:
    """The trace's identity and outcome, then every judgement with its reason."""
    c = console or stdout()
    tr = result.trace
    c.print(
        f"trace {tr.trace_id}  app {tr.app or '-'}  scenario {tr.scenario or '-'}  source {tr.source.value}  "
        f"outcome {result.outcome.value}{' (' + result.outcome_reason + ')' if result.outcome_reason else ''}"
    )
    if tr.run_id:
        c.print(f"run {tr.run_id}  case {tr.test_case_id}")
    t = Table("judge", "version", "backend", "status", "score", "passed", "reason")
    for j in result.judgements:
        t.add_row(
            j.judge,
            j.version,
            j.backend.value,
            j.status.value,
            fmt(j.score),
            fmt(j.passed),
            _cut(j.reason, 120),
        )
    c.print(t)
