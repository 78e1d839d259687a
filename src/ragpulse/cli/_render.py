"""Human-readable output of run reports, runs and traces (rich tables on stdout)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from ragpulse.model import JudgementStatus, TraceResult

if TYPE_CHECKING:  # the service modules are imported where they are used: `ragpulse --help` stays light
    from ragpulse.protocols import RunStore
    from ragpulse.runs.compare import FlipKind, FlippedCase, FlippedSpool, RunComparison
    from ragpulse.runs.report_model import CaseRow, RunReport
    from ragpulse.runs.stored import RunSummary

__all__ = [
    "emit_report",
    "fmt",
    "print_compare",
    "print_long_table",
    "print_report",
    "print_runs",
    "print_trace",
    "stdout",
]

#: Rows of a table :func:`print_long_table` renders at a time.
TABLE_CHUNK = 500


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


def _wall(report: RunReport) -> str:
    """``wall 12.30 s``, and for a run without a measured wall time which elapsed time it is:
    ``ran 12.30 s (started → last heartbeat)``."""
    if report.wall_until is None:
        return f"wall {fmt(report.wall_seconds, 2)} s"
    return f"ran {fmt(report.wall_seconds, 2)} s (started → {report.wall_until})"


#: Case rows printed by default: a 100,000-case report's table would take minutes to render.
CASE_ROWS = 200


def print_report(
    report: RunReport,
    rows: Sequence[CaseRow] | None = None,
    *,
    cases: bool = False,
    console: Console | None = None,
    offset: int = 0,
    not_judged: Sequence[CaseRow] | None = None,
) -> None:
    """Summary, per-judge table and a page of case rows of a run report: ``rows`` (all cases when ``cases``,
    else the failing ones: verdict ``fail``) starting at row ``offset``, or the report's own rows when ``rows``
    is ``None``; says which rows of how many it shows. Without ``cases``, the cases not judged (abstained,
    judge errors, skips; ``not_judged``, else the report's own) follow in their own table with their reasons:
    they are not failures. The diagnosis table covers the rows shown."""
    c = console or stdout()
    counts, tokens = report.counts, report.tokens
    c.print(f"run {report.run_id}  test set {report.test_set}  status {report.status.value}")
    c.print(
        f"cases {report.cases_total}  pass rate {fmt(report.pass_rate)}  "
        f"coverage {fmt(report.coverage)}  {_wall(report)}  "
        f"tokens {tokens.prompt} prompt / {tokens.completion} completion"
    )
    names = list(report.judges)
    if names:
        added = report.judges_added
        note = f"  (added for this test set: {', '.join(added)})" if added else ""
        c.print(f"judges: {', '.join(names)}{note}")
    if report.error:
        c.print(f"error: {report.error}")
    c.print(
        f"judgements: pass {counts.pass_}  fail {counts.fail}  error {counts.error}  "
        f"abstained {counts.abstained}  skipped {counts.skipped}"
    )
    if report.cases_abstained:
        c.print(
            f"abstained cases: {report.cases_abstained} (the answer declined to answer; not in the pass rate)"
        )
    if report.retrieval_misses or report.generation_errors:
        c.print(
            f"unsupported claims: {report.retrieval_misses} retrieval misses  "
            f"{report.generation_errors} generation errors"
        )
    t = Table("judge", "mean", "pass rate", "coverage", "pass", "fail", "error", "abstained", "skipped")
    for name, d in report.judges.items():
        t.add_row(
            name,
            fmt(d.mean),
            fmt(d.pass_rate),
            fmt(d.coverage),
            *(str(d.get(k)) for k in ("pass", "fail", "error", "abstained", "skipped")),
        )
    c.print(t)
    if rows is None:
        rows = [r for r in report.cases if cases or r.verdict == "fail"][offset:]
    total = report.cases_total if cases else report.cases_failing
    if rows:
        title = "cases" if cases else f"failing cases ({total} of {report.cases_total})"
        ct = Table("case", "outcome", "verdict", *names, "reason", title=title)
        for r in rows:
            js = r.judgements
            ct.add_row(
                r.case_id,
                r.outcome.value,
                r.verdict.replace("_", " "),
                *(
                    fmt(js[n].score)
                    if n in js and js[n].status is JudgementStatus.OK
                    else (js[n].status.value if n in js else "-")
                    for n in names
                ),
                _cut(r.reason),
            )
        c.print(ct)
    if len(rows) < total:
        shown = f"rows {offset + 1}–{offset + len(rows)}" if rows else "no rows"
        c.print(
            f"showing {shown} of {total} "
            "(runs show --offset N --limit N for others, --limit 0 for all, --json for the data)"
        )
    unjudged: Sequence[CaseRow] = ()
    if not cases:
        unjudged = report.not_judged_cases if not_judged is None else not_judged
        _print_not_judged(report, unjudged, c)
    _print_diagnosis(report, [*rows, *unjudged], c)


def _print_not_judged(report: RunReport, rows: Sequence[CaseRow], c: Console) -> None:
    """The cases not judged (verdict ``not_judged``) with why: neither passed nor failed."""
    if not rows:
        return
    n = report.cases_not_judged if report.cases_not_judged is not None else len(rows)
    t = Table("case", "outcome", "reason", title=f"not judged ({n} of {report.cases_total}; not failures)")
    for r in rows:
        t.add_row(r.case_id, r.outcome.value, _cut(r.reason))
    c.print(t)
    if len(rows) < n:
        c.print(f"showing {len(rows)} of {n} cases not judged (--json for all)")


async def emit_report(
    store: RunStore,
    report: RunReport,
    *,
    json_out: bool,
    cases: bool,
    limit: int | None = CASE_ROWS,
    offset: int = 0,
) -> None:
    """Print ``report`` on stdout: its JSON form with every case streamed from the store
    (:func:`~ragpulse.runs.reports.write_report_json`), or the text summary with one page of case rows
    (``limit`` rows from ``offset``, ``None``: all; all cases when ``cases``, else the failing ones) read from
    the store (:func:`~ragpulse.runs.reports.case_rows_page`).

    Raises:
        StoreError: the store failed.
    """
    from ragpulse.runs.reports import case_rows_page, write_report_json

    if json_out:
        await write_report_json(store, report, sys.stdout)
        sys.stdout.flush()
        return
    n = limit if limit is not None else report.cases_total + len(report.cases) + 1
    rows, _ = await case_rows_page(store, report, limit=n, offset=offset, failing=not cases)
    unjudged: list[CaseRow] = []
    if not cases:
        unjudged, _ = await case_rows_page(store, report, limit=n, not_judged=True)
    print_report(report, rows, cases=cases, offset=offset, not_judged=unjudged)


def _print_diagnosis(report: RunReport, rows: Sequence[CaseRow], c: Console) -> None:
    """The diagnosis (weak side: retrieval or generation) when the report has the metrics for it; the weak
    cases among ``rows``."""
    from ragpulse.runs.diagnosis import diagnose_case

    diag = report.diagnosis
    if diag is None or diag.overall.weak_side == "undetermined":
        return
    c.print(f"diagnosis: {diag.overall.summary}")
    weak = [d for d in map(diagnose_case, rows) if d.weak_side in ("retrieval", "generation")]
    if weak:
        t = Table("case", "weak side", "why", title="diagnosis")
        for d in weak:
            t.add_row(d.case_id, d.weak_side, _cut(d.reason, 240))
        c.print(t)


def print_runs(runs: Sequence[RunSummary], console: Console | None = None) -> None:
    """One row per run: id, test set, status, started, pass rate, coverage, cases."""
    c = console or stdout()
    t = Table("run", "test set", "status", "started (UTC)", "cases", "pass rate", "coverage")
    for r in runs:
        t.add_row(
            r.run_id,
            r.test_set,
            r.status.value,
            f"{r.started_at:%Y-%m-%d %H:%M:%S}",
            fmt(r.cases_total),
            fmt(r.pass_rate),
            fmt(r.coverage),
        )
    c.print(t)


def print_long_table(
    c: Console,
    headers: Sequence[str],
    rows: Callable[[], Iterable[Sequence[str]]],
    *,
    chunk: int | None = None,
) -> None:
    """Print ``Table(*headers)`` with the rows ``rows()`` gives (a new pass each call; called twice when there are
    more than ``chunk`` rows): the same output as one table of every row, rendered ``chunk`` rows at a time so
    a long table is never held whole.

    A table's column widths depend only on its header and, per column, the largest minimum and the largest
    maximum width of its cells: a first pass finds those cells (two "proxy" rows); each chunk is then rendered
    as a table of the proxy rows and the chunk's rows (so with the whole table's widths) and only the chunk's
    lines are printed (the header once, the bottom border once). ``chunk`` ``None``: :data:`TABLE_CHUNK`."""
    chunk = chunk or TABLE_CHUNK
    head: list[Sequence[str]] = []
    for row in rows():
        head.append(row)
        if len(head) > chunk:
            break
    if len(head) <= chunk:
        t = Table(*headers)
        for row in head:
            t.add_row(*row)
        c.print(t)
        return
    del head
    options = c.options.update(
        justify=None, overflow=None, height=None, no_wrap=None, markup=None, highlight=None
    )
    widest_min: list[tuple[int, str]] = [(-1, "")] * len(headers)
    widest_max: list[tuple[int, str]] = [(-1, "")] * len(headers)
    for row in rows():
        for i, cell in enumerate(row):
            m = Measurement.get(c, options, cell)
            if m.minimum > widest_min[i][0]:
                widest_min[i] = (m.minimum, cell)
            if m.maximum > widest_max[i][0]:
                widest_max[i] = (m.maximum, cell)
    proxy = [[cell for _, cell in widest_min], [cell for _, cell in widest_max]]

    def lines(body: Iterable[Sequence[str]]) -> list[list[Segment]]:
        t = Table(*headers)
        for row in body:
            t.add_row(*row)
        return c.render_lines(t, options, pad=False, new_lines=False)

    with_proxy = len(lines(proxy))  # top border, header, separator, the proxy rows, bottom border
    proxy_lines = len(lines(proxy + proxy)) - with_proxy
    head_lines = with_proxy - proxy_lines - 1

    def emit(body: list[Sequence[str]], first: bool, last: bool) -> None:
        got = lines([*proxy, *body])
        kept = got[:head_lines] if first else []
        kept += got[head_lines + proxy_lines : None if last else -1]
        c.print(Segments([seg for line in kept for seg in (*line, Segment.line())]))

    body: list[Sequence[str]] = []
    first = True
    for row in rows():
        if len(body) == chunk:
            emit(body, first, False)
            body, first = [], False
        body.append(row)
    emit(body, first, True)


def print_compare(
    cmp: RunComparison, console: Console | None = None, flipped: FlippedSpool | None = None
) -> None:
    """Averages side by side and the cases that flipped (see :func:`ragpulse.runs.compare.compare_reports`);
    a figure over no cases (no shared case, or a judge that scored none) prints ``n/a``. The flipped cases are
    ``cmp``'s, or read from ``flipped`` when given (:func:`print_long_table`: never all in memory)."""
    from ragpulse.runs.compare import FLIP_KINDS

    c = console or stdout()
    a, b = cmp.run_a, cmp.run_b
    if cmp.shared_cases == 0:
        c.print(f"no shared cases: runs {a} and {b} have no case in common, nothing to compare")
    elif cmp.judges_differ and not cmp.judges_compared:
        c.print(f"no shared judges: runs {a} and {b} ran no judge in common, nothing to compare")
    elif cmp.judges_differ:
        c.print(f"compared on the judges both runs ran: {', '.join(cmp.judges_compared)}")
    t = Table("metric", a, b, "delta")
    for name, row in cmp.metrics.items():
        d = row.delta
        t.add_row(
            name,
            "n/a" if row.a is None else fmt(row.a),
            "n/a" if row.b is None else fmt(row.b),
            "n/a" if d is None else f"{d:+.3f}",
        )
    c.print(t)
    held: dict[FlipKind, Sequence[FlippedCase]] = {
        "pass_to_fail": cmp.pass_to_fail,
        "fail_to_pass": cmp.fail_to_pass,
        "score_drops": cmp.score_drops,
    }
    titles = ("pass → fail", "fail → pass", f"score drop ≥ {cmp.score_drop:g} (failed in both runs)")
    for kind, title in zip(FLIP_KINDS, titles, strict=True):
        n = flipped.counts[kind] if flipped is not None else len(held[kind])
        c.print(f"{title}: {n} case(s)")
        if n:

            def rows(kind: FlipKind = kind) -> Iterable[Sequence[str]]:
                cases: Iterable[FlippedCase] = flipped.read(kind) if flipped is not None else held[kind]
                if kind == "score_drops":
                    return ((f.case_id, _drops(f), _cut(f.reason_b)) for f in cases)
                return ((f.case_id, _cut(f.reason_b)) for f in cases)

            head = (
                ("case", "judge A → B", f"reason in {b}")
                if kind == "score_drops"
                else ("case", f"reason in {b}")
            )
            print_long_table(c, head, rows)


