"""What the API and UI handlers need: the store, the judges and engine of ``serve``, and the API options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragpulse.config import Settings
from ragpulse.protocols import Judge, TraceSink
from ragpulse.store import PostgresStore

__all__ = ["ApiOptions", "PortalContext"]


@dataclass(frozen=True)
class ApiOptions:
    """The ``api`` settings section.

    Attributes:
        address: ``host:port`` of the portal listener; ``""`` = off.
        token: bearer token every ``/api/v1`` call and the UI need (``None`` = no token).
        allow_anonymous: allow a non-loopback address without a token.
        max_upload_mb: largest request body, MiB (bigger → 413).
        max_test_set_cases: most cases a stored test set holds (more → 422 ``too_many_cases``).
        trusted_proxies: addresses/networks of the proxies in front of the portal (``X-Forwarded-*`` and the
            UI's bearer header are believed from them only).
    """

    address: str = "127.0.0.1:9470"
    token: str | None = None
    allow_anonymous: bool = False
    max_upload_mb: float = 20.0
    max_test_set_cases: int = 100_000
    trusted_proxies: tuple[str, ...] = ()

    @property
    def max_upload_bytes(self) -> int:
        """:attr:`max_upload_mb` in bytes."""
        return int(self.max_upload_mb * 1024 * 1024)

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiOptions:
        """Read the ``api`` section of ``settings`` (defaults for what it does not have)."""
        sec = settings.api
        token = sec.token.get_secret_value() if sec.token is not None else None
        return cls(
            address=sec.address,
            token=token or None,
            allow_anonymous=sec.allow_anonymous,
            max_upload_mb=sec.max_upload_mb,
            max_test_set_cases=sec.max_test_set_cases,
            trusted_proxies=tuple(sec.trusted_proxies),
        )


@dataclass
class PortalContext:
    """Everything a request handler may use.

    Attributes:
        store: the result store.
        settings: the process settings (secrets stay in them; never returned).
        options: the API options.
        judges: the judges ``serve`` built, by name.
        engine: where ``POST /evaluate`` submits traces (``None``: evaluation off).
        runs: the run queue worker (``None``: runs cannot be started here).
        redact_text: texts are stored redacted (text search is off).
    """

    store: PostgresStore
    settings: Settings
    options: ApiOptions
    judges: Mapping[str, Judge] = field(default_factory=dict)
    engine: TraceSink | None = None
    runs: Any = None
    redact_text: bool = False
