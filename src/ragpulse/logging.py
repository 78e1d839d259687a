"""structlog set-up: JSON lines by default, a console renderer when stderr is a TTY.

Question/answer text is never logged unless ``log_text`` is on; API keys are never logged (a processor
masks any key that looks like a secret, as a second line of defence).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = ["configure_logging", "get_logger"]

_SECRET_KEYS = ("api_key", "apikey", "password", "secret", "token", "authorization")


def _mask_secrets(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for k in list(event_dict):
        kl = k.lower()
        if any(s in kl for s in _SECRET_KEYS) and not kl.endswith("_tokens") and kl != "tokens":
            event_dict[k] = "***"
    return event_dict


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of the write (test runners swap and close it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: str = "INFO", *, json: bool | None = None) -> None:
    """Configure structlog and the stdlib root logger.

    Args:
        level: ``DEBUG``, ``INFO``, ``WARNING`` or ``ERROR``.
        json: force JSON (``True``) or console (``False``) output; ``None`` picks console on a TTY.
    """
    lvl = logging.getLevelName(level.upper())
    if not isinstance(lvl, int):
        lvl = logging.INFO
    use_json = (not sys.stderr.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer(ensure_ascii=False)
        if use_json
        else (structlog.dev.ConsoleRenderer())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _mask_secrets,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=max(lvl, logging.WARNING), stream=sys.stderr, format="%(name)s %(levelname)s %(message)s"
    )
    logging.getLogger("jieba").setLevel(logging.WARNING)


class _NamedLogger:
    """A logger named ``name`` that resolves structlog's configuration on every call (never cached), so a
    module-level logger follows later :func:`configure_logging` calls and the current stderr."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(structlog.get_logger().bind(logger=self._name), attr)


def get_logger(name: str | None = None) -> Any:
    """Return a structlog logger bound to ``logger=name`` (resolved lazily at each call)."""
    return structlog.get_logger() if name is None else _NamedLogger(name)
