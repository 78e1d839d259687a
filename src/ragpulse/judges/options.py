"""Reading per-judge options (``settings.judge.options[<name>]``) shared by the offline judges."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ragpulse.errors import ConfigError

__all__ = ["read_threshold"]


def read_threshold(options: Mapping[str, Any], default: float, judge: str) -> float:
    """The ``threshold`` option as a float in [0, 1], or ``default`` when absent.

    Raises:
        ConfigError: the value is not a finite number in [0, 1].
    """
    raw = options.get("threshold", default)
    try:
        value = float(raw)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"judges.{judge}.threshold must be a number in [0, 1], got {raw!r}") from e
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"judges.{judge}.threshold must be in [0, 1], got {raw!r}")
    return value
