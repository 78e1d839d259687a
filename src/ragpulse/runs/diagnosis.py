"""Which side of a RAG system is weak — retrieval or generation — case by case and over a whole run.

Input: the run report's per-case rows (:class:`~ragpulse.runs.report_model.CaseRow`, see
:mod:`ragpulse.runs.reports`), each with ``case_id`` and ``judgements`` (judge → score, passed, status). Only ``ok`` judgements count;
a judgement is weak when it did not pass its judge's threshold.

Metrics by side:

- retrieval: ``context_recall``, ``context_precision`` (and ``context_relevance`` when neither is there);
- generation: ``answer_correctness``, ``faithfulness``.

Claim evidence: a failing judgement whose unsupported claims were attributed (``CaseRow.claim_causes``,
docs/llm-judges.md "Claim causes") says which side each claim failed on — a *retrieval miss* (a reference
context that was not retrieved supports the claim) or a *generation error* (no reference context supports it).

Per case (``weak_side``):

=================  ===========================================================================================
``retrieval``      a retrieval metric failed: low recall → the retriever or the knowledge base misses needed
                   content; low precision → irrelevant chunks are ranked high (generation may fail as a
                   consequence, so retrieval is named first); or no retrieval metric failed but a generation
                   metric did and most of its unsupported claims (at least as many as the generation errors)
                   are retrieval misses — the chunk that supports the answer was never retrieved, whatever
                   the retrieval scores say
``generation``     every retrieval metric passed (or none was scored and the unsupported claims are
                   generation errors) but a generation metric failed (the model had the context and still
                   answered wrongly or unfaithfully)
``none``           both sides have metrics and all passed
``undetermined``   retrieval passed but no generation metric was scored, or no retrieval metric was scored
                   and no claim evidence decides
=================  ===========================================================================================

Overall (``overall.weak_side``): the side with the most weak cases (``retrieval``, ``generation``, ``both``
on a tie, ``none`` when no case is weak), with the counts and each metric's mean over the cases it scored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ragpulse.model import JudgementStatus
from ragpulse.runs.report_model import CaseDiagnosis, CaseRow, Diagnosis, DiagnosisOverall, WeakSide

__all__ = ["GENERATION_METRICS", "RETRIEVAL_METRICS", "DiagnosisTally", "diagnose", "diagnose_case"]

RETRIEVAL_METRICS = ("context_recall", "context_precision")
#: Used for retrieval only when neither recall nor precision was scored (online traffic without references).
RETRIEVAL_FALLBACK = ("context_relevance",)
GENERATION_METRICS = ("answer_correctness", "faithfulness")

SIDES = ("retrieval", "generation", "none", "undetermined")


def _scored(row: CaseRow, names: Sequence[str]) -> dict[str, tuple[float, bool]]:
    out: dict[str, tuple[float, bool]] = {}
    for n in names:
        j = row.judgements.get(n)
        if j is not None and j.status is JudgementStatus.OK and j.score is not None:
            out[n] = (float(j.score), bool(j.passed))
    return out


def _fmt(metrics: Mapping[str, tuple[float, bool]], failed: bool) -> str:
    return ", ".join(f"{n} {s:.2f}" for n, (s, p) in metrics.items() if p is not failed)


def _claims(misses: int, errors: int) -> str:
    """``"2 of 3 unsupported claims are in a reference context that was not retrieved"``-style evidence."""
    total = misses + errors
    if misses:
        return f"{misses} of {total} unsupported claim(s) are in a reference context that was not retrieved"
    return f"{errors} unsupported claim(s) are in no reference context"


def diagnose_case(row: CaseRow) -> CaseDiagnosis:
    """The weak side of one case (the table above) and the scores and claim evidence it was decided on."""
    retr = _scored(row, RETRIEVAL_METRICS) or _scored(row, RETRIEVAL_FALLBACK)
    gen = _scored(row, GENERATION_METRICS)
    weak_r = {n: v for n, v in retr.items() if not v[1]}
    weak_g = {n: v for n, v in gen.items() if not v[1]}
    causes = row.claim_causes
    misses, errors = (causes.retrieval_misses, causes.generation_errors) if causes else (0, 0)
    evidence = _claims(misses, errors) if misses or errors else ""
    side: WeakSide
    if weak_r:
        side = "retrieval"
        parts = []
        if "context_recall" in weak_r:
            parts.append("the retriever or knowledge base misses needed content")
        if "context_precision" in weak_r or "context_relevance" in weak_r:
            parts.append("irrelevant chunks are ranked high")
        reason = f"low {_fmt(weak_r, True)}: {' and '.join(parts)}"
        if weak_g:
            also = f"generation also low: {_fmt(weak_g, True)}"
            reason += f" ({also}; {evidence})" if evidence else f" ({also})"
    elif weak_g and misses and misses >= errors:
        side = "retrieval"
        fine = f"retrieval scores fine ({_fmt(retr, False)})" if retr else "no retrieval metric scored"
        reason = f"{fine} but low {_fmt(weak_g, True)}: {evidence}: the retriever missed it"
    elif not retr and weak_g and errors:
        side = "generation"
        reason = f"no retrieval metric scored; low {_fmt(weak_g, True)}: {evidence}"
    elif not retr:
        side = "undetermined"
        reason = "no retrieval metric scored"
    elif weak_g:
        side = "generation"
        reason = f"retrieval fine ({_fmt(retr, False)}) but low {_fmt(weak_g, True)}"
        if evidence:
            reason += f": {evidence}"
    elif gen:
        side = "none"
        reason = "retrieval and generation metrics passed"
    else:
        side = "undetermined"
        reason = f"retrieval fine ({_fmt(retr, False)}); no generation metric scored"
    return CaseDiagnosis(
        case_id=row.case_id,
        weak_side=side,
        reason=reason,
        retrieval={n: round(s, 6) for n, (s, _) in retr.items()},
        generation={n: round(s, 6) for n, (s, _) in gen.items()},
    )


class DiagnosisTally:
    """Folds case rows into the overall diagnosis one row at a time (cases per side and metric sums: constant
    memory); the per-case diagnoses are not kept (:func:`diagnose_case` of a row gives one)."""

    def __init__(self, *, keep_cases: bool = False) -> None:
        self.counts = dict.fromkeys(SIDES, 0)
        self._sums: dict[str, tuple[float, int]] = {}
        self.keep_cases = keep_cases
        self.cases: list[CaseDiagnosis] = []

    def add(self, row: CaseRow) -> CaseDiagnosis:
        """Count ``row`` and return its diagnosis."""
        c = diagnose_case(row)
        self.counts[c.weak_side] += 1
        for n, s in {**c.retrieval, **c.generation}.items():
            total, k = self._sums.get(n, (0.0, 0))
            self._sums[n] = (total + s, k + 1)
        if self.keep_cases:
            self.cases.append(c)
        return c

    def diagnosis(self) -> Diagnosis:
        """The diagnosis of the rows added so far (``cases`` only with ``keep_cases``)."""
        counts = dict(self.counts)
        means = {n: round(total / k, 6) for n, (total, k) in self._sums.items()}
        r, g = counts["retrieval"], counts["generation"]
        weak: WeakSide
        if r == g == 0:
            weak = "none" if counts["none"] else "undetermined"
        elif r == g:
            weak = "both"
        else:
            weak = "retrieval" if r > g else "generation"
        summary = {
            "retrieval": f"retrieval is the weak side: {r} case(s) with low context recall/precision or "
            f"answer claims found only in a reference context that was not retrieved (vs {g} with good "
            "retrieval but a weak answer); look at the retriever and the knowledge base",
            "generation": f"generation is the weak side: {g} case(s) had good retrieval but a weak answer "
            f"(vs {r} with weak retrieval); look at the prompt and the model",
            "both": f"both sides are weak in {r} case(s) each",
            "none": "no weak side: every diagnosed case passed its retrieval and generation metrics",
            "undetermined": "not enough metrics: enable context_recall/context_precision and "
            "answer_correctness/faithfulness",
        }[weak]
        return Diagnosis(
            overall=DiagnosisOverall(weak_side=weak, summary=summary, cases=counts, means=means),
            cases=list(self.cases),
        )


def diagnose(rows: Iterable[CaseRow]) -> Diagnosis:
    """Diagnose a run from its per-case report rows.

    Returns the overall weak side (``weak_side``, ``summary``, cases per side, each metric's mean over the cases
    it scored, 0–1, 6 decimals) and one :class:`CaseDiagnosis` per case.
    """
    tally = DiagnosisTally(keep_cases=True)
    for r in rows:
        tally.add(r)
    return tally.diagnosis()
