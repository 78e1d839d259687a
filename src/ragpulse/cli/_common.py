"""State and helpers shared by CLI commands: settings loading, logging set-up, clean error exits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer

from ragpulse.config import Settings, load_settings
from ragpulse.errors import ConfigError
from ragpulse.logging import configure_logging

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


def settings(**overrides: Any) -> Settings:
    """Load settings (config file + env + overrides) and configure logging; exit 2 on a config error."""
    if STATE.log_level is not None:  # --log-level wins over RAGPULSE_LOG_LEVEL and is validated like it
        overrides = {"log_level": STATE.log_level, **overrides}
    try:
        s = load_settings(STATE.config_path, **overrides)
    except ConfigError as e:
        raise fail(str(e)) from e
    configure_logging(s.log_level, json=s.log_json)
    return s
