"""Ask the RAG service under test for an answer: HTTP POST of the question, JSON back (httpx).

Request body: ``{<rag_request_question_field>: question}``. Response: a JSON object from which the answer,
the retrieved contexts and the doc ids are read at ``rag_response_answer_field``,
``rag_response_contexts_field`` and ``rag_response_doc_ids_field``. A field name may be a dotted path
(``data.answer``). Contexts may be strings or objects with ``content``/``text`` (and ``id``).
``rag_endpoint_api_key`` (environment only) is sent as ``Authorization: Bearer …``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import httpx

from ragpulse.config import Settings
from ragpulse.errors import RagpulseError

__all__ = ["RagAnswer", "RagClient", "RagEndpointError"]


#: Characters of a failed reply's own error text kept in the case's reason (run page, report, ``runs show``).
ERROR_TEXT_CHARS = 300


def _error_text(resp: httpx.Response) -> str:
    """What a failed reply says: a JSON body's ``error``/``detail``/``message`` (a string, or an object's
    ``message``), else the body as text; control characters dropped, whitespace collapsed, at most
    :data:`ERROR_TEXT_CHARS` characters. Empty when the body says nothing."""
    text = ""
    try:
        doc = resp.json()
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        for key in ("error", "detail", "message"):
            v = doc.get(key)
            if isinstance(v, dict):
                v = v.get("message")
            if isinstance(v, str) and v.strip():
                text = v
                break
    if not text:
        text = resp.text
    text = " ".join("".join(ch if ch.isprintable() or ch.isspace() else " " for ch in text).split())
    return text[:ERROR_TEXT_CHARS] + ("…" if len(text) > ERROR_TEXT_CHARS else "")


class RagEndpointError(RagpulseError):
    """The RAG endpoint failed (connection error, timeout, non-2xx status, or a reply without an answer).

    The message starts with the reason code ``rag_endpoint_error``.
    """


@dataclass(frozen=True)
class RagAnswer:
    """What the RAG service answered: ``answer``, ``contexts`` and ``doc_ids`` in rank order, and the
    request's wall time ``latency_s`` (seconds)."""

    answer: str
    contexts: tuple[str, ...] = ()
    doc_ids: tuple[str | None, ...] = ()
    latency_s: float = 0.0


def _get(doc: Any, path: str) -> Any:
    cur = doc
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


class RagClient:
    """Async client of the configured RAG endpoint; use as an async context manager.

    Args:
        settings: ``rag_endpoint_url`` (required), field names, ``rag_endpoint_timeout_s`` (seconds),
            ``rag_endpoint_api_key``.
        client: an ``httpx.AsyncClient`` to use (tests); by default one is created and closed by this object.

    Raises:
        ValueError: ``settings.rag.endpoint_url`` is not set.
    """

    def __init__(
        self,
        settings: Settings,
        client: httpx.AsyncClient | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        if not settings.rag.endpoint_url:
            raise ValueError("rag_endpoint_url is not configured")
        self._url = settings.rag.endpoint_url
        #: more request fields sent with every question (a portal run's top-k and similarity threshold)
        self._extra = dict(extra or {})
        self._s = settings
        headers = {"content-type": "application/json"}
        if settings.rag.endpoint_api_key is not None:
            headers["authorization"] = f"Bearer {settings.rag.endpoint_api_key.get_secret_value()}"
        self._own = client is None
        self._client = client or httpx.AsyncClient(timeout=settings.rag.endpoint_timeout_s)
        self._headers = headers

    async def ask(self, question: str) -> RagAnswer:
        """POST ``question`` and parse the reply.

        Raises:
            RagEndpointError: transport error or timeout, non-2xx status, non-JSON body, or no answer field.
        """
        s = self._s
        started = time.perf_counter()
        try:
            resp = await self._client.post(
                self._url, json={**self._extra, s.rag.request_question_field: question}, headers=self._headers
            )
        except httpx.HTTPError as e:
            raise RagEndpointError(f"rag_endpoint_error: {type(e).__name__}: {e}", retriable=True) from e
        latency = time.perf_counter() - started
        if resp.status_code >= 300:
            said = _error_text(resp)
            raise RagEndpointError(
                f"rag_endpoint_error: HTTP {resp.status_code}" + (f": {said}" if said else ""),
                retriable=resp.status_code >= 500,
            )
        try:
            doc = resp.json()
        except ValueError as e:
            raise RagEndpointError("rag_endpoint_error: reply is not JSON") from e
        answer = _get(doc, s.rag.response_answer_field)
        if not isinstance(answer, str):
            raise RagEndpointError(f"rag_endpoint_error: reply has no string '{s.rag.response_answer_field}'")
        contexts: list[str] = []
        ctx_ids: list[str | None] = []
        raw_ctx = _get(doc, s.rag.response_contexts_field)
        for c in raw_ctx if isinstance(raw_ctx, list) else []:
            if isinstance(c, str):
                contexts.append(c)
                ctx_ids.append(None)
            elif isinstance(c, Mapping) and isinstance(c.get("content", c.get("text")), str):
                contexts.append(c.get("content", c.get("text")))
                cid = c.get("id", c.get("doc_id"))
                ctx_ids.append(None if cid is None else str(cid))
        raw_ids = _get(doc, s.rag.response_doc_ids_field)
        doc_ids: list[str | None] = (
            [None if i is None else str(i) for i in raw_ids] if isinstance(raw_ids, list) else ctx_ids
        )
        return RagAnswer(answer=answer, contexts=tuple(contexts), doc_ids=tuple(doc_ids), latency_s=latency)

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._own:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
