"""Build the configured judges: built-ins (LLM or heuristic backend), checklists and plugins.

Built-ins are a table, :data:`BUILTIN_JUDGES`: name → :class:`JudgeSpec` naming the class (or factory) for
each backend as ``"module:Class"``, imported lazily. With ``settings.judge.model`` set a judge gets its
``llm`` class, called as ``cls(settings, options, client=client)`` with the one
:class:`~ragpulse.judges.model.client.LLMClient` shared by every judge of the :func:`build_judges` call;
else its ``heuristic`` class, ``cls(settings, options)``. ``options = settings.judge.options.get(name, {})``, and the
options of every configured built-in judge are validated (:mod:`ragpulse.judges.options`) whatever the
backend and whether or not it is enabled. Every key of ``settings.judge.checklists`` is a judge too
(:class:`~ragpulse.judges.checklist.judge.ChecklistJudge`). Plugins: entry points of the group
``ragpulse.judges`` named after the judge, whose object is ``factory(settings, options) -> Judge`` (normally
a :class:`ragpulse.judges.frame.Judge`); built-in names cannot be taken over.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ragpulse.config import Settings
from ragpulse.errors import ConfigError
from ragpulse.judges.model.client import LLMClient
from ragpulse.judges.options import OPTIONS_BY_JUDGE, parse_options
from ragpulse.logging import get_logger
from ragpulse.protocols import Judge, TokenLedger

__all__ = [
    "BUILTIN_JUDGES",
    "ENTRY_POINT_GROUP",
    "JudgeSpec",
    "ShadowSpec",
    "available_judges",
    "build_judges",
    "close_judges",
    "opened_judges",
    "shadow_options",
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


def _build_cascade(
    settings: Settings, name: str, spec: JudgeSpec, options: Mapping[str, Any], client: LLMClient | None
) -> Judge:
    """The :class:`~ragpulse.judges.cascade.CascadeJudge` of ``judges.<name>.cascade`` (options validated)."""
    from ragpulse.judges.cascade import CascadeJudge

    cascade = options["cascade"]
    if spec.llm is None or client is None:
        raise ConfigError(f"judges.{name}.cascade: the main stage needs a judge model (RAGPULSE_JUDGE_MODEL)")
    main_options = {k: v for k, v in options.items() if k != "cascade"}
    main = _load_class(spec.llm, name)(settings, main_options, client=client)
    first_raw = cascade.get("first", "heuristic")
    if first_raw == "heuristic":
        if spec.heuristic is None or spec.heuristic == spec.llm:
            raise ConfigError(f"judges.{name}.cascade.first: {name!r} has no separate offline judge")
        first = _load_class(spec.heuristic, name)(settings, {})
    else:
        first = _load_class(spec.llm, name)(settings, dict(first_raw), client=client)
    low, high = cascade["band"]
    return CascadeJudge(name, first, main, (float(low), float(high)))


@dataclass(frozen=True)
class ShadowSpec:
    """A judge's shadow configuration (``judges.<name>.shadow``): the judge it builds and the share of judged
    traces it runs on (0–1; which traces: :func:`ragpulse.engine.engine.shadow_hit`)."""

    judge: Judge
    share: float


def shadow_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
    """``(options, share)`` of the shadow in a judge's ``options`` (``judges.<name>``): the main options
    without ``shadow``, overlaid by the shadow's (without ``share``) — what the shadow judge is built with, and
    what the main options become when the shadow is promoted (``ragpulse judges promote``)."""
    raw = dict(options["shadow"])
    share = float(raw.pop("share"))
    return {**{k: v for k, v in options.items() if k != "shadow"}, **raw}, share


def _build_shadow(
    settings: Settings, name: str, main: Judge, options: Mapping[str, Any], client: LLMClient | None
) -> ShadowSpec:
    """Build ``judges.<name>.shadow``: this judge with the main options overlaid by the shadow's (its own version)."""
    promoted, share = shadow_options(options)
    shadow_settings = settings.replaced(judges={**settings.judge.options, name: promoted})
    shadow = build_judges(shadow_settings, [name], client=client)[name]
    if shadow.version == main.version:
        raise ConfigError(f"judges.{name}.shadow: same version as the main judge (change an option)")
    return ShadowSpec(judge=shadow, share=share)


