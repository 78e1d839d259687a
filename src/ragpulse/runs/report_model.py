"""The typed run report (pydantic): what ``ragpulse replay --json`` prints, ``runs show`` shows, the gate
checks, and the runs table stores as JSON.

Definitions of every number are in :mod:`ragpulse.runs.reports`. The JSON form
(:meth:`RunReport.to_json`) keeps the keys of the report's earlier ``dict`` form (``counts.pass`` …), and
:meth:`RunReport.from_json` reads every report stored so far (missing keys take their defaults, unknown keys
are ignored).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from ragpulse.model import ABSTAINED, JudgementStatus, RunStatus, TraceOutcome

__all__ = [
    "JUDGE_FIELDS",
    "RUN_METRICS",
    "CaseDiagnosis",
    "CaseJudgement",
    "CaseRow",
    "CaseVerdict",
    "Counts",
    "Diagnosis",
    "DiagnosisOverall",
    "JudgeStats",
    "MetricRef",
    "RunReport",
    "Tokens",
    "parse_metric",
]

_CONFIG = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

#: Outcome of a judgement in the report's counts.
CountKey = Literal["pass", "fail", "error", "abstained", "skipped"]
#: What a case came to (:attr:`CaseRow.verdict`): ``pass``; ``fail`` — a scored judgement failed and the answer
#: did not abstain; ``not_judged`` — no verdict: the answer abstained (left out of the pass rate), or a judge
#: errored or skipped (``no_answer``, ``no_reference`` …) with no scored judgement failing, or the case was not
#: evaluable. Skipped and error judgements are never failures.
CaseVerdict = Literal["pass", "fail", "not_judged"]
#: Which side of a RAG system a case (or a run) is weak on; see :mod:`ragpulse.runs.diagnosis`.
WeakSide = Literal["retrieval", "generation", "both", "none", "undetermined"]


class Counts(BaseModel):
    """Judgements by outcome (``pass``/``fail``/``error``/``abstained``/``skipped``); JSON keys as written.
    ``abstained``: ``skipped`` judgements whose answer declined to answer (reason ``abstained``), not counted in
    ``skipped`` (reports stored before it count them there)."""

    model_config = _CONFIG

    pass_: int = Field(0, alias="pass")
    fail: int = 0
    error: int = 0
    abstained: int = 0
    skipped: int = 0

    def get(self, key: str) -> int:
        """The count of outcome ``key`` (``pass``, ``fail``, ``error``, ``abstained``, ``skipped``)."""
        return self.pass_ if key == "pass" else int(getattr(self, key))


class Tokens(BaseModel):
    """Judge-model tokens summed over a run's judgements."""

    model_config = _CONFIG

    prompt: int = 0
    completion: int = 0


class CorrectedRate(BaseModel):
    """A pass rate corrected for judge error (Rogan–Gladen) with its 95 % interval, all 0–1, and the name of
    the calibration profile it used (see :mod:`ragpulse.calibration.correction`)."""

    model_config = _CONFIG

    value: float
    lower: float
    upper: float
    profile: str


class JudgeStats(Counts):
    """One judge over a run: ``mean`` score and ``pass_rate`` (passed / scored) over the cases it scored
    (``None`` when none), ``coverage`` (scored / all cases, 0–1), ``scored`` and the four counts.
    ``pass_rate_corrected`` is set when the judge's version has a calibration profile and at least 30 cases
    were scored (:func:`ragpulse.calibration.live.with_corrected`). ``retrieval_misses`` /
    ``generation_errors``: claim causes of its failing judgements, for judges that check claims
    (``None`` for the others)."""

    mean: float | None = None
    pass_rate: float | None = None
    coverage: float = 0.0
    scored: int = 0
    pass_rate_corrected: CorrectedRate | None = None
    retrieval_misses: int | None = None
    generation_errors: int | None = None


