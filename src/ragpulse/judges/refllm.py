"""A :class:`~ragpulse.judges.refbase.ModelCaller` over ``openai.AsyncOpenAI`` (chat completions).

This is the narrow seam through which the reference-metric and checklist judges reach the judge model. It uses
the judge model settings (``judge_base_url``, ``judge_model``, ``judge_api_key``, ``judge_timeout_s``,
``judge_max_tokens``, ``judge_temperature``, ``judge_max_retries``); the openai client retries 429 (honouring
``Retry-After``), 5xx and timeouts itself. ``finish_reason == "length"`` is reported as
``truncated_output``; an API failure after the retries as ``judge_unavailable``. Token counts come from the
API's ``usage``.
"""

from __future__ import annotations

import openai

from ragpulse.config import Settings
from ragpulse.errors import ConfigError, JudgeError
from ragpulse.judges.refbase import ModelReply
from ragpulse.judges.refprompt import SYSTEM

__all__ = ["OpenAIModelCaller"]


class OpenAIModelCaller:
    """Chat-completions caller for one judge model (one shared ``AsyncOpenAI`` client).

    Raises:
        ConfigError: no judge model is configured.
    """

    def __init__(self, settings: Settings) -> None:
        if not settings.judge_model:
            raise ConfigError("judge_model is not set (RAGPULSE_JUDGE_MODEL)")
        key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else "not-needed"
        self._model = settings.judge_model
        self._max_tokens = settings.judge_max_tokens
        self._temperature = settings.judge_temperature
        self._client = openai.AsyncOpenAI(
            base_url=settings.judge_base_url,
            api_key=key,
            timeout=settings.judge_timeout_s,
            max_retries=settings.judge_max_retries,
        )

    @property
    def model(self) -> str:
        """The judge model's name."""
        return self._model

    async def ask(self, *, judge: str, version: str, user: str, system: str | None = None) -> ModelReply:
        """Send one system + user message; return the reply text and usage.

        Raises:
            JudgeError: ``judge_unavailable`` (API error after retries), ``truncated_output``
                (``finish_reason == "length"``), ``empty_output`` (no choice or empty content).
        """
        try:
            resp = await self._client.chat.completions.create(
                model=self._model,
                messages=[{"role": "system", "content": system or SYSTEM}, {"role": "user", "content": user}],
                temperature=self._temperature,
                max_tokens=self._max_tokens,
            )
        except openai.APIStatusError as e:
            raise JudgeError("judge_unavailable", f"HTTP {e.status_code} from the judge model") from e
        except openai.APIError as e:
            raise JudgeError("judge_unavailable", f"{type(e).__name__} calling the judge model") from e
        if not resp.choices:
            raise JudgeError("empty_output", "no choices in the judge reply")
        choice = resp.choices[0]
        text = choice.message.content or ""
        if choice.finish_reason == "length":
            raise JudgeError("truncated_output", f"the judge reply hit max_tokens={self._max_tokens}")
        if not text.strip():
            raise JudgeError("empty_output", "the judge model returned nothing")
        usage = resp.usage
        return ModelReply(
            text=text,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()