def _drops(case: FlippedCase) -> str:
    """``relevancy 0.900 → 0.600`` per judge of a :class:`~ragpulse.runs.compare.ScoreDrop`."""
    from ragpulse.runs.compare import ScoreDrop

    judges = case.judges if isinstance(case, ScoreDrop) else {}
    return ", ".join(f"{name} {fmt(d.a)} → {fmt(d.b)}" for name, d in judges.items())


#: Styles of claim verdicts in the highlighted answer.
_VERDICT_STYLE = {"unsupported": "bold red underline", "contradicted": "bold white on red"}


def claims_of(result: TraceResult, all_versions: bool = False) -> list[tuple[str, str, dict[str, Any]]]:
    """``(judge, version, claim)`` for every per-claim detail (``flags.claims``) of the newest judgement of
    each judge on the trace (all stored versions with ``all_versions``)."""
    from ragpulse.portal.traces import newest_per_judge

    judgements = result.judgements if all_versions else newest_per_judge(result.judgements)[0]
    out: list[tuple[str, str, dict[str, Any]]] = []
    for j in judgements:
        claims = getattr(j.flags, "claims", None)
        if isinstance(claims, list):
            out.extend((j.judge, j.version, c) for c in claims if isinstance(c, dict))
    return out


def highlighted_answer(answer: str, claims: Sequence[dict[str, Any]]) -> Text:
    """The answer with unsupported (red, underlined) and contradicted (white on red) claim spans marked;
    claims without valid offsets are not marked."""
    text = Text(answer)
    for c in claims:
        start, end, style = c.get("start"), c.get("end"), _VERDICT_STYLE.get(str(c.get("verdict")))
        if style and isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(answer):
            text.stylize(style, start, end)
    return text


