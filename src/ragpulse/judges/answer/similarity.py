"""Semantic similarity of two texts for answer correctness.

:class:`EmbeddingSimilarity` asks an OpenAI-compatible embeddings endpoint (``embeddings_base_url``,
``embeddings_model``, ``embeddings_api_key`` from ``RAGPULSE_EMBEDDINGS_API_KEY``) for both vectors in one
request and returns their cosine, clipped to [0, 1]. :class:`LexicalSimilarity` is the offline fallback
(:func:`ragpulse.judges.text.statements.lexical_similarity`: cosine of content-token frequency vectors).
"""

from __future__ import annotations

from typing import Protocol

from ragpulse.config import Settings
from ragpulse.errors import JudgeError
from ragpulse.judges.formulas import cosine
from ragpulse.judges.text.statements import lexical_similarity

__all__ = ["EmbeddingSimilarity", "LexicalSimilarity", "Similarity", "similarity_from_settings"]


class Similarity(Protocol):
    """Similarity of two texts in [0, 1]; ``method`` names it (hashed into judge versions)."""

    @property
    def method(self) -> str: ...

    async def similarity(self, a: str, b: str) -> float: ...


class LexicalSimilarity:
    """Offline similarity: cosine of content-token frequency vectors (jieba for Chinese)."""

    method = "lexical_cosine"

    async def similarity(self, a: str, b: str) -> float:
        """Cosine (0–1) of the content-token vectors of ``a`` and ``b``."""
        return lexical_similarity(a, b)


class EmbeddingSimilarity:
    """Cosine (0–1) of embeddings from an OpenAI-compatible ``/embeddings`` endpoint."""

    def __init__(
        self, *, base_url: str, model: str, api_key: str | None, timeout_s: float, max_retries: int
    ) -> None:
        import openai  # here, not at module level: it takes ~0.4 s to import (tests/cli/test_cli_startup.py)

        self._model = model
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=max_retries
        )

    @property
    def method(self) -> str:
        """``embeddings:<model>``."""
        return f"embeddings:{self._model}"

    async def similarity(self, a: str, b: str) -> float:
        """Embed ``a`` and ``b`` in one request; return their cosine clipped to [0, 1].

        Raises:
            JudgeError: ``judge_unavailable`` when the endpoint fails, ``unparseable`` when it does not return
                two vectors of equal length.
        """
        import openai

        try:
            resp = await self._client.embeddings.create(model=self._model, input=[a, b])
        except openai.APIStatusError as e:
            raise JudgeError("judge_unavailable", f"HTTP {e.status_code} from the embeddings endpoint") from e
        except openai.APIError as e:
            raise JudgeError(
                "judge_unavailable", f"{type(e).__name__} calling the embeddings endpoint"
            ) from e
        vecs = sorted(resp.data, key=lambda d: d.index)
        if len(vecs) != 2 or len(vecs[0].embedding) != len(vecs[1].embedding) or not vecs[0].embedding:
            raise JudgeError(
                "unparseable", "the embeddings endpoint did not return two vectors of equal length"
            )
        return cosine(vecs[0].embedding, vecs[1].embedding)

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()


def similarity_from_settings(settings: Settings) -> Similarity:
    """Embeddings when ``embeddings_base_url`` and ``embeddings_model`` are set, else the lexical fallback."""
    if settings.embeddings.base_url and settings.embeddings.model:
        key = settings.embeddings.api_key.get_secret_value() if settings.embeddings.api_key else None
        return EmbeddingSimilarity(
            base_url=settings.embeddings.base_url,
            model=settings.embeddings.model,
            api_key=key,
            timeout_s=settings.judge.timeout_s,
            max_retries=settings.judge.max_retries,
        )
    return LexicalSimilarity()
