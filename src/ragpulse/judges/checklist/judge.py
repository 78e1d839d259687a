"""The checklist judge: a business judge built from a :class:`~ragpulse.judges.checklist.spec.Checklist`.

A trace outside the checklist's apps/scenarios is ``skipped``/``not_applicable``; then the shared rules.
Rule items are checked (:mod:`ragpulse.judges.checklist.rules`); rubric items are asked to the judge model
(one call per item, concurrently), else checked with their ``offline`` rule, else not judged. score = items
passed / items judged (mode ``all``: threshold 1.0); no judged item → ``skipped``/``no_judged_items``; an
unusable rubric reply makes the judgement an ``error``. ``declared_version`` is the checklist's ``version``;
``flags.items`` lists ``{"id", "kind", "passed", "reason", "by"}`` per item.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.checklist.rules import check_rule
from ragpulse.judges.checklist.spec import Checklist, RubricItem, load_checklists
from ragpulse.judges.frame import REPLY_PROTOCOL, CallLog, Decision, JudgeBase
from ragpulse.judges.model.parsing import extract_json, normalize_verdict_word
from ragpulse.judges.model.prompts import JSON_SYSTEM, prompt_pair_text
from ragpulse.model import Backend, Judgement, Trace

__all__ = ["ChecklistJudge", "build_checklist_judge"]


class ChecklistJudge(JudgeBase):
    """JudgeBase named after its checklist (see the module docstring).

    Args:
        checklist: the parsed checklist.
        settings: for the prompt override directory and language.
        client: the shared judge-model client (rubric items), when a model is configured; ``None`` → offline
            rules only.
    """

    SYSTEM = JSON_SYSTEM
    TEMPLATES = ("checklist_item",)

    def __init__(self, checklist: Checklist, settings: Settings, *, client: Any = None) -> None:
        self.checklist = checklist
        self.name = checklist.name
        super().__init__(settings, {"threshold": checklist.effective_threshold}, client=client)

    def configure(self) -> None:
        if not any(isinstance(i, RubricItem) for i in self.checklist.items):
            self.client = None

    def version_settings(self) -> dict[str, Any]:
        vs: dict[str, Any] = {
            "checklist": self.checklist.model_dump(mode="json"),
            "threshold": self.threshold,
            "model": self.model,
        }
        if self.client is not None:
            vs["prompt"] = prompt_pair_text(self.templates, "checklist_item")
            vs["reply_protocol"] = REPLY_PROTOCOL
        return vs

    def identity(self, backend: Backend | None = None) -> dict[str, Any]:
        return {**super().identity(backend), "declared_version": self.checklist.version}

    def precheck(self, trace: Trace) -> Judgement | None:
        if not self.checklist.applies_to(trace.app, trace.scenario):
            return self.skipped(
                f"not_applicable: app={trace.app!r} scenario={trace.scenario!r} not in the checklist's scope"
            )
        return super().precheck(trace)

    async def decide(self, trace: Trace, log: CallLog) -> Decision | Judgement:
        answer = trace.answer or ""
        rubric_items = [i for i in self.checklist.items if isinstance(i, RubricItem)]
        verdicts: dict[str, tuple[bool, str]] = {}
        if self.client is not None and rubric_items:
            got = await asyncio.gather(*(self._ask_item(trace, i, log) for i in rubric_items))
            verdicts = dict(zip((i.id for i in rubric_items), got, strict=True))
        results: list[dict[str, Any]] = []
        for item in self.checklist.items:
            if not isinstance(item, RubricItem):
                passed, why = check_rule(item, answer)
                results.append(
                    {"id": item.id, "kind": item.kind, "passed": passed, "reason": why, "by": "rule"}
                )
                continue
            res: dict[str, Any] = {"id": item.id, "kind": "rubric"}
            if item.id in verdicts:
                res.update(zip(("passed", "reason"), verdicts[item.id], strict=True), by="llm")
            elif item.offline is not None:
                res.update(
                    zip(("passed", "reason"), check_rule(item.offline, answer), strict=True), by="offline"
                )
            else:
                res.update(passed=None, reason="no judge model", by="none")
            results.append(res)
        judged = [r for r in results if r["passed"] is not None]
        if not judged:
            return self.skipped("no_judged_items: rubric items need a judge model")
        n_pass = sum(1 for r in judged if r["passed"])
        failed = [f"{r['id']} ({r['reason']})" for r in judged if not r["passed"]]
        reason = f"{n_pass}/{len(judged)} items passed"
        if failed:
            reason += "; failed: " + "; ".join(failed)
        not_judged = [r["id"] for r in results if r["passed"] is None]
        if not_judged:
            reason += f"; not judged: {', '.join(not_judged)}"
        used_llm = bool(verdicts)
        return Decision(
            n_pass / len(judged),
            reason,
            "llm+rules" if used_llm else "rules",
            {"items": results},
            Backend.LLM if used_llm else Backend.HEURISTIC,
        )

    async def _ask_item(self, trace: Trace, item: RubricItem, log: CallLog) -> tuple[bool, str]:
        question, answer = trace.question or "", trace.answer or ""
        text = await self.ask(
            log, "checklist_item", self.lang(trace), requirement=item.rubric, question=question, answer=answer
        )
        obj = extract_json(text, required=("pass", "passed"), untrusted=[question, answer])
        passed = normalize_verdict_word(obj.get("pass", obj.get("passed")))
        if passed is None:
            raise JudgeError("unparseable", f"rubric reply without a boolean 'pass': {text[:120]!r}")
        return passed, str(obj.get("reason", "")).strip()[:200] or ("meets" if passed else "does not meet")


def build_checklist_judge(settings: Settings, name: str, *, client: Any = None) -> ChecklistJudge:
    """Build the judge of checklist ``name`` from ``settings.judge.checklists`` (see
    :func:`ragpulse.judges.checklist.spec.load_checklists`).

    Raises:
        ConfigError: the checklist is unknown, its file is missing, or its definition is invalid.
    """
    raw = settings.judge.checklists.get(name)
    if raw is None:
        raise ConfigError(f"unknown checklist {name!r}")
    checklist = load_checklists({name: raw})[name]
    return ChecklistJudge(checklist, settings, client=client)
