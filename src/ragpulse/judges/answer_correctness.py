"""Answer correctness (Ragas definition): factual F1 of statements combined with semantic similarity.

Statements of the answer and of the ground truth are classified:

- TP: answer statements the ground truth confirms; FP: answer statements it does not confirm;
  FN: ground-truth statements the answer lacks.
- ``F1 = TP / (TP + 0.5·(FP + FN))``; ``score = (w_f1·F1 + w_sim·similarity) / (w_f1 + w_sim)``, weights
  ``(0.75, 0.25)`` by default (option ``weights: [w_f1, w_sim]``; ``w_sim = 0`` turns similarity off).

Backends: with a judge model, one call returns the three statement lists; offline (``heuristic``), the
statements are cut by :func:`ragpulse.judges.lexsupport.split_statements` and an answer statement is a TP
when the ground truth supports it lexically (:func:`~ragpulse.judges.lexsupport.supported`, coverage ≥
``min_coverage``, default 0.6), else an FP; a ground-truth statement not supported by the answer is an FN.
Similarity: cosine of embeddings when ``embeddings_base_url`` and ``embeddings_model`` are set, else the
lexical cosine of content tokens (:mod:`ragpulse.judges.embeddings`).

Ground truth: the expected answer, else the keywords (one statement each). None → ``skipped``/
``no_reference``. An abstaining or missing answer is ``skipped``. No statements on either side →
``skipped``/``no_statements``; a model reply with no statements at all is an ``error`` (``unparseable``).
Default threshold 0.5.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.base import ok, precheck, skipped
from ragpulse.judges.embeddings import Similarity, similarity_from_settings
from ragpulse.judges.lexsupport import split_statements, supported
from ragpulse.judges.refbase import FrameJudge, ModelCaller, ModelReply, check_options, resolve_caller
from ragpulse.judges.refmath import answer_correctness, factual_f1
from ragpulse.judges.refprompt import PromptPair, extract_json, load_prompts
from ragpulse.judges.text import detect_language
from ragpulse.model import Backend, Judgement, Trace

__all__ = ["AnswerCorrectnessJudge"]


class AnswerCorrectnessJudge(FrameJudge):
    """Ragas answer correctness (see the module docstring). Default threshold 0.5."""

    def __init__(
        self,
        settings: Settings,
        options: Mapping[str, Any] | None = None,
        *,
        client: object | None = None,
        caller: ModelCaller | None = None,
        similarity: Similarity | None = None,
    ) -> None:
        options = check_options(
            "answer_correctness", dict(options or {}), {"weights", "min_coverage", "threshold"}
        )
        caller = caller or resolve_caller(settings, client)
        w = options.get("weights", (0.75, 0.25))
        if not isinstance(w, list | tuple) or len(w) != 2:
            raise ConfigError("answer_correctness: weights must be [w_f1, w_sim]")
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in w):
            raise ConfigError("answer_correctness: weights must be numbers")
        self.weights = (float(w[0]), float(w[1]))
        if min(self.weights) < 0 or sum(self.weights) == 0:
            raise ConfigError("answer_correctness: weights must be >= 0 and not both 0")
        self.caller = caller
        self.sim = similarity or similarity_from_settings(settings)
        self.min_coverage = float(options.get("min_coverage", 0.6))
        self.language = settings.judge.language
        self.prompts: PromptPair | None = None
        vs: dict[str, Any] = {
            "weights": list(self.weights),
            "similarity": self.sim.method if self.weights[1] > 0 else None,
            "min_coverage": self.min_coverage,
        }
        if caller is not None:
            self.prompts = load_prompts(
                "answer_correctness", ("question", "answer", "reference"), settings.judge.prompts_dir
            )
            vs["prompt"] = self.prompts.text
        super().__init__(
            name="answer_correctness",
            backend=Backend.LLM if caller is not None else Backend.HEURISTIC,
            threshold=float(options.get("threshold", 0.5)),
            version_settings=vs,
            model=caller.model if caller is not None else None,
        )

    async def _decide(self, trace: Trace) -> Judgement:
        pre = precheck(
            trace,
            judge=self.name,
            version=self.version,
            backend=self.backend,
            threshold=self.threshold,
            model=self.model,
            needs_reference=True,
        )
        if pre is not None:
            return pre
        answer = trace.answer or ""
        if trace.expected_answer and trace.expected_answer.strip():
            reference = trace.expected_answer
            ref_stmts = split_statements(reference)
        else:
            ref_stmts = list(trace.keywords or ())
            reference = "；".join(ref_stmts)
        reply: ModelReply | None = None
        if self.caller is not None:
            tp, fp, fn, reply = await self._classify_llm(trace, answer, reference)
        else:
            tp, fp, fn = self._classify_lexical(answer, ref_stmts)
        f1 = factual_f1(len(tp), len(fp), len(fn))
        if f1 is None:
            if reply is not None:
                raise JudgeError("unparseable", "the judge reply holds no statements")
            return skipped(
                reason="no_statements: neither answer nor reference has statements", **self._common()
            )
        sim = await self.sim.similarity(answer, reference) if self.weights[1] > 0 else None
        score = answer_correctness(f1, sim, self.weights)
        reason = f"TP={len(tp)} FP={len(fp)} FN={len(fn)}, F1={f1:.4f}"
        if sim is not None:
            reason += f", similarity={sim:.4f} ({self.sim.method})"
        if fp:
            reason += "; not in reference: " + " | ".join(fp)
        if fn:
            reason += "; missing: " + " | ".join(fn)
        extra: dict[str, Any] = {}
        if reply is not None:
            extra = {
                "raw_output": reply.text,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
            }
        return ok(
            score=score,
            reason=reason,
            flags=self._flags(reply, decided_by="llm" if reply else "heuristic"),
            **self._common(),
            **extra,
        )

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
        self, trace: Trace, answer: str, reference: str
    ) -> tuple[list[str], list[str], list[str], ModelReply]:
        assert self.caller is not None
        assert self.prompts is not None
        lang = detect_language(trace.question or answer) if self.language == "auto" else self.language
        user = self.prompts.pick(lang).substitute(
            question=trace.question or "", answer=answer, reference=reference
        )
        reply = await self.caller.ask(judge=self.name, version=self.version, user=user)
        obj = extract_json(reply.text)
        out: list[list[str]] = []
        for key in ("tp", "fp", "fn"):
            v = obj.get(key, obj.get(key.upper(), []))
            if not isinstance(v, list):
                raise JudgeError("unparseable", f"{key!r} is not a list in the judge reply")
            out.append([str(x) for x in v if str(x).strip()])
        return out[0], out[1], out[2], reply
