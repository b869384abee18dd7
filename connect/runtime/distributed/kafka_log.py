"""``KafkaBasedLog``: a compacted topic read from the beginning by a background consumer, with
``read_to_end`` and synchronous writes. The three internal-topic stores are built on it.

Reading: a consumer is assigned every partition at the earliest offset (no group, no
commits); each record is handed to a callback on the reader thread. ``read_to_end`` takes the
partitions' high watermarks now and waits until the reader has passed them, counting
end-of-partition events so that transaction markers or compacted gaps at the end do not stall it.
Writing: an idempotent ``acks=all`` producer; ``send`` returns once the broker acknowledged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from strom.connect.exceptions import ConnectException

log = logging.getLogger(__name__)

RecordCallback = Callable[[int, int, bytes | None, bytes | None], None]
"""(partition, offset, key, value) of one record."""


def ensure_topic(admin_conf: Mapping[str, Any], topic: str, partitions: int, replication_factor: int,
                 timeout: float = 30.0) -> int:
    """Create ``topic`` compacted if it does not exist; returns its partition count.

    A replication factor above the cluster's broker count is lowered to it (with a warning), so
    a worker with Kafka's defaults (3) runs on the single bundled broker; -1 means the broker's
    default.
    """
    admin = AdminClient(dict(admin_conf))
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as e:
        raise ConnectException(f"cannot reach the Kafka cluster at {admin_conf.get('bootstrap.servers')} "
                               f"to set up internal topic {topic}: {e}") from e
    existing = md.topics.get(topic)
    if existing is not None and existing.error is None:
        return len(existing.partitions)
    brokers = max(len(md.brokers), 1)
    rf = replication_factor
    if rf > brokers:
        log.warning("replication factor %d of %s exceeds the %d broker(s); using %d", rf, topic, brokers, brokers)
        rf = brokers
    fut = admin.create_topics([NewTopic(topic, partitions, rf, config={"cleanup.policy": "compact"})],
                              request_timeout=timeout)[topic]
    try:
        fut.result(timeout)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ConnectException(f"cannot create internal topic {topic}: {e}") from e
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if t is not None and t.error is None and t.partitions:
            return len(t.partitions)
        time.sleep(0.1)
    raise ConnectException(f"internal topic {topic} did not appear within {timeout}s")


def check_compacted(admin_conf: Mapping[str, Any], topic: str, timeout: float = 30.0) -> None:
    """Kafka Connect refuses internal topics that are not compacted: they would lose data."""
    from confluent_kafka.admin import ConfigResource
    admin = AdminClient(dict(admin_conf))
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        configs = admin.describe_configs([res], request_timeout=timeout)[res].result(timeout)
    except KafkaException as e:
        raise ConnectException(f"cannot describe internal topic {topic}: {e}") from e
    policy = configs.get("cleanup.policy")
    if policy is not None and "compact" not in str(policy.value).split(","):
        raise ConnectException(f"internal topic {topic} has cleanup.policy={policy.value}; "
                               "Kafka Connect requires 'compact' so that no config, offset or status is lost")


class KafkaBasedLog:
    """One internal topic: background reader + synchronous writer (see the module docstring)."""

    def __init__(self, topic: str, producer_conf: Mapping[str, Any], consumer_conf: Mapping[str, Any],
                 callback: RecordCallback, *, name: str = "") -> None:
        self.topic = topic
        self.callback = callback
        self.name = name or topic
        # murmur2: the Java producer's partitioner, so every key lands where Kafka Connect's
        # workers put it (and compaction sees one partition per key, whoever wrote it)
        self._producer_conf = {**producer_conf, "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                               "partitioner": "murmur2_random"}
        self._consumer_conf = {**consumer_conf, "group.id": f"strom-connect-log-{topic}",
                               "enable.auto.commit": False, "enable.partition.eof": True,
                               "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        # confluent-kafka deadlocks a watermark query made while another thread is in consume()
        # on the same handle, so end offsets come from a second, never-assigned consumer.
        self._meta: Consumer | None = None
        self._meta_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._positions: dict[int, int] = {}
        self._partitions: list[int] = []
        self.error: BaseException | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        self._producer = Producer(self._producer_conf)
        self._consumer = Consumer(self._consumer_conf)
        self._meta = Consumer(self._consumer_conf)
        md = self._meta.list_topics(self.topic, timeout=timeout).topics.get(self.topic)
        if md is None or md.error is not None or not md.partitions:
            raise ConnectException(f"internal topic {self.topic} does not exist")
        self._partitions = sorted(md.partitions)
        self._positions = dict.fromkeys(self._partitions, 0)
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._partitions])
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"kafka-log-{self.name}")
        self._thread.start()
        self.read_to_end(timeout)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
        for c in (self._consumer, self._meta):
            if c is not None:
                c.close()
        self._consumer = self._meta = None

    @property
    def partitions(self) -> list[int]:
        return list(self._partitions)

    # -- reading ------------------------------------------------------------------------------

    def _run(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stop.is_set():
            try:
                msgs = consumer.consume(500, 0.1)
            except KafkaException as e:
                log.warning("reading %s: %s", self.topic, e)
                continue
            if not msgs:
                continue
            for msg in msgs:
                self._handle(msg)
            with self._cond:
                self._cond.notify_all()

    def _handle(self, msg: Message) -> None:
        err = msg.error()
        part = msg.partition() or 0
        offset = msg.offset() or 0
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                with self._cond:
                    self._positions[part] = max(self._positions.get(part, 0), offset)
            else:
                log.warning("reading %s: %s", self.topic, err)
            return
        try:
            self.callback(part, offset, msg.key(), msg.value())
        except Exception as e:  # a bad record must not stop the reader; the store reports it
            log.exception("cannot apply record at %s-%d@%d", self.topic, part, offset)
            self.error = e
        with self._cond:
            self._positions[part] = max(self._positions.get(part, 0), offset + 1)

    def end_offsets(self, timeout: float = 30.0) -> dict[int, int]:
        meta = self._meta
        if meta is None:
            raise ConnectException(f"log of {self.topic} is not started")
        with self._meta_lock:
            return {p: meta.get_watermark_offsets(TopicPartition(self.topic, p), timeout=timeout, cached=False)[1]
                    for p in self._partitions}

    def read_to_end(self, timeout: float = 30.0) -> dict[int, int]:
        """Block until every record written before the call has been handed to the callback;
        returns the end offsets reached."""
        deadline = time.monotonic() + timeout
        ends = self.end_offsets(timeout)
        with self._cond:
            while any(self._positions.get(p, 0) < end for p, end in ends.items()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    behind = {p: (self._positions.get(p, 0), e) for p, e in ends.items()
                              if self._positions.get(p, 0) < e}
                    raise ConnectException(f"timed out reading {self.topic} to its end: {behind}")
                self._cond.wait(min(remaining, 0.2))
        return ends

    def position(self, partition: int = 0) -> int:
        with self._cond:
            return self._positions.get(partition, 0)

    # -- writing ------------------------------------------------------------------------------

    def send(self, key: bytes | None, value: bytes | None, timeout: float = 30.0) -> tuple[int, int]:
        """Write one record and wait for its acknowledgement; returns (partition, offset)."""
        return self.send_all([(key, value)], timeout)[-1]

    def send_all(self, records: Sequence[tuple[bytes | None, bytes | None]],
                 timeout: float = 30.0) -> list[tuple[int, int]]:
        producer = self._producer
        if producer is None:
            raise ConnectException(f"log of {self.topic} is not started")
        results: list[tuple[int, int] | BaseException | None] = [None] * len(records)

        def done(i: int) -> Callable[[Any, Message], None]:
            def cb(err: Any, msg: Message) -> None:
                results[i] = ConnectException(f"write to {self.topic} failed: {err}") if err is not None \
                    else (msg.partition() or 0, msg.offset() or 0)
            return cb

        deadline = time.monotonic() + timeout
        for i, (k, v) in enumerate(records):
            while True:
                try:
                    producer.produce(self.topic, value=v, key=k, on_delivery=done(i))
                    break
                except BufferError:  # queue full: back-pressure, within the call's timeout
                    if time.monotonic() >= deadline:
                        raise ConnectException(f"write to {self.topic}: no room in the producer queue within "
                                               f"{timeout}s") from None
                    producer.poll(0.1)
        remaining = producer.flush(max(deadline - time.monotonic(), 0.0))
        if remaining:
            raise ConnectException(f"write to {self.topic} not acknowledged within {timeout}s")
        out: list[tuple[int, int]] = []
        for r in results:
            if isinstance(r, BaseException):
                raise r
            assert r is not None
            out.append(r)
        return out
