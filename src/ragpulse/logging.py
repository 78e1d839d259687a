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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(
        level=max(lvl, logging.WARNING), stream=sys.stderr, format="%(name)s %(levelname)s %(message)s"
    )
    logging.getLogger("jieba").setLevel(logging.WARNING)


def get_logger(name: str | None = None) -> Any:
    """Return a structlog logger bound to ``logger=name``."""
    return structlog.get_logger(name) if name is None else structlog.get_logger().bind(logger=name)
