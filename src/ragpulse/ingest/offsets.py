"""Per-partition offset bookkeeping for at-least-once commits.

A message's offset is *done* once the engine acknowledged its stored result (or it was dead-lettered).
Messages finish out of order, so the offset committed for a partition is the one after the highest offset
whose predecessors (in arrival order) are all done. Offsets are tracked in arrival order rather than as
``n, n + 1, …`` because a partition's offsets may have gaps (compaction, transaction markers).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from aiokafka.structs import TopicPartition

__all__ = ["OffsetTracker", "PartitionProgress"]


@dataclass
class PartitionProgress:
    """Offsets of one partition handed out and not yet committable.

    Attributes:
        committable: offset to commit (next offset to read), or ``None`` before anything was done.
        committed: the last offset committed to the group coordinator, or ``None``.
    """

    _order: deque[int] = field(default_factory=deque)
    _pending: set[int] = field(default_factory=set)
    _done: set[int] = field(default_factory=set)
    committable: int | None = None
    committed: int | None = None

    def add(self, offset: int) -> None:
        """Record that ``offset`` was read (offsets must arrive in increasing order)."""
        if offset in self._pending:
            return
        self._order.append(offset)
        self._pending.add(offset)

    def done(self, offset: int) -> None:
        """Mark ``offset`` finished; advance ``committable`` over the contiguous finished prefix."""
        if offset not in self._pending:
            return
        self._pending.discard(offset)
        self._done.add(offset)
        while self._order and self._order[0] in self._done:
            first = self._order.popleft()
            self._done.discard(first)
            self.committable = first + 1

    def abandon(self, offset: int) -> None:
        """Give up on ``offset`` without finishing it (its data was dropped, e.g. OTLP spans still in assembly
        when the partition is revoked): no longer in flight, and nothing from it on is committable, so it is
        redelivered to the partition's next owner."""
        self._pending.discard(offset)

    @property
    def in_flight(self) -> int:
        """Offsets read but not done."""
        return len(self._pending)

    @property
    def first_pending(self) -> int | None:
        """Lowest offset read but not finished, or ``None``."""
        return self._order[0] if self._order else None


class OffsetTracker:
    """:class:`PartitionProgress` for every assigned partition."""

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, PartitionProgress] = {}

    def get(self, tp: TopicPartition) -> PartitionProgress | None:
        """Progress of ``tp``, or ``None`` when the partition is not tracked."""
        return self._parts.get(tp)

    def add(self, tp: TopicPartition, offset: int) -> None:
        """Record that ``offset`` of ``tp`` was read."""
        self._parts.setdefault(tp, PartitionProgress()).add(offset)

    def done(self, tp: TopicPartition, offset: int) -> None:
        """Mark ``offset`` of ``tp`` finished (ignored for partitions no longer tracked)."""
        p = self._parts.get(tp)
        if p is not None:
            p.done(offset)

    def abandon(self, tp: TopicPartition, offset: int) -> None:
        """See :meth:`PartitionProgress.abandon` (ignored for partitions no longer tracked)."""
        p = self._parts.get(tp)
        if p is not None:
            p.abandon(offset)

    def to_commit(
        self, tps: set[TopicPartition] | frozenset[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Offsets that advanced since the last commit, for ``tps`` (default: all tracked partitions)."""
        out: dict[TopicPartition, int] = {}
        for tp, p in self._parts.items():
            if tps is not None and tp not in tps:
                continue
            if p.committable is not None and p.committable != p.committed:
                out[tp] = p.committable
        return out

    def mark_committed(self, offsets: dict[TopicPartition, int]) -> None:
        """Record a successful commit of ``offsets``."""
        for tp, off in offsets.items():
            p = self._parts.get(tp)
            if p is not None:
                p.committed = off

    def in_flight(self, tps: set[TopicPartition] | frozenset[TopicPartition] | None = None) -> int:
        """Offsets read and not finished, over ``tps`` (default: all)."""
        return sum(p.in_flight for tp, p in self._parts.items() if tps is None or tp in tps)

    def forget(self, tps: set[TopicPartition] | frozenset[TopicPartition]) -> None:
        """Stop tracking ``tps`` (revoked partitions); late acknowledgements for them are ignored."""
        for tp in tps:
            self._parts.pop(tp, None)
