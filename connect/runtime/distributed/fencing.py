"""Zombie fencing for exactly-once source connectors (KIP-618): which transactional ids a round
fences, and fencing them with confluent-kafka.

Kafka's ``Worker.fenceZombies`` asks ``Admin.fenceProducers`` to fence the ids of tasks
``0..<last task-count record>-1`` (``Worker.taskTransactionalId``: ``<group.id>-<connector>-<task>``).
librdkafka has no fenceProducers; what that admin call does on the broker is an
``InitProducerId`` for the transactional id, which bumps the producer epoch and aborts an open
transaction. A transactional producer calling ``init_transactions()`` sends that same request,
so it fences an older producer with that id just as well; it is closed right after, without ever
producing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer

from strom.connect.exceptions import ConnectException

log = logging.getLogger(__name__)

# Settings of the worker's producer that make no sense for a producer that only initializes.
_DROP = ("transactional.id", "linger.ms", "batch.size", "batch.num.messages", "compression.type",
         "transaction.timeout.ms")


def task_transactional_id(group_id: str, connector: str, task: int) -> str:
    """Kafka's ``Worker.taskTransactionalId``."""
    return f"{group_id}-{connector}-{task}"


def transactional_ids(group_id: str, connector: str, task_count: int) -> list[str]:
    """The ids a fencing round covers: every task of a generation of ``task_count`` tasks."""
    return [task_transactional_id(group_id, connector, i) for i in range(task_count)]


def fence_producers(producer_conf: Mapping[str, Any], ids: Iterable[str], timeout: float = 60.0) -> None:
    """Fence every producer using one of ``ids``; raises ``ConnectException`` if one cannot be."""
    base = {k: v for k, v in producer_conf.items() if k not in _DROP}
    base.update({"enable.idempotence": True, "acks": "all"})
    for tid in ids:
        producer = Producer({**base, "transactional.id": tid})
        try:
            # The broker bumps the epoch (aborting the zombie's open transaction); the zombie's
            # next produce/commit fails with a fencing error.
            producer.init_transactions(timeout)
        except KafkaException as exc:
            raise ConnectException(f"could not fence transactional id {tid}: {exc}") from exc
        finally:
            producer.close()
        log.debug("fenced producers of transactional id %s", tid)


__all__ = ["fence_producers", "task_transactional_id", "transactional_ids"]