class CaseJudgement(BaseModel):
    """One judge's verdict on a case: ``score`` (0–1, ``None`` unless ``ok``), ``passed``, ``status``,
    ``reason``."""

    model_config = _CONFIG

    score: float | None = None
    passed: bool | None = None
    status: JudgementStatus
    reason: str | None = None

    @property
    def outcome(self) -> CountKey:
        """``pass``/``fail`` for a scored judgement, ``abstained`` for one skipped because the answer abstained,
        else its status (``error``/``skipped``); as :attr:`ragpulse.model.Judgement.outcome`."""
        if self.status is JudgementStatus.OK:
            return "pass" if self.passed else "fail"
        if self.status is JudgementStatus.ERROR:
            return "error"
        return "abstained" if self.reason_code == ABSTAINED else "skipped"

    @property
    def reason_code(self) -> str:
        """The head of ``reason`` (text before the first ``:``)."""
        return (self.reason or "").split(":", 1)[0].strip()


class ClaimCauses(BaseModel):
    """Causes of the unsupported claims of a case's failing judgements (``flags.attribution``, summed over
    them; docs/llm-judges.md "Claim causes"): claims that a reference context which was not retrieved
    supports (``retrieval_misses``) and claims that no reference context supports (``generation_errors``)."""

    model_config = _CONFIG

    retrieval_misses: int = 0
    generation_errors: int = 0


class CaseRow(BaseModel):
    """One test case of a run: identity, trace outcome, whether it passed, how many judgements were scored,
    why it failed or was not scored (``reason``), judge → :class:`CaseJudgement`, ``claim_causes``
    (:class:`ClaimCauses`; left out of the JSON when no failing judgement of the case decided a cause) and
    ``abstained`` (the answer declined to answer: the case is left out of the pass rate; in the JSON only when
    true)."""

    model_config = _CONFIG

    case_id: str
    trace_id: str | None = None
    outcome: TraceOutcome = TraceOutcome.EVALUATED
    passed: bool = False
    scored: int = 0
    reason: str | None = None
    judgements: dict[str, CaseJudgement] = Field(default_factory=dict)
    claim_causes: ClaimCauses | None = Field(default=None, exclude_if=lambda v: v is None)
    abstained: bool = Field(default=False, exclude_if=lambda v: not v)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> CaseVerdict:
        """``pass``, ``fail`` or ``not_judged`` (:data:`CaseVerdict`), from ``passed``, ``abstained`` and the
        judgements; in the JSON form (computed again when a stored row is read)."""
        if self.passed:
            return "pass"
        if not self.abstained and any(j.outcome == "fail" for j in self.judgements.values()):
            return "fail"
        return "not_judged"


class CaseDiagnosis(BaseModel):
    """The weak side of one case, why, and the retrieval/generation scores it was decided on (0–1)."""

    model_config = _CONFIG

    case_id: str
    weak_side: WeakSide
    reason: str
    retrieval: dict[str, float] = Field(default_factory=dict)
    generation: dict[str, float] = Field(default_factory=dict)


class DiagnosisOverall(BaseModel):
    """The weak side of the run, a one-line summary, cases per side and each metric's mean (0–1)."""

    model_config = _CONFIG

    weak_side: WeakSide = "undetermined"
    summary: str = ""
    cases: dict[str, int] = Field(default_factory=dict)
    means: dict[str, float] = Field(default_factory=dict)


class Diagnosis(BaseModel):
    """Which side of the RAG system is weak, overall and per case."""

    model_config = _CONFIG

    overall: DiagnosisOverall = Field(default_factory=DiagnosisOverall)
    cases: list[CaseDiagnosis] = Field(default_factory=list)


#: Run-level metrics of a threshold (``pass_rate=0.8``).
RUN_METRICS = ("pass_rate", "coverage")

#: Per-judge metric suffixes (``JUDGE.<suffix>``) and how to read them; a bare ``JUDGE`` is ``JUDGE.mean``.
#: Suffixes may contain dots: names are parsed from the right, longest suffix first.
JUDGE_FIELDS: dict[str, Callable[[JudgeStats], float | None]] = {
    "mean": lambda s: s.mean,
    "pass_rate": lambda s: s.pass_rate,
    "coverage": lambda s: s.coverage,
    "pass_rate_corrected": lambda s: s.pass_rate_corrected.value if s.pass_rate_corrected else None,
    "pass_rate_corrected.lower": lambda s: s.pass_rate_corrected.lower if s.pass_rate_corrected else None,
    "pass_rate_corrected.upper": lambda s: s.pass_rate_corrected.upper if s.pass_rate_corrected else None,
}


