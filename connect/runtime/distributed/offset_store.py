"""``KafkaOffsetBackingStore``: source offsets in ``offset.storage.topic``, the
:class:`~strom.connect.runtime.offsets.OffsetBackingStore` of distributed workers.

Keys and values are Kafka Connect's (``["<connector>",{partition}]`` → offset map, schemaless
JSON; a tombstone resets). Records are partitioned with murmur2 like Java's producer, so a key
lands in the same partition whichever runtime wrote it and compaction keeps only its latest
value. Keys read back are normalised with ``canonical_key`` (Kafka Connect may order map keys
differently). ``get`` reads the topic to its end first, so a task restarted on another worker
sees the offsets its previous owner flushed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from strom.connect.exceptions import DataException
from strom.connect.runtime.distributed.kafka_log import KafkaBasedLog, check_compacted, ensure_topic
from strom.connect.runtime.offsets import canonical_key
from strom.partitioner import murmur2_partition

log = logging.getLogger(__name__)


class KafkaOffsetBackingStore:
    """Offsets of every connector of the cluster, read from and written to the offsets topic."""

    def __init__(self, topic: str, producer_conf: Mapping[str, Any], consumer_conf: Mapping[str, Any],
                 admin_conf: Mapping[str, Any], partitions: int = 25, replication_factor: int = 3,
                 read_timeout: float = 30.0) -> None:
        self.topic = topic
        self.admin_conf = dict(admin_conf)
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.read_timeout = read_timeout
        self._lock = threading.Lock()
        self._data: dict[bytes, bytes] = {}
        producer = {**producer_conf, "partitioner": "murmur2_random"}
        self.log = KafkaBasedLog(topic, producer, consumer_conf, self._apply, name="offsets")
        self._started = False

    def start(self) -> None:
        if self._started:
            return
        ensure_topic(self.admin_conf, self.topic, self.partitions, self.replication_factor, self.read_timeout)
        check_compacted(self.admin_conf, self.topic, self.read_timeout)
        self.log.start(self.read_timeout)
        self._started = True

    def stop(self) -> None:
        if self._started:
            self.log.stop()
            self._started = False

    def get(self, keys: Iterable[bytes]) -> dict[bytes, bytes | None]:
        self.log.read_to_end(self.read_timeout)
        with self._lock:
            return {k: self._data.get(k) for k in keys}

    def set(self, values: Mapping[bytes, bytes | None]) -> None:
        if not values:
            return
        self.log.send_all(list(values.items()))
        with self._lock:  # our own writes are visible at once; the reader applies the same values
            for k, v in values.items():
                if v is None:
                    self._data.pop(k, None)
                else:
                    self._data[k] = v

    def snapshot(self) -> dict[bytes, bytes]:
        self.log.read_to_end(self.read_timeout)
        with self._lock:
            return dict(self._data)

    def produce_in_transaction(self, producer: Any, values: Mapping[bytes, bytes | None]) -> bool:
        """Write offsets through an open transactional producer (exactly-once source tasks).
        The reader (read_committed) applies them once the transaction commits."""
        for k, v in values.items():
            producer.produce(self.topic, key=k, value=v, partition=self._partition_for(k))
        return True

    def _partition_for(self, key: bytes) -> int:
        # The task's producer may use another partitioner; pin murmur2 so keys land as Java's would.
        return murmur2_partition(key, max(len(self.log.partitions), 1))

    def _apply(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        try:
            k = canonical_key(key)
        except DataException:
            log.warning("ignoring offset record %s-%d@%d: key is not [connector, partition]", self.topic,
                        partition, offset)
            return
        with self._lock:
            if value is None:
                self._data.pop(k, None)
            else:
                self._data[k] = value

