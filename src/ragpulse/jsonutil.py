"""Strict JSON parsing shared by every input path (Kafka events, test-set files).

Python's :func:`json.loads` accepts ``NaN``, ``Infinity`` and ``-Infinity``, which the JSON standard (RFC 8259)
does not; stored in PostgreSQL ``jsonb`` they would silently become ``null``. :func:`strict_loads` rejects them,
and numbers too large for a float (``1e999``, which Python reads as infinity).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["finite_float", "reject_constant", "strict_loads"]


def reject_constant(name: str) -> float:
    """``parse_constant`` hook: raise ``ValueError("NaN is not a valid JSON number")`` (or Infinity …)."""
    raise ValueError(f"{name} is not a valid JSON number")


def finite_float(text: str) -> float:
    """``parse_float`` hook: the float of ``text``; ``ValueError`` when it overflows to infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite JSON number")
    return value


def strict_loads(text: str | bytes) -> Any:
    """:func:`json.loads` that rejects ``NaN``/``Infinity``/``-Infinity`` and numbers that overflow a float.

    Raises:
        json.JSONDecodeError: not JSON.
        ValueError: a non-finite number constant (the message names it).
        RecursionError: nested too deeply.
    """
    return json.loads(text, parse_constant=reject_constant, parse_float=finite_float)
