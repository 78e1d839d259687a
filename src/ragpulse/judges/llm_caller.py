"""Adapter: the shared :class:`~ragpulse.judges.llm.LLMClient` as a :class:`~ragpulse.judges.refbase.ModelCaller`.

The reference-metric and checklist judges reach the judge model through the ``ModelCaller`` seam. Passing them
``SharedModelCaller(client)`` (with the ``client`` that :func:`~ragpulse.judges.registry.build_judges` shares)
puts their calls under the same connection pool, concurrency limit, requests-per-minute limit, cache and daily
token budget as the relevancy and faithfulness judges.
"""

from __future__ import annotations

from ragpulse.errors import JudgeError
from ragpulse.judges.llm import LLMClient
from ragpulse.judges.refbase import ModelReply
from ragpulse.judges.refprompt import SYSTEM

__all__ = ["SharedModelCaller"]


class SharedModelCaller:
    """A ``ModelCaller`` over a shared :class:`LLMClient`.

    Args:
        client: the shared client.
        version: part of the cache key (the judge version, when the caller serves one judge); the judge name
            and the full messages are always part of it.
    """

    def __init__(self, client: LLMClient, version: str = "") -> None:
        self._client = client
        self._version = version

    @property
    def model(self) -> str:
        """The judge model's name."""
        return self._client.model

    async def ask(self, *, judge: str, user: str, system: str | None = None) -> ModelReply:
        """Send ``system`` (default: a neutral evaluator instruction) + ``user``; return text, usage, retries.

        Raises:
            JudgeError: ``judge_unavailable`` (API failure after retries), ``over_budget``,
                ``truncated_output`` (``finish_reason == "length"``), ``empty_output``.
        """
        r = await self._client.complete(
            judge=judge,
            version=f"{judge}:{self._version}",
            messages=[{"role": "system", "content": system or SYSTEM}, {"role": "user", "content": user}],
        )
        if r.finish_reason == "length":
            raise JudgeError("truncated_output", "the judge model hit max_tokens")
        if not r.text.strip():
            raise JudgeError("empty_output", "the judge model returned nothing")
        return ModelReply(
            text=r.text,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            retries=r.retries,
            cached=r.cached,
        )