def cause_text(claim: dict[str, Any]) -> str:
    """A claim's cause for the claims table: ``retrieval_miss (reference_contexts #2 doc s)`` (the stored
    0-based ``index`` shown 1-based, like the portal), ``generation_error``, ``undecided`` (attributed, no
    cause) or ``-`` (not attributed)."""
    if "cause" not in claim:
        return "-"
    cause = claim.get("cause")
    if cause == "retrieval_miss":
        ref = claim.get("reference")
        if isinstance(ref, dict):
            doc = f" doc {ref['doc_id']}" if ref.get("doc_id") else ""
            index = ref.get("index")
            number = f" #{index + 1}" if isinstance(index, int) else ""
            return f"retrieval_miss ({ref.get('source')}{number}{doc})"
        return "retrieval_miss"
    return str(cause) if cause == "generation_error" else "undecided"


def attribution_lines(result: TraceResult) -> list[str]:
    """One line per attributed judgement (``flags.attribution``): the claim causes counted, and why some
    stayed undecided."""
    out: list[str] = []
    for j in result.judgements:
        a = getattr(j.flags, "attribution", None)
        if not isinstance(a, dict):
            continue
        line = (
            f"causes {j.judge}: {a.get('retrieval_misses', 0)} retrieval miss(es), "
            f"{a.get('generation_errors', 0)} generation error(s), {a.get('undecided', 0)} undecided"
        )
        out.append(line + (f" ({a['reason']})" if a.get("reason") else ""))
    return out


