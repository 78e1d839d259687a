"""The evaluation engine: bounded queue → judges → batched store writes → exporters → ack."""

from ragpulse.engine.engine import Engine, EngineClosedError, EngineStats, not_evaluable_reason
from ragpulse.engine.routing import Router
from ragpulse.engine.sampling import is_sampled, sample_point

__all__ = [
    "Engine",
    "EngineClosedError",
    "EngineStats",
    "Router",
    "is_sampled",
    "not_evaluable_reason",
    "sample_point",
]
