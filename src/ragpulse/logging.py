"""structlog set-up: JSON lines by default, a console renderer when stderr is a TTY.

Standard-library loggers (aiokafka, asyncpg, grpc, uvicorn, …) are rendered by the same processors, so every
line of the log is one JSON object (a traceback is a field of its line); aiokafka's reconnect noise is
rate-limited (:class:`RateLimitFilter`).

Question/answer text is never logged unless ``log_text`` is on; API keys are never logged (a processor
masks any key that looks like a secret, as a second line of defence).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any

import structlog

__all__ = ["RateLimitFilter", "configure_logging", "get_logger"]

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
    # Library loggers (aiokafka, asyncpg, grpc, uvicorn …) go through the same renderer: one JSON line per
    # record (tracebacks inside it), never plain text; noisy reconnect loops are rate-limited.
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.stdlib.ExtraAdder(allow=["suppressed"]),
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            _mask_secrets,
            structlog.processors.format_exc_info,
            renderer,
        ],
    )
    root = logging.getLogger()
    for h in [h for h in root.handlers if getattr(h, "_ragpulse", False)]:
        root.removeHandler(h)
    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(formatter)
    handler.addFilter(RateLimitFilter())
    handler._ragpulse = True  # type: ignore[attr-defined]  # marks the handler this function owns
    root.addHandler(handler)
    root.setLevel(max(lvl, logging.WARNING))
    logging.getLogger("jieba").setLevel(logging.WARNING)


class RateLimitFilter(logging.Filter):
    """Lets through at most ``burst`` records per (logger, message template) per ``window_s`` seconds from the
    loggers named by ``prefixes`` (default ``aiokafka``/``kafka``: with the broker gone aiokafka logs ~50
    reconnect errors a second); the first record after a window carries ``suppressed=<n>``, the count dropped.
    Records of other loggers pass untouched."""

    def __init__(
        self, prefixes: tuple[str, ...] = ("aiokafka", "kafka"), window_s: float = 10.0, burst: int = 1
    ) -> None:
        super().__init__()
        self._prefixes = prefixes
        self._window_s = window_s
        self._burst = burst
        self._state: dict[tuple[str, str], list[float]] = {}  # key → [window start, passed, suppressed]

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self._prefixes):
            return True
        key = (record.name, str(record.msg))
        now = time.monotonic()
        st = self._state.get(key)
        if st is None or now - st[0] >= self._window_s:
            if st is not None and st[2]:
                record.suppressed = int(st[2])
            if len(self._state) > 1000:
                self._state.clear()
            self._state[key] = [now, 1.0, 0.0]
            return True
        if st[1] < self._burst:
            st[1] += 1
            return True
        st[2] += 1
        return False


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