def cascade_lines(result: TraceResult) -> list[str]:
    """One line per cascade judgement: the deciding stage (``flags.stage``) and each stage's cost."""
    out: list[str] = []
    for j in result.judgements:
        stage = getattr(j.flags, "stage", None)
        stages = getattr(j.flags, "cascade", None)
        if not isinstance(stage, str) or not isinstance(stages, dict):
            continue
        parts = []
        for key in ("first", "main"):
            s = stages.get(key)
            if isinstance(s, dict):
                model = s.get("model")
                parts.append(
                    f"{key} {s.get('backend')}{f' {model}' if model else ''} {s.get('status')} "
                    f"score {fmt(s.get('score'))} "
                    f"{int(s.get('prompt_tokens') or 0) + int(s.get('completion_tokens') or 0)} tokens "
                    f"{float(s.get('latency_s') or 0.0):.3f} s"
                )
        out.append(f"cascade {j.judge}: decided by {stage} ({'; '.join(parts)})")
    return out


def reuse_lines(result: TraceResult) -> list[str]:
    """One line per judgement copied from a stored shadow judgement (``flags.reused_from``): when the shadow
    judged it and what that cost (the copy made no model call)."""
    out: list[str] = []
    for j in result.judgements:
        extra = j.flags.model_extra or {}
        cost = extra.get("shadow_cost")
        if extra.get("reused_from") != "shadow" or not isinstance(cost, dict):
            continue
        tokens = int(cost.get("prompt_tokens") or 0) + int(cost.get("completion_tokens") or 0)
        out.append(
            f"{j.judge} {j.version}: reused the shadow judgement of {cost.get('judged_at') or '?'} "
            f"({tokens} tokens then; no model call)"
        )
    return out


