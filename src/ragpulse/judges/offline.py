"""``OfflineJudge``: what the offline (``backend=heuristic``) judges share — options, version, timing.

:class:`~ragpulse.judges.heuristic.HeuristicFaithfulnessJudge`, :class:`~ragpulse.judges.heuristic.
HeuristicRelevancyJudge` and :class:`~ragpulse.judges.keyword.KeywordJudge` are pure CPU: ``judge`` runs the
synchronous ``evaluate`` of the subclass.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

from ragpulse.config import Settings
from ragpulse.judges.base import compute_version, ok
from ragpulse.judges.options import read_threshold
from ragpulse.model import Backend, Judgement, JudgementFlags, Trace

__all__ = ["OfflineJudge"]


class OfflineJudge:
    """Base of the offline judges.

    Subclasses set ``DEFAULT_NAME``, ``DEFAULT_THRESHOLD`` (0–1) and ``METHOD`` (part of the version), may add
    version settings in :meth:`_version_settings`, and implement :meth:`evaluate`.

    Args:
        settings: ragpulse settings (``redact_text`` keeps answer text out of reasons).
        options: ``settings.judge.options[<name>]``: ``name`` (default ``DEFAULT_NAME``), ``threshold`` (0–1).

    Raises:
        ConfigError: (constructor) the threshold option is not a number in [0, 1].
    """

    DEFAULT_NAME: ClassVar[str]
    DEFAULT_THRESHOLD: ClassVar[float]
    METHOD: ClassVar[str]

    def __init__(self, settings: Settings, options: Mapping[str, Any] | None = None) -> None:
        opts = dict(options or {})
        self.name = str(opts.get("name", self.DEFAULT_NAME))
        self.backend = Backend.HEURISTIC
        self.threshold = read_threshold(opts, self.DEFAULT_THRESHOLD, self.name)
        self.version = compute_version(
            self.name,
            self.backend,
            {"method": self.METHOD, "threshold": self.threshold, **self._version_settings()},
        )
        self._settings = settings

    def _version_settings(self) -> dict[str, Any]:
        """Settings besides method and threshold that change verdicts (hashed into the version)."""
        return {}

    def _common(self) -> dict[str, Any]:
        return {"judge": self.name, "version": self.version, "backend": self.backend}

    def _ok(self, score: float, reason: str, decided_by: str, started: float) -> Judgement:
        """An ``ok`` judgement; ``started`` is the ``time.perf_counter()`` reading when judging began."""
        return ok(
            score=score,
            threshold=self.threshold,
            reason=reason,
            flags=JudgementFlags(decided_by=decided_by),
            latency_s=time.perf_counter() - started,
            **self._common(),
        )

    async def judge(self, trace: Trace) -> Judgement:
        """Judge one trace (score 0–1, see the class docstring) with :meth:`evaluate`; never raises."""
        return self.evaluate(trace)

    def evaluate(self, trace: Trace) -> Judgement:
        """Synchronous form of :meth:`judge` (pure CPU, no I/O)."""
        raise NotImplementedError
