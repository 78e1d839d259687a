"""Which request parameters a judge model takes, decided by its family and learnt from its refusals.

Chat-completions servers disagree on three parameters, and a judge must work with today's models without
configuration (``docs/llm-judges.md``, "Tested judge models"):

- the **completion-token limit**: OpenAI's reasoning models (o1, o3, o4-mini, GPT-5 …) refuse ``max_tokens``
  (``unsupported_parameter``) and take ``max_completion_tokens``; many compatible servers know only
  ``max_tokens``;
- the **temperature**: the same reasoning models refuse any value but the default (1)
  (``unsupported_value``) — they get none;
- **structured output** (``response_format: {type: json_schema, …}``): servers that lack it answer HTTP 400.

:func:`initial_params` decides from the documented model families (:data:`FAMILIES`); for any other name the
first guess is the most widely understood request (``max_tokens``, the configured temperature, the response
format when ``judge.structured_output`` asks for it). When the server refuses a parameter
(:func:`refused_parameter` reads its HTTP 400), the caller retries once without it (or with the other token
parameter) and :class:`ParameterMemory` remembers the answer per ``(base URL, model)`` for the life of the
process, so later calls send the right request first. A different base URL starts from the family again.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

__all__ = [
    "FAMILIES",
    "PARAMETERS",
    "EndpointParams",
    "Family",
    "ParameterMemory",
    "family_of",
    "initial_params",
    "refused_parameter",
]

TokenParam = Literal["max_completion_tokens", "max_tokens"]


@dataclass(frozen=True)
class Family:
    """A documented model family and what its chat-completions requests look like.

    Attributes:
        name: family name as documented (``openai-reasoning``, ``deepseek-reasoner`` …).
        pattern: matched (``re.search``, case-insensitive) against the model name without a provider prefix
            (``openai/o3`` → ``o3``).
        token_param: the completion-token parameter it takes.
        temperature: it takes a temperature other than the default.
        reasoning: it reasons before answering: the completion cap gets ``judge.reasoning_tokens`` more room.
    """

    name: str
    pattern: re.Pattern[str]
    token_param: TokenParam
    temperature: bool
    reasoning: bool


#: Documented families, first match wins (the table "Tested judge models" in docs/llm-judges.md).
FAMILIES: tuple[Family, ...] = (
    # OpenAI o-series and GPT-5 reasoning models: max_completion_tokens only, default temperature only.
    Family("openai-reasoning", re.compile(r"^(?:o\d+(?:-|$)|gpt-5(?!.*-chat))", re.I), "max_completion_tokens",
           temperature=False, reasoning=True),
    # GPT-5 chat variants (gpt-5-chat-latest): max_completion_tokens; a temperature is tried (a refusal is
    # learnt), no reasoning.
    Family("openai-gpt5-chat", re.compile(r"^gpt-5.*-chat", re.I), "max_completion_tokens",
           temperature=True, reasoning=False),
    # DeepSeek-R1 / deepseek-reasoner, Qwen QwQ and Qwen3 thinking, Magistral: max_tokens, reasoning fields.
    Family("open-reasoning", re.compile(r"deepseek-reasoner|deepseek-r1|qwq|qwen3.*think|magistral", re.I),
           "max_tokens", temperature=True, reasoning=True),
)  # fmt: skip


def family_of(model: str) -> Family | None:
    """The documented family of ``model`` (a provider prefix such as ``openai/`` is ignored), or ``None``."""
    bare = model.rsplit("/", 1)[-1]
    return next((f for f in FAMILIES if f.pattern.search(bare)), None)


@dataclass(frozen=True)
class EndpointParams:
    """What to send to one ``(base URL, model)``.

    Attributes:
        token_param: ``max_completion_tokens`` or ``max_tokens``.
        temperature: send ``judge.temperature`` (``False``: the model takes only its default, none is sent).
        response_format: send the judge's JSON schema as ``response_format`` (``judge.structured_output``).
        reasoning: the model reasons (a documented family, or a reply carried reasoning): its completion cap
            gets ``judge.reasoning_tokens`` more room.
        learnt: parameters decided by a refusal of this server rather than by the family table.
    """

    token_param: TokenParam = "max_tokens"
    temperature: bool = True
    response_format: bool = True
    reasoning: bool = False
    learnt: frozenset[str] = frozenset()


def initial_params(model: str, *, structured_output: str = "auto") -> EndpointParams:
    """The first request shape for ``model``: from its family, else ``max_tokens`` with a temperature.

    Args:
        model: the model name.
        structured_output: ``judge.structured_output`` (``auto``/``json_schema`` send the schema, ``off`` not).
    """
    fam = family_of(model)
    fmt = structured_output != "off"
    if fam is None:
        return EndpointParams(response_format=fmt)
    return EndpointParams(
        token_param=fam.token_param, temperature=fam.temperature, response_format=fmt, reasoning=fam.reasoning
    )


class ParameterMemory:
    """What each ``(base URL, model)`` was found to take, for the life of the process (thread-safe).

    :data:`PARAMETERS` is the process's one memory, shared by every :class:`~ragpulse.judges.model.client.
    LLMClient` (so a judge's own client for the same endpoint and model learns with the others).
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], EndpointParams] = {}
        self._lock = threading.Lock()

    def get(self, base_url: str, model: str, *, structured_output: str = "auto") -> EndpointParams:
        """The parameters to send now (learnt ones, else :func:`initial_params`)."""
        with self._lock:
            known = self._known.get((base_url, model))
        if known is None:
            return initial_params(model, structured_output=structured_output)
        if structured_output == "off" and known.response_format:
            return replace(known, response_format=False)
        return known

    def learn(self, base_url: str, model: str, params: EndpointParams) -> None:
        """Remember ``params`` for ``(base_url, model)``."""
        with self._lock:
            self._known[(base_url, model)] = params

    def forget(self) -> None:
        """Forget everything learnt (tests; a process normally never needs to)."""
        with self._lock:
            self._known.clear()


#: The process's memory of what each endpoint and model takes.
PARAMETERS = ParameterMemory()

#: Words of a 400 that refuses a parameter (OpenAI: ``unsupported_parameter``/``unsupported_value``; vLLM and
#: others: "extra inputs are not permitted", "unrecognized", "unknown" …). Not "invalid": OpenAI says
#: "Invalid 'max_tokens': integer above maximum value" of a value it takes, only too large.
_REFUSAL_WORDS = re.compile(
    r"unsupported|not supported|does not support|not permitted|not allowed|unrecognized|unknown|"
    r"only the default",
    re.I,
)


def refused_parameter(status: int, body: object, candidates: Mapping[str, Any]) -> str | None:
    """The request parameter an HTTP error refuses, among ``candidates`` (the ones the request sent).

    Args:
        status: HTTP status of the error (only 400 and 422 refuse a parameter).
        body: the error object (``{"message", "type", "param", "code"}``; the openai client's ``e.body``).
        candidates: the adjustable parameters the request carried (``max_tokens``/``max_completion_tokens``,
            ``temperature``, ``response_format``), name → value.

    Returns:
        The refused parameter's name, or ``None`` (another error: context length, authentication …).
    """
    if status not in (400, 422) or not isinstance(body, dict):
        return None
    if body.get("code") == "context_length_exceeded":
        return None
    param = body.get("param")
    if isinstance(param, str) and param in candidates:
        return param
    message = body.get("message")
    if not isinstance(message, str) and isinstance(body.get("detail"), str | list):
        message = str(body.get("detail"))  # FastAPI-style 422 bodies
    if not isinstance(message, str) or _REFUSAL_WORDS.search(message) is None:
        return None
    named = [
        name
        for name in candidates
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", message)
        or (name == "response_format" and "json_schema" in message)
    ]
    return named[0] if len(named) == 1 else None
