"""State and helpers shared by CLI commands: settings loading, logging set-up, clean error exits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer

from ragpulse.config import Settings, load_settings, unknown_env_vars
from ragpulse.errors import ConfigError
from ragpulse.logging import configure_logging, get_logger

__all__ = ["STATE", "fail", "settings"]


@dataclass
class _State:
    config_path: str | None = None
    log_level: str | None = None


STATE = _State()


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` to stderr and return an ``Exit`` to raise (``raise fail(...)``)."""
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(code)


def settings(*, service: bool = False, **overrides: Any) -> Settings:
    """Load settings (config file + env + overrides) and configure logging; exit 2 on a config error.

    One-shot commands (``service=False``) log at WARNING unless a level was set (``--log-level``,
    ``RAGPULSE_LOG_LEVEL`` or the config file), so their report is not buried in progress lines; ``serve``
    logs at the configured level (INFO by default). Unknown ``RAGPULSE_*`` environment variables (typos) are
    reported as warnings.
    """
    if STATE.log_level is not None:  # --log-level wins over RAGPULSE_LOG_LEVEL and is validated like it
        overrides = {"log_level": STATE.log_level, **overrides}
    try:
        s = load_settings(STATE.config_path, **overrides)
    except ConfigError as e:
        raise fail(str(e)) from e
    level = s.log.level if service or "level" in s.log.model_fields_set else "WARNING"
    configure_logging(level, json=s.log.json_)
    for name in unknown_env_vars():
        get_logger("ragpulse.config").warning("unknown_setting_env", variable=name)
    return s
