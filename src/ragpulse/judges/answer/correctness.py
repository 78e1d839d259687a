"""Answer correctness (Ragas definition): factual F1 of statements combined with semantic similarity.

Answer and ground-truth statements are sorted into TP (answer statements the ground truth confirms), FP (not
confirmed) and FN (ground-truth statements the answer lacks) — by one judge-model call, or lexically
(:func:`~ragpulse.judges.text.statements.supported`, coverage ≥ ``min_coverage``, default 0.6).
``F1 = TP / (TP + 0.5·(FP + FN))``; score = ``(w_f1·F1 + w_sim·similarity) / (w_f1 + w_sim)``, option
``weights`` default ``[0.75, 0.25]``; similarity from embeddings when configured, else lexical
(:mod:`ragpulse.judges.answer.similarity`). Ground truth: the expected answer, else the keywords. No statements
on either side → ``skipped``/``no_statements`` (a model reply without any is ``unparseable``). Threshold 0.5;
details in ``docs/reference-metrics.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragpulse.config import Settings
from ragpulse.errors import JudgeError
from ragpulse.judges.answer.similarity import Similarity, similarity_from_settings
from ragpulse.judges.formulas import answer_correctness, factual_f1
from ragpulse.judges.frame import REPLY_PROTOCOL, UNREADABLE_SCRIPTS, CallLog, Decision, JudgeBase
from ragpulse.judges.model.parsing import extract_json
from ragpulse.judges.model.prompts import JSON_SYSTEM, prompt_pair_text
from ragpulse.judges.options import AnswerCorrectnessOptions
from ragpulse.judges.text.statements import split_statements, supported
from ragpulse.model import Judgement, Trace

__all__ = ["AnswerCorrectnessJudge"]


class AnswerCorrectnessJudge(JudgeBase):
    """Ragas answer correctness (see the module docstring). Default threshold 0.5. ``similarity`` replaces the
    one the settings name (embeddings or lexical)."""

    name = "answer_correctness"
    Options = AnswerCorrectnessOptions
    options: AnswerCorrectnessOptions
    needs_reference = True
    TEMPLATES = ("answer_correctness",)
    SYSTEM = JSON_SYSTEM

    def __init__(
        self,
        settings: Settings,
        options: Mapping[str, Any] | AnswerCorrectnessOptions | None = None,
        *,
        client: Any = None,
        similarity: Similarity | None = None,
    ) -> None:
        self.similarity = similarity
        super().__init__(settings, options, client=client)

    def configure(self) -> None:
        self.weights = self.options.weights
        self.sim = self.similarity or similarity_from_settings(self.settings)
        cov = self.options.min_coverage
        self.min_coverage = 0.6 if cov is None else cov

    def version_settings(self) -> dict[str, Any]:
        vs: dict[str, Any] = {
            "weights": list(self.weights),
            "similarity": self.sim.method if self.weights[1] > 0 else None,
            "min_coverage": self.min_coverage,
            "threshold": self.threshold,
            "model": self.model,
            **self.options.model_dump(include={"language", "max_tokens"}, exclude_none=True),
        }
        if self.client is not None:
            vs["prompt"] = prompt_pair_text(self.templates, "answer_correctness")
            vs["reply_protocol"] = REPLY_PROTOCOL
        else:
            vs["unreadable_scripts"] = UNREADABLE_SCRIPTS
        return vs

    async def decide(self, trace: Trace, log: CallLog) -> Decision | Judgement:
        answer = trace.answer or ""
        self.require_short("expected answer", trace.expected_answer)
        self.require_short("keyword", *(trace.keywords or ()))
        if trace.expected_answer and trace.expected_answer.strip():
            reference = trace.expected_answer
            ref_stmts = split_statements(reference)
        else:
            ref_stmts = list(trace.keywords or ())
            reference = "；".join(ref_stmts)
        if self.client is not None:
            tp, fp, fn = await self._classify_llm(trace, answer, reference, log)
        else:
            if " ".join(answer.split()) != " ".join(reference.split()):  # identical texts: any script
                self.require_readable(answer, reference)
            tp, fp, fn = self._classify_lexical(answer, ref_stmts)
        f1 = factual_f1(len(tp), len(fp), len(fn))
        if f1 is None:
            if self.client is not None:
                raise JudgeError("unparseable", "the judge reply holds no statements")
            return self.skipped("no_statements: neither answer nor reference has statements")
        sim = await self.sim.similarity(answer, reference) if self.weights[1] > 0 else None
        score = answer_correctness(f1, sim, self.weights)
        reason = f"TP={len(tp)} FP={len(fp)} FN={len(fn)}, F1={f1:.4f}"
        if sim is not None:
            reason += f", similarity={sim:.4f} ({self.sim.method})"
        if fp:
            reason += "; not in reference: " + " | ".join(fp)
        if fn:
            reason += "; missing: " + " | ".join(fn)
        return Decision(score, reason, "llm" if self.client is not None else "heuristic")

    async def aclose(self) -> None:
        """Close the embeddings client, if any (idempotent)."""
        closer = getattr(self.sim, "aclose", None)
        if closer is not None:
            await closer()

    def _classify_lexical(self, answer: str, ref_stmts: list[str]) -> tuple[list[str], list[str], list[str]]:
        ans_stmts = split_statements(answer)
        tp = [s for s in ans_stmts if supported(s, ref_stmts, self.min_coverage)]
        fp = [s for s in ans_stmts if s not in tp]
        fn = [r for r in ref_stmts if not supported(r, [answer], self.min_coverage)]
        return tp, fp, fn

    async def _classify_llm(
        self, trace: Trace, answer: str, reference: str, log: CallLog
    ) -> tuple[list[str], list[str], list[str]]:
        question = trace.question or ""
        text = await self.ask(
            log, "answer_correctness", self.lang(trace), question=question, answer=answer, reference=reference
        )
        obj = extract_json(text, untrusted=[question, answer, reference])
        out: list[list[str]] = []
        for key in ("tp", "fp", "fn"):
            v = obj.get(key, obj.get(key.upper(), []))
            if not isinstance(v, list):
                raise JudgeError("unparseable", f"{key!r} is not a list in the judge reply")
            out.append([str(x) for x in v if str(x).strip()])
        return out[0], out[1], out[2]
