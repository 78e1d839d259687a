"""A portal run's judge model and RAG endpoint, built from the settings' sections — and where each key may go.

A run request names a judge model (``judge.models``) and a RAG endpoint (``rag.endpoints``); :func:`run_settings`
returns the process settings with the ``judge`` and ``rag`` sections set to them (never through the older flat
names), and the clients of the run (:class:`~ragpulse.judges.model.client.LLMClient`,
:class:`~ragpulse.runs.rag_client.RagClient`) are built from those sections.

**A key goes only to the host it was configured for** (:func:`key_for`): a named model or endpoint with
``api_key_env`` gets the value of that variable (none when it is unset); one without gets the section's key
(``judge.api_key`` / ``rag.endpoint_api_key``) only when it is on the section's own host (same scheme, host
and port as ``judge.base_url`` / ``rag.endpoint_url``), else no key at all. A judge's own model in
``judge.options`` (``model``/``api_key_env`` without ``base_url``: the section's host) keeps the section's
host when the run's model is on another one, so its key stays there too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from ragpulse.config import Settings

__all__ = ["OPENAI_DEFAULT_URL", "key_for", "run_settings", "same_host"]

#: Where the ``openai`` client goes when no ``base_url`` is set (``judge.base_url`` = ``None``).
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
_PORTS = {"http": 80, "https": 443}


def _origin(url: str | None) -> tuple[str, str, int | None]:
    parts = urlsplit(url or OPENAI_DEFAULT_URL)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _PORTS.get(scheme)
    except ValueError:  # a malformed port: matches nothing but itself
        port = None
    return scheme, (parts.hostname or "").lower(), port


def same_host(a: str | None, b: str | None) -> bool:
    """True when URLs ``a`` and ``b`` reach the same server: scheme, host and port equal (default ports filled
    in; ``None`` is OpenAI's default URL)."""
    return _origin(a) == _origin(b)


def key_for(
    url: str | None,
    key_env: str | None,
    *,
    section_url: str | None,
    section_key: SecretStr | None,
    environ: Mapping[str, str] | None = None,
) -> SecretStr | None:
    """The API key to send to ``url``: the variable ``key_env`` when named (``None`` when unset or empty), else
    ``section_key`` when ``url`` is on ``section_url``'s host, else ``None``."""
    if key_env:
        value = (os.environ if environ is None else environ).get(key_env)
        return SecretStr(value) if value else None
    return section_key if same_host(url, section_url) else None


_MODEL_KEYS = ("model", "api_key_env")


def _pin_base_url(options: Any, base_url: str) -> Any:
    """``options`` (a judge's, with its ``shadow`` and ``cascade.first`` inside) where every part that names its
    own model or key but no ``base_url`` gets ``base_url``."""
    if not isinstance(options, Mapping):
        return options
    out = {
        k: _pin_base_url(v, base_url) if k in ("shadow", "cascade", "first") else v
        for k, v in options.items()
    }
    if any(out.get(k) for k in _MODEL_KEYS) and not out.get("base_url"):
        out["base_url"] = base_url
    return out


def run_settings(
    settings: Settings,
    *,
    judge_model: str | None = None,
    rag_endpoint: str | None = None,
    thresholds: Mapping[str, float] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """``settings`` with a run's choices applied to its sections: per-judge ``thresholds`` (judge → 0–1) in
    ``judge.options``; the named ``judge_model`` (of ``judge.models``) as the ``judge`` section's model,
    ``base_url`` (its own, else the section's) and key (:func:`key_for`); the named ``rag_endpoint`` (of
    ``rag.endpoints``) as the ``rag`` section's URL, field names, timeout and key.

    Raises:
        KeyError: an unknown model or endpoint name (the run queue checks names before).
    """
    judge, rag = settings.judge, settings.rag
    judge_update: dict[str, Any] = {}
    if thresholds:
        options = {k: dict(v) for k, v in judge.options.items()}
        for name, value in thresholds.items():
            options.setdefault(name, {})["threshold"] = value
        judge_update["options"] = options
    if judge_model is not None:
        m = judge.models[judge_model]
        base_url = m.base_url or judge.base_url
        if not same_host(base_url, judge.base_url):
            # a judge's own model (options with model/api_key_env but no base_url) meant the section's host:
            # it stays there, with its key, when the run's model is elsewhere
            options = judge_update.get("options") or {k: dict(v) for k, v in judge.options.items()}
            judge_update["options"] = {
                k: _pin_base_url(v, judge.base_url or OPENAI_DEFAULT_URL) for k, v in options.items()
            }
        judge_update.update(
            model=m.model,
            base_url=base_url,
            api_key=key_for(
                base_url,
                m.api_key_env,
                section_url=judge.base_url,
                section_key=judge.api_key,
                environ=environ,
            ),
        )
    rag_update: dict[str, Any] = {}
    if rag_endpoint is not None:
        e = rag.endpoints[rag_endpoint]
        rag_update = {
            "endpoint_url": e.url,
            "request_question_field": e.question_field,
            "response_answer_field": e.answer_field,
            "response_contexts_field": e.contexts_field,
            "response_doc_ids_field": e.doc_ids_field,
            "endpoint_timeout_s": e.timeout_s,
            "endpoint_api_key": key_for(
                e.url,
                e.api_key_env,
                section_url=rag.endpoint_url,
                section_key=rag.endpoint_api_key,
                environ=environ,
            ),
        }
    if not judge_update and not rag_update:
        return settings
    return settings.model_copy(
        update={"judge": judge.model_copy(update=judge_update), "rag": rag.model_copy(update=rag_update)}
    )