#: Characters of the question and of the answer ``ragpulse trace`` prints unless ``--full``.
TRACE_TEXT_CHARS = 2000


def _first_chars(text: Text, full: bool) -> Text:
    """``text`` (styles kept), cut to :data:`TRACE_TEXT_CHARS` characters with a note of what was left out
    unless ``full``."""
    rest = len(text) - TRACE_TEXT_CHARS
    if full or rest <= 0:
        return text
    return Text.assemble(
        text[:TRACE_TEXT_CHARS], (f" … ({rest:,} more characters; --full prints all)", "dim")
    )


def print_trace(
    result: TraceResult, console: Console | None = None, *, all_versions: bool = False, full: bool = False
) -> None:
    """The trace's identity and outcome, question, ranked documents (ranks from 1), the answer with the parts
    the newest judgement of a judge found unsupported highlighted, every judgement with its reason, and each
    claim the newest judgement of each judge checked (every stored version's with ``all_versions``) with its
    version, verdict, evidence (rank from 1) and cause (retrieval miss or generation error,
    :func:`cause_text`). The question and the answer are cut to :data:`TRACE_TEXT_CHARS` characters unless
    ``full``."""
    c = console or stdout()
    tr = result.trace
    c.print(
        f"trace {tr.trace_id}  app {tr.app or '-'}  scenario {tr.scenario or '-'}  source {tr.source.value}  "
        f"outcome {result.outcome.value}{' (' + result.outcome_reason + ')' if result.outcome_reason else ''}"
    )
    if tr.run_id:
        c.print(f"run {tr.run_id}  case {tr.test_case_id}")
    if tr.question is not None:
        c.print(Text.assemble(("question: ", "bold"), _first_chars(Text(tr.question), full)))
    if tr.documents:
        docs = Table("rank", "id", "score", "content", title="documents")
        for d in tr.documents:
            docs.add_row(str(d.rank + 1), d.id or "-", fmt(d.score), _cut(d.content, 140))
        c.print(docs)
    claims = claims_of(result, all_versions)
    if tr.answer is not None:
        newest = claims if not all_versions else claims_of(result)
        c.print(
            Text.assemble(
                ("answer: ", "bold"),
                _first_chars(highlighted_answer(tr.answer, [cl for _, _, cl in newest]), full),
            )
        )
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
    for line in [*cascade_lines(result), *reuse_lines(result), *attribution_lines(result)]:
        c.print(line)
    if claims:
        ct = Table("judge", "version", "verdict", "span", "evidence", "cause", "claim", title="claims")
        for judge, version, cl in claims:
            ev = cl.get("evidence")
            rank = ev.get("rank") if isinstance(ev, dict) else None
            where = f" (rank {rank + 1})" if isinstance(rank, int) else ""
            evidence = f"{ev.get('doc_id') or '-'}{where}" if isinstance(ev, dict) else "-"
            span = f"{cl['start']}–{cl['end']}" if isinstance(cl.get("start"), int) else "not located"
            style = _VERDICT_STYLE.get(str(cl.get("verdict")), "")
            ct.add_row(
                judge,
                version,
                Text(str(cl.get("verdict")), style=style),
                span,
                evidence,
                cause_text(cl),
                _cut(cl.get("text"), 100),
            )
        c.print(ct)
    if not all_versions:
        from ragpulse.portal.traces import newest_per_judge

        claimed = {judge for judge, _, _ in claims}
        for judge, n in newest_per_judge(result.judgements)[1].items():
            if judge in claimed:
                c.print(
                    f"{judge}: claims of the newest version shown; {n} older version(s) stored "
                    "(--all-versions lists their claims)"
                )
