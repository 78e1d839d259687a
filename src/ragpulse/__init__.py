"""ragpulse: an online evaluation sidecar for RAG services.

It consumes RAG traces (Kafka, OTLP), runs judges (relevancy, faithfulness, keyword overlap, …) without
slowing the RAG service, stores every judgement per trace in PostgreSQL and exports score distributions.
"""

from ragpulse.model import (
    Backend,
    Document,
    Judgement,
    JudgementFlags,
    JudgementStatus,
    Source,
    Trace,
    TraceOutcome,
    TraceResult,
)

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "Document",
    "Judgement",
    "JudgementFlags",
    "JudgementStatus",
    "Source",
    "Trace",
    "TraceOutcome",
    "TraceResult",
    "__version__",
]
