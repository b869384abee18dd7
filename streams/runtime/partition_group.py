"""PartitionGroup: which buffered record of a task's input partitions is processed next.

Kafka Streams' ``PartitionGroup`` / ``RecordQueue``: a task keeps a queue per input partition and
always processes next the head record with the smallest timestamp across its queues (KIP-353), so
a stream-table join whose table topic holds older records reads the table first even when the
fetch brought the stream's records first. A partition's queue keeps its offset order: a record
whose timestamp goes backwards stays behind its predecessors. On equal head timestamps Kafka's
``PriorityQueue`` puts the queue just processed behind the other, so a run of one partition stops
at a record whose timestamp equals another partition's head.

``max.task.idle.ms`` (KIP-695) decides when a task with an empty queue may process:

* ``-1``: never wait, process whatever is buffered;
* ``>= 0``: an empty partition must be known to have nothing more on the broker, then the task
  waits ``max.task.idle.ms`` more for data before it processes without it (enforced processing).

Kafka reads the consumer's fetched lag for "nothing more on the broker"; librdkafka has no such
call, so strom uses its end-of-partition event instead (``enable.partition.eof``): a partition is
at its end once the fetcher said so and no record came after. No event yet (unknown lag) or
records fetched since (lag > 0): the task waits, as Kafka's does.

The stream thread hands a partition's records over in fetch order and takes back runs: the
consecutive head records of one partition that come before every other partition's head, which
the runtime processes as one batch (the single-partition task skips this class altogether).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import Protocol

logger = logging.getLogger(__name__)

TP = tuple[str, int]


class _Record(Protocol):
    """What the queue needs of a consumed record (confluent_kafka.Message)."""

    def timestamp(self) -> tuple[int, int]: ...


def record_timestamp(rec: _Record, now_ms: int) -> int:
    """The record's timestamp; the wall clock when it has none (as the runtime processes it)."""
    ts = rec.timestamp()[1]
    return ts if ts >= 0 else now_ms


class PartitionGroup:
    """The record queues of one task's input partitions (Kafka's PartitionGroup)."""

    def __init__(self, partitions: Iterable[TP], max_task_idle_ms: int) -> None:
        # insertion order breaks ties between equal head timestamps of partitions not just processed
        self._queues: dict[TP, list[_Record]] = {tp: [] for tp in partitions}
        #: index of each queue's head (the list is compacted once drained)
        self._head: dict[TP, int] = dict.fromkeys(self._queues, 0)
        self._at_end: dict[TP, bool] = dict.fromkeys(self._queues, False)
        self._idle_deadline: dict[TP, int] = {}
        self.max_task_idle_ms = max_task_idle_ms
        #: the partition processed last: on a tie it goes behind the others (Kafka's heap order)
        self._last: TP | None = None
        #: times the task processed although a partition had no data (Kafka's enforced-processing-total)
        self.enforced_processing_total = 0

    @property
    def partitions(self) -> list[TP]:
        return list(self._queues)

    def buffered(self, tp: TP | None = None) -> int:
        """Records buffered in ``tp``'s queue (every queue's when None)."""
        if tp is not None:
            return len(self._queues[tp]) - self._head[tp]
        return sum(len(q) - self._head[p] for p, q in self._queues.items())

    def add_records(self, tp: TP, records: Sequence[_Record]) -> None:
        """Fetched records of ``tp`` (offset order) join the back of its queue."""
        if not records:
            return
        self._queues[tp].extend(records)
        self._at_end[tp] = False
        self._idle_deadline.pop(tp, None)

    def at_end(self, tp: TP) -> None:
        """The fetcher reached the end of ``tp``: nothing more is on the broker for now."""
        if tp in self._at_end:
            self._at_end[tp] = True

    def ready_to_process(self, now_ms: int) -> bool:
        """Kafka's ``PartitionGroup.readyToProcess``: may the task process its next record now?"""
        if self.max_task_idle_ms < 0:
            return self.buffered() > 0
        queued = False
        enforced = False
        for tp, queue in self._queues.items():
            if len(queue) > self._head[tp]:
                queued = True
                continue
            if not self._at_end[tp]:
                # unknown lag, or records on the broker not fetched yet: wait for the fetch
                self._idle_deadline.pop(tp, None)
                return False
            deadline = self._idle_deadline.setdefault(tp, now_ms + self.max_task_idle_ms)
            if now_ms < deadline:
                return False
            enforced = True
        if not queued:
            return False
        if enforced:
            self.enforced_processing_total += 1
            logger.debug("enforced processing: partitions without data passed max.task.idle.ms=%d",
                         self.max_task_idle_ms)
        return True

    def next_run(self, now_ms: int) -> tuple[TP, list[_Record]] | None:
        """The next records to process: the partition whose head has the smallest timestamp, and
        its consecutive records that stay below every other partition's head timestamp."""
        best: TP | None = None
        best_ts = 0
        other_ts = math.inf
        for tp, queue in self._queues.items():
            head = self._head[tp]
            if head >= len(queue):
                continue
            ts = record_timestamp(queue[head], now_ms)
            if best is None or ts < best_ts or (ts == best_ts and best == self._last):
                if best is not None:
                    other_ts = best_ts
                best, best_ts = tp, ts
            elif ts < other_ts:
                other_ts = ts
        if best is None:
            return None
        queue = self._queues[best]
        start = self._head[best]
        end = len(queue)
        if other_ts != math.inf:
            # a tie goes to the other partition (Kafka's heap puts the re-offered queue behind it)
            j = start + 1
            while j < end and record_timestamp(queue[j], now_ms) < other_ts:
                j += 1
            end = j
        run = queue[start:end]
        self._last = best
        if end >= len(queue):
            queue.clear()
            self._head[best] = 0
        else:
            self._head[best] = end
        return best, run

    def clear(self) -> None:
        """Drops every buffered record (the task closes; its consumer seeks back anyway)."""
        for tp, queue in self._queues.items():
            queue.clear()
            self._head[tp] = 0
            self._at_end[tp] = False
        self._idle_deadline.clear()
