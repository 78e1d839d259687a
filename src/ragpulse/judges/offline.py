"""Deprecated (kept for one release): subclass :class:`ragpulse.judges.frame.Judge` and implement
``decide_now`` instead of ``OfflineJudge.evaluate``."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar

from ragpulse.config import Settings
from ragpulse.judges.frame import Judge, ok
from ragpulse.model import Judgement, JudgementFlags, Trace

__all__ = ["OfflineJudge"]


class OfflineJudge(Judge):
    """The former base of the offline judges: ``DEFAULT_NAME``, ``DEFAULT_THRESHOLD``, ``METHOD``,
    ``_version_settings()``, ``_ok(score, reason, decided_by, started)`` and a synchronous ``evaluate``."""

    DEFAULT_NAME: ClassVar[str]

    def __init__(self, settings: Settings, options: Mapping[str, Any] | None = None) -> None:
        msg = "ragpulse.judges.offline.OfflineJudge is deprecated; subclass ragpulse.judges.frame.Judge"
        warnings.warn(msg, DeprecationWarning, stacklevel=2)
        opts = dict(options or {})
        self.name = str(opts.get("name", self.DEFAULT_NAME))
        super().__init__(settings, {k: v for k, v in opts.items() if k == "threshold"})
        self._settings = settings

    def _version_settings(self) -> dict[str, Any]:
        return {}

    def version_settings(self) -> dict[str, Any]:
        return {"method": self.METHOD, "threshold": self.threshold, **self._version_settings()}

    def _common(self) -> dict[str, Any]:
        return {"judge": self.name, "version": self.version, "backend": self.backend}

    def _ok(self, score: float, reason: str, decided_by: str, started: float) -> Judgement:
        flags = JudgementFlags(decided_by=decided_by)
        latency = time.perf_counter() - started
        return ok(
            score=score,
            threshold=self.threshold,
            reason=reason,
            flags=flags,
            latency_s=latency,
            **self._common(),
        )

    async def judge(self, trace: Trace) -> Judgement:
        return self.evaluate(trace)
