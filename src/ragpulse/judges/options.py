"""Judge options (``settings.judge.options[<name>]``): one pydantic model per built-in judge name, both backends.

One policy for every judge and backend: an unknown key (a typo such as ``treshold``) or a bad value is a
:class:`~ragpulse.errors.ConfigError` naming the judge and the option, raised when the judges are built at
start-up (:func:`ragpulse.judges.registry.build_judges` checks the options of every configured built-in
judge, enabled or not). Options that only one backend reads are still valid for the other, so
``faithfulness: {mode: binary}`` stays valid when no judge model is configured (the offline judge ignores
it). ``None`` means "the judge's default" (which may depend on the mode, e.g. faithfulness thresholds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from ragpulse.config import API_KEY_IN_OPTIONS
from ragpulse.errors import ConfigError

__all__ = [
    "OPTIONS_BY_JUDGE",
    "AnswerCorrectnessOptions",
    "CascadeOptions",
    "ContextOptions",
    "FaithfulnessOptions",
    "JudgeOptions",
    "KeywordOptions",
    "ModelOptions",
    "RelevancyOptions",
    "parse_options",
]

Share = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)


class JudgeOptions(BaseModel):
    """Options every judge takes: ``threshold`` (0–1; ``None`` = the judge's default) and ``shadow`` (a second
    configuration of the judge run on a share of the judged traces and stored apart: ``{<options>…, share:
    0–1}``; read by the registry, the other keys are this judge's options over the main ones)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    threshold: float | None = Share
    shadow: dict[str, Any] | None = None

    @field_validator("shadow", mode="before")
    @classmethod
    def _shadow(cls, v: Any) -> Any:
        if v is None:
            return v
        if not isinstance(v, dict):
            raise ValueError("shadow must be a mapping of options with a share")
        share = v.get("share")
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0.0 <= share <= 1.0:
            raise ValueError("shadow.share must be a number in [0, 1]")
        if "shadow" in v:
            raise ValueError("a shadow cannot have a shadow")
        return v


class CascadeOptions(BaseModel):
    """``judge.options.<name>.cascade``: a cheap first stage, the main (LLM) judge only when the first is uncertain.

    ``first``: ``heuristic`` (the judge's offline backend) or a mapping of this judge's options for a cheaper
    LLM configuration (e.g. ``{mode: sentence_check}``); ``band``: ``[low, high]`` in [0, 1], low ≤ high — a
    first-stage score inside it (inclusive) escalates to the main judge (:mod:`ragpulse.judges.cascade`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    first: Literal["heuristic"] | dict[str, Any] = "heuristic"
    band: tuple[float, float]

    @field_validator("band", mode="before")
    @classmethod
    def _band(cls, v: Any) -> Any:
        if (
            not isinstance(v, list | tuple)
            or len(v) != 2
            or any(isinstance(x, bool) or not isinstance(x, int | float) for x in v)
        ):
            raise ValueError("band must be [low, high], two numbers in [0, 1]")
        if not 0.0 <= v[0] <= v[1] <= 1.0:
            raise ValueError("band must be [low, high] with 0 <= low <= high <= 1")
        return v

    @field_validator("first", mode="before")
    @classmethod
    def _first(cls, v: Any) -> Any:
        if isinstance(v, dict) and ("cascade" in v or "shadow" in v):
            raise ValueError("the first stage cannot itself have a cascade or shadow")
        return v


class ModelOptions(JudgeOptions):
    """Options of judges that can ask the judge model: ``language`` (``auto``/``en``/``zh``, default
    ``settings.judge.language``), ``max_tokens`` (completion limit), ``temperature`` (default
    ``settings.judge.temperature``; not sent to a model that takes only its default), ``daily_token_budget``
    (tokens/day) and
    ``cascade`` (:class:`CascadeOptions`; read by the registry, not by the judge).

    This judge's own model (read by the registry, which gives the judge one
    :class:`~ragpulse.judges.model.client.LLMClient` per distinct endpoint, model and key): ``model`` (default
    ``settings.judge.model``), ``base_url`` (OpenAI-compatible; default ``settings.judge.base_url``) and
    ``api_key_env`` (the name of the environment variable holding its API key — the key itself never goes in
    the configuration; default: the judge section's key when the endpoint is the judge section's, else none).
    """

    language: Literal["auto", "en", "zh"] | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    daily_token_budget: int | None = Field(default=None, gt=0)
    cascade: CascadeOptions | None = None
    model: str | None = Field(default=None, min_length=1)
    base_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


class RelevancyOptions(ModelOptions):
    """``relevancy``: ``mode`` (``question``/``with_context``) and ``graded`` (0–3 rating) for the LLM backend."""

    mode: Literal["question", "with_context"] = "question"
    graded: StrictBool = False


class FaithfulnessOptions(ModelOptions):
    """``faithfulness``: ``mode`` and its options (LLM backend; the offline judge reads ``threshold`` only).

    ``binary``: ``literal_match``, ``literal_min_chars``, ``short_answer_tokens``. ``sentence_check``:
    ``template`` (the fact-checking prompt, ``{document}`` and ``{claim}`` placeholders) and
    ``max_calls_per_trace`` (model calls per trace; default 64).
    """

    mode: Literal["claims", "binary", "sentence_check"] = "claims"
    literal_match: StrictBool = False
    literal_min_chars: int = Field(default=20, gt=0)
    short_answer_tokens: int = Field(default=8, gt=0)
    template: str | None = None
    max_calls_per_trace: int = Field(default=64, gt=0)


class KeywordOptions(JudgeOptions):
    """``keyword``: ``threshold`` only."""


class ContextOptions(ModelOptions):
    """``context_precision``/``context_recall``/``context_relevance``: ``method``, top ``k``, ``min_coverage``."""

    method: Literal["auto", "labels", "llm", "heuristic"] = "auto"
    k: int | None = Field(default=None, ge=1)
    min_coverage: float | None = Share


class AnswerCorrectnessOptions(ModelOptions):
    """``answer_correctness``: ``weights`` ``[w_f1, w_sim]`` (≥ 0, not both 0) and ``min_coverage``."""

    model_config = ConfigDict(strict=False)  # weights may come as a YAML list of ints

    weights: tuple[float, float] = (0.75, 0.25)
    min_coverage: float | None = Share

    @field_validator("weights", mode="before")
    @classmethod
    def _weights(cls, v: Any) -> Any:
        if not isinstance(v, list | tuple) or any(isinstance(x, bool) for x in v):
            raise ValueError("weights must be [w_f1, w_sim], two numbers")
        return v

    @model_validator(mode="after")
    def _not_both_zero(self) -> AnswerCorrectnessOptions:
        if min(self.weights) < 0 or sum(self.weights) == 0:
            raise ValueError("weights must be >= 0 and not both 0")
        return self


#: Options model of each built-in judge name (both backends).
OPTIONS_BY_JUDGE: Mapping[str, type[JudgeOptions]] = {
    "relevancy": RelevancyOptions,
    "faithfulness": FaithfulnessOptions,
    "keyword": KeywordOptions,
    "context_precision": ContextOptions,
    "context_recall": ContextOptions,
    "context_relevance": ContextOptions,
    "answer_correctness": AnswerCorrectnessOptions,
}


OptionsT = TypeVar("OptionsT", bound=JudgeOptions)


def parse_options(judge: str, model: type[OptionsT], raw: Mapping[str, Any] | OptionsT | None) -> OptionsT:
    """Validate ``raw`` (``settings.judge.options[judge]``) against ``model``.

    Raises:
        ConfigError: ``judge.options.<judge>.<option>: <what is wrong>`` for the first bad option (unknown keys
            list the allowed ones; an ``api_key`` is refused without repeating it).
    """
    if isinstance(raw, model):
        return raw
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError(f"judge.options.{judge}: options must be a mapping, got {type(raw).__name__}")
    if raw is not None and "api_key" in raw:  # said without echoing the value: it is a secret
        raise ConfigError(f"judge.options.{judge}.api_key: {API_KEY_IN_OPTIONS}")
    try:
        return model.model_validate(dict(raw or {}))
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"] if not isinstance(p, int)) or "options"
        if err["type"] == "extra_forbidden":
            allowed = ", ".join(sorted(model.model_fields))
            raise ConfigError(f"judge.options.{judge}.{where}: unknown option; allowed: {allowed}") from None
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"judge.options.{judge}.{where}: {msg}, got {err.get('input')!r}") from None
