"""Build the configured judges: built-ins (LLM or heuristic backend), checklists and plugins.

Built-ins are a table, :data:`BUILTIN_JUDGES`: name → :class:`JudgeSpec` naming the class (or factory) for
each backend as ``"module:Class"``, imported lazily. With ``settings.judge.model`` set a judge gets its
``llm`` class, called as ``cls(settings, options, client=client)`` with the
:class:`~ragpulse.judges.model.client.LLMClient` shared by every judge of the :func:`build_judges` call (or,
when its options set ``model``/``base_url``/``api_key_env``, the one client of that endpoint,
:class:`ModelClients`); else its ``heuristic`` class, ``cls(settings, options)``. ``options = settings.judge.options.get(name, {})``, and the
options of every configured built-in judge are validated (:mod:`ragpulse.judges.options`) whatever the
backend and whether or not it is enabled. Every key of ``settings.judge.checklists`` is a judge too
(:class:`~ragpulse.judges.checklist.judge.ChecklistJudge`). Plugins: entry points of the group
``ragpulse.judges`` named after the judge, whose object is ``factory(settings, options) -> Judge`` (normally
a :class:`ragpulse.judges.JudgeBase`); built-in names cannot be taken over.
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
    "ModelClients",
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


#: Options that pick a judge's own model (:class:`ModelClients`).
MODEL_OPTIONS = ("model", "base_url", "api_key_env")


class ModelClients:
    """The LLM clients of one :func:`build_judges` call: one :class:`LLMClient` per distinct ``(base_url,
    model, API key)``, all sharing the token ledger.

    The judge section's model (``settings.judge``) is the default client (given, or made on first use); a judge,
    cascade stage or shadow whose options set ``model``, ``base_url`` or ``api_key_env`` gets the client of
    that endpoint: ``model`` defaults to ``settings.judge.model``, ``base_url`` to ``settings.judge.base_url``,
    the key to the environment variable named by ``api_key_env`` (resolved into ``settings.judge.model_keys`` by
    :func:`ragpulse.config.load_settings`), else the judge section's key when the endpoint is the judge
    section's (another endpoint gets no key: a key is never sent to a server it was not configured for). The
    same endpoint, model and key as the judge section's is the default client. Another client counts its
    budget per ``<judge>@<model>`` (:attr:`LLMClient.budget_suffix`).

    Args:
        settings: the judge section and ``model_keys``.
        default: the judge section's client, if already made.
        ledger: the token ledger every client made here uses (default: ``default``'s).
    """

    def __init__(
        self, settings: Settings, default: LLMClient | None = None, ledger: TokenLedger | None = None
    ) -> None:
        self._settings = settings
        self._default = default
        self._ledger = ledger if ledger is not None else (default.ledger if default is not None else None)
        self._made: dict[tuple[str | None, str, str | None], LLMClient] = {}

    def default(self) -> LLMClient | None:
        """The judge section's client (``None`` when no judge model is configured)."""
        if self._default is None and self._settings.judge.uses_llm:
            self._default = LLMClient(self._settings, ledger=self._ledger)
        return self._default

    def for_options(self, name: str, options: Mapping[str, Any], where: str = "") -> LLMClient | None:
        """The client for a judge with ``options`` (``None``: no model at all — the offline backend).

        Args:
            name: the judge name; ``where``: the options' place under ``judge.options.<name>`` (errors).

        Raises:
            ConfigError: ``base_url``/``api_key_env`` without any model, or an ``api_key_env`` that is not set.
        """
        if not any(options.get(k) for k in MODEL_OPTIONS):
            return self.default()
        j = self._settings.judge
        at = f"judge.options.{name}{where}"
        model = options.get("model") or j.model
        if not model:
            raise ConfigError(f"{at}: base_url/api_key_env without a model (set {at}.model)")
        base_url = options.get("base_url") or j.base_url
        key_env = options.get("api_key_env")
        if key_env:
            secret = j.model_keys.get(key_env)
            if secret is None:
                raise ConfigError(f"{at}.api_key_env: the environment variable {key_env} is not set")
            key: str | None = secret.get_secret_value()
        else:
            key = j.api_key.get_secret_value() if j.api_key and base_url == j.base_url else None
        section_key = j.api_key.get_secret_value() if j.api_key else None
        if (base_url, model, key) == (j.base_url, j.model, section_key):
            return self.default()
        ident = (base_url, model, key)
        client = self._made.get(ident)
        if client is None:
            own = self._settings.replaced(judge_model=model, judge_base_url=base_url, judge_api_key=key)
            client = LLMClient(own, ledger=self._ledger, budget_suffix=f"@{model}")
            self._made[ident] = client
        return client

    async def aclose(self) -> None:
        """Close every client made here and the default (idempotent)."""
        for c in [*self._made.values(), *([self._default] if self._default is not None else [])]:
            await c.aclose()


def _build_cascade(
    settings: Settings, name: str, spec: JudgeSpec, options: Mapping[str, Any], clients: ModelClients
) -> Judge:
    """The :class:`~ragpulse.judges.cascade.CascadeJudge` of ``judge.options.<name>.cascade`` (options validated)."""
    from ragpulse.judges.cascade import CascadeJudge

    cascade = options["cascade"]
    main_options = {k: v for k, v in options.items() if k != "cascade"}
    client = clients.for_options(name, main_options) if spec.llm is not None else None
    if spec.llm is None or client is None:
        raise ConfigError(
            f"judge.options.{name}.cascade: the main stage needs a judge model (RAGPULSE_JUDGE_MODEL or judge.options.{name}.model)"
        )
    main = _load_class(spec.llm, name)(settings, main_options, client=client)
    first_raw = cascade.get("first", "heuristic")
    if first_raw == "heuristic":
        if spec.heuristic is None or spec.heuristic == spec.llm:
            raise ConfigError(f"judge.options.{name}.cascade.first: {name!r} has no separate offline judge")
        first = _load_class(spec.heuristic, name)(settings, {})
    else:
        # checked here so that an error names judge.options.<name>.cascade.first.<option>
        if name in OPTIONS_BY_JUDGE:
            parse_options(f"{name}.cascade.first", OPTIONS_BY_JUDGE[name], first_raw)
        first_client = clients.for_options(name, first_raw, ".cascade.first")
        if first_client is None:
            raise ConfigError(
                f"judge.options.{name}.cascade.first: needs a model (its own model option or the judge's)"
            )
        first = _load_class(spec.llm, name)(settings, dict(first_raw), client=first_client)
    low, high = cascade["band"]
    return CascadeJudge(name, first, main, (float(low), float(high)))


@dataclass(frozen=True)
class ShadowSpec:
    """A judge's shadow configuration (``judge.options.<name>.shadow``): the judge it builds and the share of judged
    traces it runs on (0–1; which traces: :func:`ragpulse.engine.engine.shadow_hit`)."""

    judge: Judge
    share: float


def shadow_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
    """``(options, share)`` of the shadow in a judge's ``options`` (``judge.options.<name>``): the main options
    without ``shadow``, overlaid by the shadow's (without ``share``) — what the shadow judge is built with, and
    what the main options become when the shadow is promoted (``ragpulse judges promote``)."""
    raw = dict(options["shadow"])
    share = float(raw.pop("share"))
    return {**{k: v for k, v in options.items() if k != "shadow"}, **raw}, share


def _build_shadow(
    settings: Settings, name: str, main: Judge, options: Mapping[str, Any], clients: ModelClients
) -> ShadowSpec:
    """Build ``judge.options.<name>.shadow``: this judge with the main options overlaid by the shadow's (its own version)."""
    promoted, share = shadow_options(options)
    shadow_settings = settings.replaced(judge_options={**settings.judge.options, name: promoted})
    try:
        shadow = build_judges(shadow_settings, [name], clients=clients)[name]
    except ConfigError as e:
        # the main options built, so the shadow's are at fault: say judge.options.<name>.shadow…
        said = str(e)
        for head in (f"judge.options.{name}.", f"judge.options.{name}:"):
            if said.startswith(head) and not said.startswith(f"judge.options.{name}.shadow"):
                raise ConfigError(f"judge.options.{name}.shadow{said[len(head) - 1 :]}") from e
        raise
    if shadow.version == main.version:
        raise ConfigError(f"judge.options.{name}.shadow: same version as the main judge (change an option)")
    return ShadowSpec(judge=shadow, share=share)


def build_judges(
    settings: Settings,
    names: Sequence[str] | None = None,
    *,
    client: LLMClient | None = None,
    ledger: TokenLedger | None = None,
    clients: ModelClients | None = None,
) -> dict[str, Judge]:
    """Build the named judges (default ``settings.judge.enabled``), in the given order.

    Args:
        settings: process settings; ``settings.judge.model`` (or a judge's own ``model`` option) picks the LLM
            backend.
        names: judge names; duplicates are built once.
        client: the judge section's LLM client to share (default: one new :class:`LLMClient`, made only if an
            LLM judge is built).
        ledger: the token ledger of the clients made here (default: ``client``'s).
        clients: the clients to draw from (:class:`ModelClients`; default: new ones around ``client``).

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
            f"judge.options: options for unknown judge(s) {', '.join(stray)}; available: {', '.join(available_judges())}"
        )
    for name, raw in settings.judge.options.items():
        if name in OPTIONS_BY_JUDGE:
            parse_options(name, OPTIONS_BY_JUDGE[name], raw)
    pool = clients if clients is not None else ModelClients(settings, client, ledger)
    judges: dict[str, Judge] = {}
    for name in wanted:
        options = settings.judge.options.get(name, {})
        spec = BUILTIN_JUDGES.get(name)
        judge: Any
        if spec is None and name in settings.judge.checklists:
            from ragpulse.judges.checklist.judge import build_checklist_judge

            judge = build_checklist_judge(settings, name, client=pool.default())
        elif spec is None:
            try:
                factory = plugins[name].load()
                judge = factory(settings, options)
            except ConfigError:
                raise
            except Exception as e:
                raise ConfigError(f"judge plugin {name!r} failed to load: {e}") from e
        elif isinstance(options, Mapping) and options.get("cascade") is not None:
            judge = _build_cascade(settings, name, spec, options, pool)
        else:
            own = pool.for_options(name, options) if spec.llm is not None else None
            if spec.llm is not None and (own is not None or spec.heuristic is None):
                if own is None:
                    raise ConfigError(f"judge {name!r} needs a judge model (RAGPULSE_JUDGE_MODEL)")
                judge = _load_class(spec.llm, name)(settings, options, client=own)
            else:
                assert spec.heuristic is not None
                judge = _load_class(spec.heuristic, name)(settings, options)
        if not isinstance(judge, Judge):
            raise ConfigError(f"judge {name!r} does not implement the Judge protocol")
        if isinstance(options, Mapping) and options.get("shadow") is not None:
            holder: Any = judge  # the optional ``shadow`` attribute is not part of the Judge protocol
            holder.shadow = _build_shadow(settings, name, judge, options, pool)
        judges[name] = judge
        _log.info("judge_built", judge=name, backend=str(judge.backend), version=judge.version)
    return judges


def _clients_of(judge: Any, out: dict[int, LLMClient]) -> None:
    """Collect the :class:`LLMClient` of ``judge``, of its cascade stages and of its shadow, by identity."""
    c = getattr(judge, "client", None)
    if isinstance(c, LLMClient):
        out[id(c)] = c
    for part in (getattr(judge, "first", None), getattr(judge, "main", None)):
        if part is not None and part is not judge:
            _clients_of(part, out)
    spec = getattr(judge, "shadow", None)
    if isinstance(spec, ShadowSpec):
        _clients_of(spec.judge, out)


async def close_judges(judges: Mapping[str, Judge]) -> None:
    """Release what the judges hold; call once when done with them (idempotent).

    Closes every :class:`LLMClient` the judges use (``judge.client``, their cascade stages' and shadows'),
    each once, and awaits ``aclose()`` of every judge that has one (embeddings clients, plugins).
    Never raises: a failing close is logged.
    """
    clients: dict[int, LLMClient] = {}
    others: list[tuple[str, Any]] = []
    for name, judge in judges.items():
        _clients_of(judge, clients)
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
    pool = ModelClients(settings, client, ledger)
    judges: dict[str, Judge] = {}
    try:
        judges = build_judges(settings, names, clients=pool)
        yield judges
    finally:
        await close_judges(judges)
        await pool.aclose()  # also the clients no judge took (idempotent)
