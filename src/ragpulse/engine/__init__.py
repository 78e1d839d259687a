"""The evaluation engine: bounded queue → judges → batched store writes → exporters → ack."""

from ragpulse.engine.engine import (
    REUSED_FROM_SHADOW,
    Engine,
    EngineClosedError,
    EngineStats,
    not_evaluable_reason,
    reused_shadow,
)
from ragpulse.engine.routing import Router
from ragpulse.engine.sampling import is_sampled, sample_point

__all__ = [
    "REUSED_FROM_SHADOW",
    "Engine",
    "EngineClosedError",
    "EngineStats",
    "Router",
    "is_sampled",
    "not_evaluable_reason",
    "reused_shadow",
    "sample_point",
]
