"""The checklist judge: a business judge built from a :class:`~ragpulse.judges.checklist_spec.Checklist`.

Per trace:

1. the trace's app/scenario is not in the checklist's lists → ``skipped``/``not_applicable``; no answer →
   ``skipped``/``no_answer``; an abstaining answer → ``skipped``/``abstained`` (shared rules);
2. every rule item is checked (:mod:`ragpulse.judges.checklist_rules`); every rubric item is asked to the
   judge model (one call per item, concurrently, with a one-sentence reason), or, without a model, checked
   with its ``offline`` rule, or left out (not judged);
3. ``score = items passed / items judged`` (0–1); ``passed = score >= threshold`` (mode ``all``: threshold
   1.0, every judged item must pass). No judged item → ``skipped``/``no_judged_items``. A rubric item whose
   model reply is unusable makes the whole judgement an ``error`` (never a silent fail).

The judgement's ``declared_version`` is the checklist's ``version``; ``version`` is the computed hash of the
whole definition (items, mode, threshold, scope), the rubric prompt and the model. ``flags.items`` lists each
item as ``{"id", "kind", "passed" (bool or None), "reason", "by" ("rule" | "llm" | "offline" | "none")}``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.base import ok, precheck, skipped
from ragpulse.judges.checklist_rules import check_rule
from ragpulse.judges.checklist_spec import Checklist, RubricItem, load_checklists
from ragpulse.judges.refbase import FrameJudge, ModelCaller, ModelReply, resolve_caller
from ragpulse.judges.refprompt import PromptPair, as_bool, extract_json, load_prompts
from ragpulse.judges.text import detect_language
from ragpulse.model import Backend, Judgement, JudgementFlags, Trace

__all__ = ["ChecklistJudge", "build_checklist_judge"]


class ChecklistJudge(FrameJudge):
    """Judge named after its checklist (see the module docstring).

    Args:
        checklist: the parsed checklist.
        settings: for the prompt override directory and language.
        client: the shared :class:`ragpulse.judges.llm.LLMClient` (rubric items), when a model is configured.
        caller: any :class:`~ragpulse.judges.refbase.ModelCaller` instead of ``client``; neither → offline
            rules only.
    """

    def __init__(
        self,
        checklist: Checklist,
        settings: Settings,
        *,
        client: object | None = None,
        caller: ModelCaller | None = None,
    ) -> None:
        caller = caller or resolve_caller(settings, client)
        self.checklist = checklist
        has_rubric = any(isinstance(i, RubricItem) for i in checklist.items)
        self.caller = caller if has_rubric else None
        self.language = settings.judge.language
        self.prompts: PromptPair | None = None
        vs: dict[str, Any] = {"checklist": checklist.model_dump(mode="json")}
        if self.caller is not None:
            self.prompts = load_prompts(
                "checklist_item", ("requirement", "question", "answer"), settings.judge.prompts_dir
            )
            vs["prompt"] = self.prompts.text
        super().__init__(
            name=checklist.name,
            backend=Backend.LLM if self.caller is not None else Backend.HEURISTIC,
            threshold=checklist.effective_threshold,
            version_settings=vs,
            model=self.caller.model if self.caller is not None else None,
        )

    def _common(self, backend: Backend | None = None) -> dict[str, Any]:
        return {**super()._common(backend), "declared_version": self.checklist.version}

    def _error(self, reason: str, **extra: Any) -> Judgement:
        return super()._error(reason, declared_version=self.checklist.version, **extra)

    async def _decide(self, trace: Trace) -> Judgement:
        cl = self.checklist
        if not cl.applies_to(trace.app, trace.scenario):
            return skipped(
                reason=f"not_applicable: app={trace.app!r} scenario={trace.scenario!r} not in the checklist's scope",
                **self._common(),
            )
        pre = precheck(
            trace, judge=self.name, version=self.version, backend=self.backend, threshold=self.threshold
        )
        if pre is not None:
            return pre.model_copy(update={"model": self.model, "declared_version": cl.version})
        answer = trace.answer or ""
        rubric_items = [i for i in cl.items if isinstance(i, RubricItem)]
        replies: dict[str, ModelReply] = {}
        if self.caller is not None and rubric_items:
            got = await asyncio.gather(*(self._ask(trace, i) for i in rubric_items))
            replies = dict(zip((i.id for i in rubric_items), got, strict=True))
        results: list[dict[str, Any]] = []
        for item in cl.items:
            if isinstance(item, RubricItem):
                if item.id in replies:
                    passed, why = self._verdict(replies[item.id])
                    results.append(
                        {"id": item.id, "kind": "rubric", "passed": passed, "reason": why, "by": "llm"}
                    )
                elif item.offline is not None:
                    passed, why = check_rule(item.offline, answer)
                    results.append(
                        {"id": item.id, "kind": "rubric", "passed": passed, "reason": why, "by": "offline"}
                    )
                else:
                    results.append(
                        {
                            "id": item.id,
                            "kind": "rubric",
                            "passed": None,
                            "reason": "no judge model",
                            "by": "none",
                        }
                    )
            else:
                passed, why = check_rule(item, answer)
                results.append(
                    {"id": item.id, "kind": item.kind, "passed": passed, "reason": why, "by": "rule"}
                )
        judged = [r for r in results if r["passed"] is not None]
        if not judged:
            return skipped(reason="no_judged_items: rubric items need a judge model", **self._common())
        n_pass = sum(1 for r in judged if r["passed"])
        score = n_pass / len(judged)
        failed = [f"{r['id']} ({r['reason']})" for r in judged if not r["passed"]]
        reason = f"{n_pass}/{len(judged)} items passed"
        if failed:
            reason += "; failed: " + "; ".join(failed)
        not_judged = [r["id"] for r in results if r["passed"] is None]
        if not_judged:
            reason += f"; not judged: {', '.join(not_judged)}"
        used_llm = bool(replies)
        return ok(
            score=score,
            reason=reason,
            flags=JudgementFlags(
                decided_by="llm+rules" if used_llm else "rules",
                retries=sum(r.retries for r in replies.values()),
                items=results,
            ),
            prompt_tokens=sum(r.prompt_tokens for r in replies.values()),
            completion_tokens=sum(r.completion_tokens for r in replies.values()),
            raw_output="\n".join(f"{k}: {r.text}" for k, r in replies.items()) or None,
            **self._common(Backend.LLM if used_llm else Backend.HEURISTIC),
        )

    async def _ask(self, trace: Trace, item: RubricItem) -> ModelReply:
        assert self.caller is not None
        assert self.prompts is not None
        lang = detect_language(trace.question or trace.answer) if self.language == "auto" else self.language
        user = self.prompts.pick(lang).substitute(
            requirement=item.rubric, question=trace.question or "", answer=trace.answer or ""
        )
        return await self.caller.ask(judge=self.name, version=self.version, user=user)

    @staticmethod
    def _verdict(reply: ModelReply) -> tuple[bool, str]:
        obj = extract_json(reply.text)
        passed = as_bool(obj.get("pass", obj.get("passed")))
        if passed is None:
            raise JudgeError("unparseable", f"rubric reply without a boolean 'pass': {reply.text[:120]!r}")
        return passed, str(obj.get("reason", "")).strip()[:200] or ("meets" if passed else "does not meet")


def build_checklist_judge(settings: Settings, name: str, *, client: object | None = None) -> ChecklistJudge:
    """Build the judge of checklist ``name`` from ``settings.judge.checklists`` (see
    :func:`ragpulse.judges.checklist_spec.load_checklists`).

    Raises:
        ConfigError: the checklist is unknown, its file is missing, or its definition is invalid.
    """
    raw = settings.judge.checklists.get(name)
    if raw is None:
        raise ConfigError(f"unknown checklist {name!r}")
    checklist = load_checklists({name: raw})[name]
    return ChecklistJudge(checklist, settings, client=client)