class MetricRef(BaseModel):
    """A metric of a run report: run-level (``judge`` is ``None``; ``field`` in :data:`RUN_METRICS`) or
    ``field`` (a :data:`JUDGE_FIELDS` key) of ``judge``."""

    model_config = ConfigDict(frozen=True)

    judge: str | None
    field: str

    def __str__(self) -> str:
        if self.judge is None:
            return self.field
        return self.judge if self.field == "mean" else f"{self.judge}.{self.field}"


def parse_metric(name: str) -> MetricRef:
    """``pass_rate`` / ``coverage`` → run metric; ``JUDGE.SUFFIX`` (suffix matched from the right, longest
    first, against :data:`JUDGE_FIELDS`) → that judge field; anything else → ``JUDGE`` (mean score)."""
    if name in RUN_METRICS:
        return MetricRef(judge=None, field=name)
    for suffix in sorted(JUDGE_FIELDS, key=len, reverse=True):
        tail = "." + suffix
        if name.endswith(tail) and len(name) > len(tail):
            return MetricRef(judge=name[: -len(tail)], field=suffix)
    return MetricRef(judge=name, field="mean")


class RunReport(BaseModel):
    """The report of one run (see :mod:`ragpulse.runs.reports` for the definitions).

    Attributes:
        run_id / test_set / status: identity and final status of the run.
        cases_total: cases in the run.
        cases_abstained: cases whose answer abstained ("I don't know"), left out of ``pass_rate``.
        pass_rate: passed cases / (cases − abstained cases), 0–1 (0.0 when no case is left).
        coverage: cases with a scored judgement / cases, 0–1 (0.0 for an empty run).
        averages: judge → mean score over the cases it scored (``None`` when none).
        counts: judgements by outcome; tokens: judge-model tokens.
        retrieval_misses / generation_errors: unsupported claims of failing faithfulness judgements that a
            not-retrieved reference context supports / that none does (all judges).
        wall_seconds: wall time of the run, seconds; for a run without a stored report (failed, interrupted,
            still running) the time it ran: started → finished, or → its last heartbeat (``wall_until``).
        wall_until: ``finished`` or ``last heartbeat`` when ``wall_seconds`` is that elapsed time (``None``:
            measured by the replay itself).
        judges: judge → :class:`JudgeStats`, in display order: the run's judges as configured
            (``enabled_judges`` / ``--judges``), kept through storage by ``judge_order``.
        judge_order: the judges' names in that order (a JSON list: PostgreSQL's ``jsonb`` does not keep the key
            order of ``judges``); reports stored before it existed keep their stored order.
        judges_added: judges added to ``enabled_judges`` for this test set.
        cases_passed: cases that passed (``None`` in reports stored before it existed).
        cases_not_judged: cases with verdict ``not_judged`` (:data:`CaseVerdict`: abstained, or only error or
            skipped judgements besides passing ones, or not evaluable); neither passed nor failed. ``None`` in
            reports stored before it existed (their ``cases_failing`` counts them as failing).
        cases: the case rows the report carries: with ``case_source="report"`` one :class:`CaseRow` per case,
            in test-set order; with ``case_source="store"`` (replays since issue 13 "Scale") only the cases
            that are not in the store (their write failed), the others are read from the store page by page
            (:func:`ragpulse.runs.reports.iter_case_rows` / ``case_rows_page``).
        case_source: where the per-case rows are (above).
        diagnosis: weak side (retrieval or generation); ``None`` in reports stored before it existed. With
            ``case_source="store"`` its ``cases`` list is empty: each row's diagnosis is
            :func:`ragpulse.runs.diagnosis.diagnose_case` of the row (the JSON report writes them).
        via: ``kafka``/``otlp`` when the run went through a running ``serve``.
        error: why the run failed (reports of ``failed`` runs).
    """

    model_config = _CONFIG

    run_id: str
    test_set: str
    status: RunStatus = RunStatus.COMPLETED
    cases_total: int = 0
    cases_passed: int | None = None
    cases_not_judged: int | None = None
    cases_abstained: int = 0
    pass_rate: float = 0.0
    coverage: float = 0.0
    averages: dict[str, float | None] = Field(default_factory=dict)
    counts: Counts = Field(default_factory=Counts)
    tokens: Tokens = Field(default_factory=Tokens)
    retrieval_misses: int = 0
    generation_errors: int = 0
    wall_seconds: float = 0.0
    wall_until: Literal["finished", "last heartbeat"] | None = None
    judges: dict[str, JudgeStats] = Field(default_factory=dict)
    judge_order: list[str] = Field(default_factory=list)
    judges_added: list[str] = Field(default_factory=list)
    cases: list[CaseRow] = Field(default_factory=list)
    case_source: Literal["report", "store"] = "report"
    diagnosis: Diagnosis | None = None
    via: str | None = None
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _in_judge_order(cls, data: Any) -> Any:
        """The one place that orders a report's judges (``replay``, ``runs show``, the portal): ``judges`` and
        ``averages`` in ``judge_order`` (judges it does not name after, as they come); without it,
        ``judge_order`` is the order of ``judges``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("judges"), Mapping):
            return data
        data = dict(data)
        judges = data["judges"]
        given = [n for n in data.get("judge_order") or () if n in judges]
        order = list(dict.fromkeys([*given, *judges]))
        data["judge_order"] = order
        data["judges"] = {n: judges[n] for n in order}
        averages = data.get("averages")
        if isinstance(averages, Mapping):
            data["averages"] = {
                **{n: averages[n] for n in order if n in averages},
                **{k: v for k, v in averages.items() if k not in judges},
            }
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunReport:
        """Read a report as stored in the runs table (any earlier version).

        Raises:
            pydantic.ValidationError: ``data`` is not a run report.
        """
        return cls.model_validate(dict(data))

    def to_json(self) -> dict[str, Any]:
        """The JSON form: the keys of :data:`~ragpulse.runs.reports.REPORT_KEYS` and the rest; ``via`` and
        ``error`` and ``wall_until`` only when set."""
        exclude = {k for k in ("via", "error", "wall_until") if getattr(self, k) is None}
        return self.model_dump(mode="json", by_alias=True, exclude=exclude)

    @property
    def failing_cases(self) -> list[CaseRow]:
        """Cases of :attr:`cases` with verdict ``fail``, in run order (with ``case_source="store"`` only those
        not in the store: read the others with :func:`ragpulse.runs.reports.iter_case_rows`)."""
        return [c for c in self.cases if c.verdict == "fail"]

    @property
    def not_judged_cases(self) -> list[CaseRow]:
        """Cases of :attr:`cases` with verdict ``not_judged``, in run order (as :attr:`failing_cases`)."""
        return [c for c in self.cases if c.verdict == "not_judged"]

    @property
    def cases_failing(self) -> int:
        """How many cases failed (verdict ``fail``; in reports stored before ``cases_not_judged`` existed,
        every case that did not pass)."""
        if self.cases_passed is not None:
            return self.cases_total - self.cases_passed - (self.cases_not_judged or 0)
        return len(self.failing_cases)

    @property
    def all_errors(self) -> bool:
        """True when judges were asked and none answered: at least one ``error`` judgement and no scored one
        (``skipped`` ones, e.g. ``no_reference``, aside) — the judge model is down or rejects every call."""
        c = self.counts
        return c.error > 0 and c.pass_ == 0 and c.fail == 0

    def value(self, metric: MetricRef) -> float | None:
        """The report's value of ``metric`` (0–1), or ``None`` when the run has none (a judge that scored no
        case or is not in the run)."""
        if metric.judge is None:
            v: float | None = getattr(self, metric.field)
            return v
        stats = self.judges.get(metric.judge)
        read = JUDGE_FIELDS.get(metric.field)
        if stats is None or read is None:
            return None
        return read(stats)
