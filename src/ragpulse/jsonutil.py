"""Strict JSON parsing shared by every input path (Kafka events, OTLP/JSON, test-set files, API bodies).

Depth: one limit, :data:`MAX_JSON_DEPTH` (64) levels of nested objects/arrays (the outermost object or array is
level 1), for every JSON document ragpulse reads. A deeper one is refused with the one reason ``too_deep``
(:class:`TooDeep`) before anything walks it recursively — Python's parser itself overflows its stack at a few
thousand levels, and the code that cleans, validates and stores a value recurses too.

Python's :func:`json.loads` accepts ``NaN``, ``Infinity`` and ``-Infinity``, which the JSON standard (RFC 8259)
does not; stored in PostgreSQL ``jsonb`` they would silently become ``null``. :func:`strict_loads` rejects them,
and numbers too large for a float (``1e999``, which Python reads as infinity).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "TooDeep", "check_depth", "finite_float", "reject_constant", "strict_loads"]

#: Deepest nesting of objects and arrays accepted in any JSON input (the outermost container is level 1).
MAX_JSON_DEPTH = 64


class TooDeep(ValueError):
    """A JSON value nested deeper than :data:`MAX_JSON_DEPTH`; ``str()`` starts with the reason ``too_deep``."""

    code = "too_deep"

    def __init__(self, limit: int = MAX_JSON_DEPTH) -> None:
        super().__init__(f"too_deep: JSON nested deeper than {limit} levels")
        self.limit = limit


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> Any:
    """``value`` when its objects/arrays nest at most ``limit`` levels (a scalar is level 0); iterative, so any
    depth is checked without recursion.

    Raises:
        TooDeep: nested deeper.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        if depth > limit:
            raise TooDeep(limit)
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))
    return value


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
    """:func:`json.loads` that rejects ``NaN``/``Infinity``/``-Infinity``, numbers that overflow a float and
    documents nested deeper than :data:`MAX_JSON_DEPTH`.

    Raises:
        json.JSONDecodeError: not JSON.
        TooDeep: nested deeper than :data:`MAX_JSON_DEPTH` (also when the parser itself runs out of stack).
        ValueError: a non-finite number constant (the message names it).
    """
    try:
        value = json.loads(text, parse_constant=reject_constant, parse_float=finite_float)
    except RecursionError as e:
        raise TooDeep() from e
    return check_depth(value)
