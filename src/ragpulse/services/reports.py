"""The run report of a replay: pass rate, coverage, per-judge averages, counts, tokens, per-case rows.

Definitions (issue 3):

- A judgement is **scored** when its status is ``ok`` (it has a 0–1 score and ``passed``).
- A **case passes** when it has at least one scored judgement, every scored judgement passed and no judgement
  is an ``error`` (a judge that could not answer leaves the case undecided: with the judge model down, a run
  must not pass on the judges that need no model).
- ``pass_rate`` = passed cases / all cases; ``coverage`` = cases with ≥ 1 scored judgement / all cases.
  Both are 0.0 for an empty run. An unscored case is never a pass and is never dropped from the totals.
- ``averages[judge]`` = mean score of the judge over the cases it scored (``None`` when it scored none).
- ``counts`` = ``pass`` / ``fail`` / ``error`` / ``skipped`` over judgements. A case that was not evaluable
  (no question, no answer) ran no judge; it counts as ``skipped`` once for every judge that would have run.
  A case without an answer that the retrieval judges (``needs_answer = False``) could judge is ``evaluated``:
  its answer-needing judges have ``skipped``/``no_answer`` judgements, counted like any other; the case is
  scored (and can pass) on the retrieval judges alone, and those answer judges' ``coverage`` shows the gap.
- ``tokens`` = judge-model tokens (``prompt``, ``completion``) summed over all judgements.
- ``judges_added`` = judges added to ``enabled_judges`` for this test set because it can measure retrieval
  (:mod:`ragpulse.replay.judge_defaults`; empty when the user chose the judges or none were added).
- ``judges[judge]`` = per-judge detail: ``mean``, ``pass_rate`` (passed / scored), ``coverage`` (scored / all
  cases), ``scored`` and the four counts.
- ``cases`` = one row per case: ``case_id``, ``trace_id``, ``outcome``, ``passed``, ``scored``, ``reason``
  (why it failed or was not scored: failed and errored judgements first, then skipped ones) and ``judgements`` (judge → ``score``, ``passed``, ``status``, ``reason``).
- ``retrieval_misses`` / ``generation_errors`` = unsupported claims of failing faithfulness judgements that a
  reference context the retrieval missed supports / that no reference context supports, summed from the
  stored ``flags.attribution`` (:mod:`ragpulse.judges.answer.attribution`); per judge in ``judges[judge]``
  for judges that check claims (``None`` for the others), and over all judges at the top.
- ``diagnosis`` = which side is weak, retrieval or generation, per case and overall
  (:func:`ragpulse.services.diagnosis.diagnose` of the case rows).

The report is a :class:`~ragpulse.services.report_model.RunReport` (pydantic); its JSON form
(:meth:`~ragpulse.services.report_model.RunReport.to_json`) is what ``replay --json`` prints and the runs table
stores.

Scores and rates are rounded to 6 decimals, ``wall_seconds`` to 3.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ragpulse.model import JudgementFlags, JudgementStatus, RunStatus, TraceOutcome, TraceResult
from ragpulse.replay.runner import CaseResult
from ragpulse.services.diagnosis import diagnose
from ragpulse.services.report_model import (
    CaseJudgement,
    CaseRow,
    Counts,
    JudgeStats,
    RunReport,
    Tokens,
)

__all__ = [
    "CAUSE_KEYS",
    "COUNT_KEYS",
    "REPORT_KEYS",
    "CaseResult",
    "RunReport",
    "build_report",
    "run_status",
    "stored_case",
]

#: Keys every report's JSON form has (the ``--json`` interface of ``ragpulse replay``).
REPORT_KEYS = (
    "run_id",
    "test_set",
    "cases_total",
    "pass_rate",
    "coverage",
    "averages",
    "counts",
    "tokens",
    "wall_seconds",
)
COUNT_KEYS = ("pass", "fail", "error", "skipped")
#: Claim-cause counts of the report (run level and per claim-checking judge).
CAUSE_KEYS = ("retrieval_misses", "generation_errors")


def _r(x: float) -> float:
    return round(x, 6)


def _case_row(c: CaseResult) -> CaseRow:
    js = c.result.judgements
    scored = [j for j in js if j.status is JudgementStatus.OK]
    errored = any(j.status is JudgementStatus.ERROR for j in js)
    # A judge that could not answer leaves the case undecided: it never passes on the other judges alone.
    passed = bool(scored) and all(j.passed for j in scored) and not errored
    reason: str | None
    if c.result.outcome in (TraceOutcome.NOT_EVALUABLE, TraceOutcome.NOT_SAMPLED):
        reason = c.note or c.result.outcome_reason or c.result.outcome.value
    elif not passed:
        bad = [j for j in js if j.status is not JudgementStatus.OK or not j.passed]
        # failures and errors first, skipped judgements (e.g. no_answer) last
        bad.sort(key=lambda j: j.status is JudgementStatus.SKIPPED)
        reason = "; ".join(f"{j.judge}: {j.reason or j.outcome}" for j in bad) or "no_judgements"
    else:
        reason = None
    if not c.stored:  # the runner's note names the case's file:line when known ("store_failed: f.jsonl:2")
        head = c.note if c.note and c.note.startswith("store_failed") else "store_failed"
        reason = f"{head}; {reason}" if reason and reason != head else head
    return CaseRow(
        case_id=c.case_id,
        trace_id=c.result.trace.trace_id,
        outcome=c.result.outcome,
        passed=passed,
        scored=len(scored),
        reason=reason,
        judgements={
            j.judge: CaseJudgement(
                score=None if j.score is None else _r(j.score),
                passed=j.passed,
                status=j.status,
                reason=j.reason,
            )
            for j in js
        },
    )


class _Tally:
    def __init__(self) -> None:
        self.sum = 0.0
        self.counts = dict.fromkeys(COUNT_KEYS, 0)
        self.claims = False  # the judge checks claims (``flags.claims``)
        self.causes = dict.fromkeys(CAUSE_KEYS, 0)

    def add_causes(self, flags: JudgementFlags) -> None:
        """Count the claim causes of one judgement (``flags.attribution``)."""
        extra = flags.model_extra or {}
        self.claims = self.claims or isinstance(extra.get("claims"), list)
        causes = extra.get("attribution")
        if isinstance(causes, dict):
            for key in CAUSE_KEYS:
                n = causes.get(key)
                if isinstance(n, int) and not isinstance(n, bool):
                    self.causes[key] += n


def build_report(
    *,
    run_id: str,
    test_set: str,
    cases: Sequence[CaseResult],
    judges: Sequence[str],
    wall_seconds: float,
    status: RunStatus | None = None,
    judges_added: Sequence[str] = (),
    via: str | None = None,
) -> RunReport:
    """Compute the run report (see the module docstring for every number).

    Args:
        run_id / test_set: identity of the run.
        cases: one entry per test case, in test-set order.
        judges: judge names of the run, in display order (judges met only in results are appended).
        wall_seconds: wall time of the run, seconds.
        status: the run status; ``None`` → :func:`run_status` of ``cases``.
        judges_added: judges added to the default list for this test set.
        via: ``kafka``/``otlp`` for a run sent through a running ``serve``.
    """
    names = list(dict.fromkeys(judges))
    for c in cases:
        for j in c.result.judgements:
            if j.judge not in names:
                names.append(j.judge)
    per = {n: _Tally() for n in names}
    counts = dict.fromkeys(COUNT_KEYS, 0)
    prompt = completion = 0
    rows: list[CaseRow] = []
    n_passed = n_covered = 0
    for c in cases:
        row = _case_row(c)
        rows.append(row)
        n_passed += row.passed
        n_covered += row.scored > 0
        if c.result.outcome is TraceOutcome.NOT_EVALUABLE and not c.result.judgements:
            for name in c.judges:
                per.setdefault(name, _Tally()).counts["skipped"] += 1
                counts["skipped"] += 1
            continue
        for j in c.result.judgements:
            p = per[j.judge]
            p.counts[j.outcome] += 1
            counts[j.outcome] += 1
            if j.status is JudgementStatus.OK and j.score is not None:
                p.sum += j.score
            p.add_causes(j.flags)
            prompt += j.prompt_tokens
            completion += j.completion_tokens
    total = len(cases)
    detail: dict[str, JudgeStats] = {}
    for name, p in per.items():
        scored = p.counts["pass"] + p.counts["fail"]
        detail[name] = JudgeStats(
            mean=_r(p.sum / scored) if scored else None,
            pass_rate=_r(p.counts["pass"] / scored) if scored else None,
            coverage=_r(scored / total) if total else 0.0,
            scored=scored,
            **p.counts,
            **(p.causes if p.claims else {}),
        )
    return RunReport(
        run_id=run_id,
        test_set=test_set,
        status=status or run_status(cases),
        cases_total=total,
        pass_rate=_r(n_passed / total) if total else 0.0,
        coverage=_r(n_covered / total) if total else 0.0,
        averages={name: d.mean for name, d in detail.items()},
        counts=Counts(**counts),
        tokens=Tokens(prompt=prompt, completion=completion),
        **{k: sum(p.causes[k] for p in per.values()) for k in CAUSE_KEYS},
        wall_seconds=round(wall_seconds, 3),
        judges=detail,
        judges_added=list(judges_added),
        cases=rows,
        diagnosis=diagnose(rows),
        via=via,
    )


def run_status(cases: Sequence[CaseResult]) -> RunStatus:
    """``completed_with_errors`` when any case failed to store, had a pre-judging problem (``note``), was not
    judged because it was not sampled (a replay must judge every case) or has an ``error`` judgement; else
    ``completed``."""
    for c in cases:
        if not c.stored or c.note or c.result.outcome is TraceOutcome.NOT_SAMPLED:
            return RunStatus.COMPLETED_WITH_ERRORS
        if any(j.status is JudgementStatus.ERROR for j in c.result.judgements):
            return RunStatus.COMPLETED_WITH_ERRORS
    return RunStatus.COMPLETED


def stored_case(result: TraceResult, judges: Iterable[str]) -> CaseResult:
    """The :class:`CaseResult` of a result judged by another process (``serve`` for ``--via``, or read back
    from the store): its judges are those that judged it, or ``judges`` (the run's) when none did."""
    return CaseResult(
        case_id=result.trace.test_case_id or result.trace.trace_id,
        result=result,
        judges=tuple(j.judge for j in result.judgements) or tuple(judges),
    )