def build_judges(
    settings: Settings, names: Sequence[str] | None = None, *, client: LLMClient | None = None
) -> dict[str, Judge]:
    """Build the named judges (default ``settings.judge.enabled``), in the given order.

    Args:
        settings: process settings; ``settings.judge.model`` picks the LLM backend.
        names: judge names; duplicates are built once.
        client: the LLM client to share (default: one new :class:`LLMClient`, made only if an LLM judge is
            built).

    Returns:
        ``{name: judge}``.

    Raises:
        ConfigError: an unknown judge name (asked for, or named by a ``judge.routes`` entry: a route may name
            a registered judge that this run does not build, but not a name no registry knows), a judge that
            needs a judge model when none is configured, a bad option or prompt template, or a plugin that
            fails to load or returns no :class:`Judge`.
    """
    wanted = list(dict.fromkeys(names if names is not None else settings.judge.enabled))
    plugins = _plugins()
    clash = sorted(set(settings.judge.checklists) & set(BUILTIN_JUDGES))
    if clash:
        raise ConfigError(f"checklist name(s) {', '.join(clash)} clash with built-in judges")
    unknown = [
        n
        for n in wanted
        if n not in BUILTIN_JUDGES and n not in plugins and n not in settings.judge.checklists
    ]
    if unknown:
        raise ConfigError(
            f"unknown judge(s) {', '.join(unknown)}; available: {', '.join(available_judges())}"
        )
    routed = sorted(
        {
            n
            for route in settings.judge.routes
            for n in route.judges
            if n not in BUILTIN_JUDGES and n not in plugins and n not in settings.judge.checklists
        }
    )
    if routed:
        raise ConfigError(
            f"judge.routes names unknown judge(s) {', '.join(routed)}; available: {', '.join(available_judges())}"
        )
    # Options for a judge that does not exist (a typo such as ``faithfullness: {threshold: 0.9}``) would
    # otherwise be ignored silently while the real judge runs with its defaults.
    stray = sorted(
        n
        for n in settings.judge.options
        if n not in BUILTIN_JUDGES and n not in plugins and n not in settings.judge.checklists
    )
    if stray:
        raise ConfigError(
            f"judges: options for unknown judge(s) {', '.join(stray)}; available: {', '.join(available_judges())}"
        )
    for name, raw in settings.judge.options.items():
        if name in OPTIONS_BY_JUDGE:
            parse_options(name, OPTIONS_BY_JUDGE[name], raw)
    judges: dict[str, Judge] = {}
    for name in wanted:
        options = settings.judge.options.get(name, {})
        spec = BUILTIN_JUDGES.get(name)
        judge: Any
        if spec is None and name in settings.judge.checklists:
            from ragpulse.judges.checklist.judge import build_checklist_judge

            if settings.judge.uses_llm and client is None:
                client = LLMClient(settings)
            judge = build_checklist_judge(settings, name, client=client if settings.judge.uses_llm else None)
        elif spec is None:
            try:
                factory = plugins[name].load()
                judge = factory(settings, options)
            except ConfigError:
                raise
            except Exception as e:
                raise ConfigError(f"judge plugin {name!r} failed to load: {e}") from e
        elif isinstance(options, Mapping) and options.get("cascade") is not None:
            if client is None and settings.judge.uses_llm:
                client = LLMClient(settings)
            judge = _build_cascade(settings, name, spec, options, client)
        elif spec.llm is not None and (settings.judge.uses_llm or spec.heuristic is None):
            if not settings.judge.uses_llm:
                raise ConfigError(f"judge {name!r} needs a judge model (RAGPULSE_JUDGE_MODEL)")
            if client is None:
                client = LLMClient(settings)
            judge = _load_class(spec.llm, name)(settings, options, client=client)
        else:
            assert spec.heuristic is not None
            judge = _load_class(spec.heuristic, name)(settings, options)
        if not isinstance(judge, Judge):
            raise ConfigError(f"judge {name!r} does not implement the Judge protocol")
        if isinstance(options, Mapping) and options.get("shadow") is not None:
            holder: Any = judge  # the optional ``shadow`` attribute is not part of the Judge protocol
            holder.shadow = _build_shadow(settings, name, judge, options, client)
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


@asynccontextmanager
async def opened_judges(
    settings: Settings, names: Sequence[str] | None = None, *, ledger: TokenLedger | None = None
) -> AsyncIterator[dict[str, Judge]]:
    """The one owner of what judges share: build the judges (one shared LLM client when a judge model is set;
    each judge's own resources such as an embeddings client), yield them, and close all of it once on exit
    through :func:`close_judges` — the shared client once, then every judge's ``aclose`` (which releases only
    what that judge owns, never the shared client).

    ``ledger`` keeps the daily token budget across processes (the store); ``None``: per process.

    Raises:
        ConfigError: unknown judge name or bad judge configuration (nothing is left open).
    """
    client = LLMClient(settings, ledger=ledger) if settings.judge.uses_llm else None
    judges: dict[str, Judge] = {}
    try:
        judges = build_judges(settings, names, client=client)
        yield judges
    finally:
        await close_judges(judges)
        if client is not None:  # also when no judge took it (idempotent)
            await client.aclose()
