"""The one check of a presented token, for every listener of ``serve`` that takes one, and the one record of a
refusal.

Listeners (the ``listener`` label): ``portal`` — ``RAGPULSE_API_TOKEN`` in ``Authorization: Bearer`` on
``/api/v1``, typed at ``/login``, or sent by a trusted single-sign-on proxy; ``otlp_http`` / ``otlp_grpc`` —
``RAGPULSE_OTLP_TOKEN`` in the ``Authorization`` header / ``authorization`` metadata of the OTLP receivers.

- :func:`token_matches` compares in constant time (:func:`hmac.compare_digest` over the UTF-8 bytes, so the time
  taken does not tell how much of a guess was right); :func:`bearer_matches` reads ``Bearer <token>`` (scheme
  case-insensitive) and compares with it.
- :func:`refused` counts a refused attempt on ``ragpulse_auth_refused_total{listener, reason}`` (``reason``:
  ``missing`` — no credentials, ``wrong`` — a token that does not match) and logs one WARNING ``auth_failed``
  with the listener, reason, where (``bearer``, ``login``, ``proxy_bearer``, ``http``, ``grpc``) and the client
  address; never what was presented. There is no rate limit here (the portal's is
  :class:`ragpulse.portal.auth.FailureLimiter`).
"""

from __future__ import annotations

import hmac
from typing import Any, Literal

from ragpulse import telemetry
from ragpulse.logging import get_logger

__all__ = ["LISTENERS", "REASONS", "Listener", "Reason", "bearer_matches", "refused", "token_matches"]

#: A listener that checks a token (the ``listener`` label of ``ragpulse_auth_refused_total``).
Listener = Literal["portal", "otlp_http", "otlp_grpc"]
#: Why an attempt was refused (the ``reason`` label).
Reason = Literal["missing", "wrong"]
LISTENERS: tuple[Listener, ...] = ("portal", "otlp_http", "otlp_grpc")
REASONS: tuple[Reason, ...] = ("missing", "wrong")

_log = get_logger("ragpulse.auth")


def token_matches(given: str, token: str) -> bool:
    """True when ``given`` equals the configured ``token``; compared in constant time over their UTF-8 bytes
    (a character that cannot be encoded, e.g. a lone surrogate, is replaced: never an exception)."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8", "replace"))


def bearer_matches(header: str | None, token: str) -> bool:
    """True when ``header`` (an ``Authorization`` header or gRPC ``authorization`` metadata value) is
    ``Bearer <token>`` (scheme case-insensitive, blanks around the token ignored); :func:`token_matches`."""
    if not header:
        return False
    scheme, _, given = header.strip().partition(" ")
    return scheme.lower() == "bearer" and token_matches(given.strip(), token)


def refused(listener: Listener, reason: Reason, *, where: str, client: str | None, **fields: Any) -> None:
    """Record a refused authentication attempt: +1 on ``ragpulse_auth_refused_total{listener, reason}`` and a
    WARNING ``auth_failed`` (``listener``, ``reason``, ``where``, ``client`` and ``fields``, e.g. the portal's
    ``failures`` in its window). Never pass the presented token or header in ``fields``."""
    telemetry.AUTH_REFUSED.add(1, {"listener": listener, "reason": reason})
    _log.warning(
        "auth_failed", listener=listener, reason=reason, where=where, client=client or "unknown", **fields
    )
