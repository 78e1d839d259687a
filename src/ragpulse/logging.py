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


def _stderr_logger(*_: Any) -> structlog.PrintLogger:
    return structlog.PrintLogger(file=sys.stderr)


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
        # sys.stderr is looked up when a logger is made, not now (test runners swap it).
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=max(lvl, logging.WARNING), stream=sys.stderr, format="%(name)s %(levelname)s %(message)s"
    )
    logging.getLogger("jieba").setLevel(logging.WARNING)


def get_logger(name: str | None = None) -> Any:
    """Return a structlog logger bound to ``logger=name``.

    The logger is a lazy proxy: a module-level ``log = get_logger(__name__)`` follows a later
    :func:`configure_logging` (``.bind()`` here would freeze the configuration current at import time).
    """
    return structlog.get_logger() if name is None else _NamedLogger(name)


class _NamedLogger:
    """Binds ``logger=name`` on every use, against the structlog configuration current at that moment."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(structlog.get_logger().bind(logger=self._name), attr)
