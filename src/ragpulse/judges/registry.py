"""Build the configured judges: built-ins (LLM or heuristic backend), checklists and plugins.

Built-ins are a table, :data:`BUILTIN_JUDGES`: name → :class:`JudgeSpec` naming the class (or factory) for
each backend as ``"module:Class"``, imported lazily. With ``settings.judge_model`` set a judge gets its
``llm`` class, called as ``cls(settings, options, client=client)`` with the one
:class:`~ragpulse.judges.model.client.LLMClient` shared by every judge of the :func:`build_judges` call;
else its ``heuristic`` class, ``cls(settings, options)``. ``options = settings.judges.get(name, {})``, and the
options of every configured built-in judge are validated (:mod:`ragpulse.judges.options`) whatever the
backend and whether or not it is enabled. Every key of ``settings.checklists`` is a judge too
(:class:`~ragpulse.judges.checklist.judge.ChecklistJudge`). Plugins: entry points of the group
``ragpulse.judges`` named after the judge, whose object is ``factory(settings, options) -> Judge`` (normally
a :class:`ragpulse.judges.frame.Judge`); built-in names cannot be taken over.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.options import OPTIONS_BY_JUDGE, parse_options
from ragpulse.logging import get_logger
from ragpulse.protocols import Judge

__all__ = [
    "BUILTIN_JUDGES",
    "ENTRY_POINT_GROUP",
    "JudgeSpec",
    "available_judges",
    "build_judges",
    "close_judges",
]

_log = get_logger("ragpulse.judges.registry")

ENTRY_POINT_GROUP = "ragpulse.judges"

#: A plugin factory: ``(settings, options) -> Judge``.
JudgeFactory = Callable[[Settings, Mapping[str, Any]], Judge]


@dataclass(frozen=True)
class JudgeSpec:
    """The classes implementing one built-in judge, as ``"module:Class"`` (``None``: no such backend)."""

    llm: str | None = None
    heuristic: str | None = None


def _one_class(path: str) -> JudgeSpec:
    """A judge whose one class serves both backends (it decides per trace: labels, model or heuristic)."""
    return JudgeSpec(llm=path, heuristic=path)


_ANSWER = "ragpulse.judges.answer"
_RETRIEVAL = "ragpulse.judges.retrieval.context"

#: Built-in judges. Extend by adding rows.
BUILTIN_JUDGES: dict[str, JudgeSpec] = {
    "relevancy": JudgeSpec(
        llm=f"{_ANSWER}.relevancy:LLMRelevancyJudge", heuristic=f"{_ANSWER}.relevancy:HeuristicRelevancyJudge"
    ),
    "faithfulness": JudgeSpec(
        llm=f"{_ANSWER}.faithfulness:LLMFaithfulnessJudge",
        heuristic=f"{_ANSWER}.faithfulness:HeuristicFaithfulnessJudge",
    ),
    "keyword": JudgeSpec(heuristic=f"{_ANSWER}.keyword:KeywordJudge"),
    # Reference metrics (docs/reference-metrics.md).
    "context_precision": _one_class(f"{_RETRIEVAL}:ContextPrecisionJudge"),
    "context_recall": _one_class(f"{_RETRIEVAL}:ContextRecallJudge"),
    "context_relevance": _one_class(f"{_RETRIEVAL}:ContextRelevanceJudge"),
    "answer_correctness": _one_class(f"{_ANSWER}.correctness:AnswerCorrectnessJudge"),
}


def _plugins() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTIN_JUDGES}


def available_judges() -> list[str]:
    """Names of every judge that :func:`build_judges` can build: built-ins, then plugins, sorted."""
    return sorted(BUILTIN_JUDGES) + sorted(_plugins())


def _load_class(path: str, judge: str) -> Any:
    module, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"judge {judge!r}: cannot load {path} ({e})") from e


def build_judges(
    settings: Settings, names: Sequence[str] | None = None, *, client: LLMClient | None = None
) -> dict[str, Judge]:
    """Build the named judges (default ``settings.enabled_judges``), in the given order.

    Args:
        settings: process settings; ``settings.judge_model`` picks the LLM backend.
        names: judge names; duplicates are built once.
        client: the LLM client to share (default: one new :class:`LLMClient`, made only if an LLM judge is
            built).

    Returns:
        ``{name: judge}``.

    Raises:
        ConfigError: an unknown judge name, a judge that needs a judge model when none is configured, a bad
            option or prompt template, or a plugin that fails to load or returns no :class:`Judge`.
    """
    wanted = list(dict.fromkeys(names if names is not None else settings.enabled_judges))
    plugins = _plugins()
    clash = sorted(set(settings.checklists) & set(BUILTIN_JUDGES))
    if clash:
        raise ConfigError(f"checklist name(s) {', '.join(clash)} clash with built-in judges")
    unknown = [
        n for n in wanted if n not in BUILTIN_JUDGES and n not in plugins and n not in settings.checklists
    ]
    if unknown:
        raise ConfigError(
            f"unknown judge(s) {', '.join(unknown)}; available: {', '.join(available_judges())}"
        )
    # Options for a judge that does not exist (a typo such as ``faithfullness: {threshold: 0.9}``) would
    # otherwise be ignored silently while the real judge runs with its defaults.
    stray = sorted(
        n
        for n in settings.judges
        if n not in BUILTIN_JUDGES and n not in plugins and n not in settings.checklists
    )
    if stray:
        raise ConfigError(
            f"judges: options for unknown judge(s) {', '.join(stray)}; available: {', '.join(available_judges())}"
        )
    for name, raw in settings.judges.items():
        if name in OPTIONS_BY_JUDGE:
            parse_options(name, OPTIONS_BY_JUDGE[name], raw)
    judges: dict[str, Judge] = {}
    for name in wanted:
        options = settings.judges.get(name, {})
        spec = BUILTIN_JUDGES.get(name)
        judge: Any
        if spec is None and name in settings.checklists:
            from ragpulse.judges.checklist.judge import build_checklist_judge

            if settings.uses_llm and client is None:
                client = LLMClient(settings)
            judge = build_checklist_judge(settings, name, client=client if settings.uses_llm else None)
        elif spec is None:
            try:
                factory = plugins[name].load()
                judge = factory(settings, options)
            except ConfigError:
                raise
            except Exception as e:
                raise ConfigError(f"judge plugin {name!r} failed to load: {e}") from e
        elif spec.llm is not None and (settings.uses_llm or spec.heuristic is None):
            if not settings.uses_llm:
                raise ConfigError(f"judge {name!r} needs a judge model (RAGPULSE_JUDGE_MODEL)")
            if client is None:
                client = LLMClient(settings)
            judge = _load_class(spec.llm, name)(settings, options, client=client)
        else:
            assert spec.heuristic is not None
            judge = _load_class(spec.heuristic, name)(settings, options)
        if not isinstance(judge, Judge):
            raise ConfigError(f"judge {name!r} does not implement the Judge protocol")
        judges[name] = judge
        _log.info("judge_built", judge=name, backend=str(judge.backend), version=judge.version)
    return judges


async def close_judges(judges: Mapping[str, Judge]) -> None:
    """Release what the judges hold; call once when done with them (idempotent).

    Closes every :class:`LLMClient` the judges use (``judge.client``), each once, and awaits ``aclose()`` of
    every judge that has one (embeddings clients, plugins).
    Never raises: a failing close is logged.
    """
    clients: dict[int, LLMClient] = {}
    others: list[tuple[str, Any]] = []
    for name, judge in judges.items():
        c = getattr(judge, "client", None)
        if isinstance(c, LLMClient):
            clients[id(c)] = c
        closer = getattr(judge, "aclose", None)
        if closer is not None:  # idempotent: also releases what a judge holds beside the LLM client
            others.append((name, closer))
    for c in clients.values():
        try:
            await c.aclose()
        except Exception:
            _log.exception("judge_client_close_failed")
    for name, closer in others:
        try:
            await closer()
        except Exception:
            _log.exception("judge_close_failed", judge=name)
