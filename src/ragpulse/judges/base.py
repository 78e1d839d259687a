"""Deprecated (kept for one release): use :mod:`ragpulse.judges.frame` (``ok``, ``skipped``, ``error``,
``precheck``, ``compute_version`` and the :class:`~ragpulse.judges.frame.Judge` base class)."""

from __future__ import annotations

import warnings
from typing import Any

from ragpulse.judges import frame

_MOVED = frozenset({"compute_version", "error", "ok", "precheck", "skipped"})


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        warnings.warn(
            f"ragpulse.judges.base.{name} is deprecated; use ragpulse.judges.frame.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(frame, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
