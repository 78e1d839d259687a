"""``BatchedOtelExporter``: the queue-full / drop / flush / shutdown machinery shared by the OTLP exporters.

:class:`~ragpulse.export.events.EvaluationEventExporter` (log records) and
:class:`~ragpulse.export.spans.EvaluationSpanExporter` (spans) each feed an OTel SDK batch processor owned by a
private provider. This base class holds what they have in common: ``on_stored`` emits one item per changed
judgement, never blocks and never raises; a full queue, a closed exporter or an SDK failure drops the item and
counts it (``dropped``, ``ragpulse_evaluation_events_dropped_total{kind}``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Protocol

from ragpulse import telemetry
from ragpulse.logging import get_logger
from ragpulse.model import Judgement, Trace, TraceResult

__all__ = ["BatchedOtelExporter"]

_log = get_logger(__name__)


class _Provider(Protocol):
    def force_flush(self, timeout_millis: int = ...) -> bool: ...

    def shutdown(self) -> None: ...


class BatchedOtelExporter(ABC):
    """Base of the exporters that hand each stored judgement to an OTel SDK batch processor.

    Subclasses set ``_kind`` (the ``kind`` label of the telemetry counters and the log event names, e.g.
    ``"log"`` / ``"span"``) and implement :meth:`_emit`.

    Args:
        processor: the SDK ``Batch*Processor`` (read only to see whether its queue is full).
        provider: the private SDK provider the processor is attached to (flushed and shut down here).
        max_queue_size: items buffered before new ones are dropped.
        redact: ``settings.store.redact_text`` (subclasses leave free-text explanations out).

    Attributes:
        emitted: items handed to the pipeline. dropped: items dropped (queue full, closed, or SDK failure).
    """

    _kind: ClassVar[str]
    _fail_event: ClassVar[str]
    _shutdown_failed_event: ClassVar[str]

    def __init__(self, processor: object, provider: _Provider, *, max_queue_size: int, redact: bool) -> None:
        self._processor = processor
        self._provider = provider
        self._max_queue = max_queue_size
        self._redact = redact
        self._closed = False
        self.emitted = 0
        self.dropped = 0

    @abstractmethod
    def _emit(self, trace: Trace, j: Judgement) -> None:
        """Hand one judgement to the SDK pipeline (may raise; :meth:`on_stored` counts the failure)."""

    @property
    def kind(self) -> str:
        """The ``kind`` label of this exporter's telemetry counters (``log``, ``span``)."""
        return self._kind

    def _queue_full(self) -> bool:
        # The SDK's batch processors drop the *oldest* item when full and keep no count we can read; we look at
        # the queue (when this SDK version exposes it) to drop the new one and count it instead.
        queue = getattr(getattr(self._processor, "_batch_processor", None), "_queue", None)
        try:
            return queue is not None and len(queue) >= self._max_queue
        except TypeError:
            return False

    def on_stored(self, result: TraceResult, changed: Sequence[Judgement]) -> None:
        """Emit one item per judgement in ``changed``; an empty ``changed`` emits nothing. Never raises."""
        for j in changed:
            if self._closed or self._queue_full():
                self._drop()
                continue
            try:
                self._emit(result.trace, j)
                self.emitted += 1
                telemetry.EVALUATION_EVENTS.add(1, {"kind": self._kind})
            except Exception as e:  # never raise into the engine
                self._drop()
                _log.warning(self._fail_event, error=str(e), error_type=type(e).__name__)

    def _drop(self) -> None:
        self.dropped += 1
        telemetry.EVALUATION_EVENTS_DROPPED.add(1, {"kind": self._kind})

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        """Export buffered items now; ``True`` when everything was exported within ``timeout_s`` seconds."""
        return bool(self._provider.force_flush(timeout_millis=int(timeout_s * 1000)))

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Flush (up to ``timeout_s`` seconds) and stop the pipeline (idempotent); later items are dropped and
        counted. Never raises."""
        if self._closed:
            return
        self._closed = True
        try:
            self._provider.force_flush(timeout_millis=int(timeout_s * 1000))
            self._provider.shutdown()
        except Exception as e:
            _log.warning(self._shutdown_failed_event, error=str(e))
