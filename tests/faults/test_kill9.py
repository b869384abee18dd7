"""kill -9 the broker under load and damage its files: acknowledged data survives, the log continues.

acks=1 and acks=all answer after the batch is in the page cache (single node); a SIGKILL of the
process does not lose the page cache, so every acknowledged record must be readable after a
restart at exactly the offset its acknowledgement named. A torn tail (the process died
mid-write) must be truncated at restart with a warning naming the segment file, and missing
index files rebuilt.
"""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

import pytest
from ck_helpers import create_topic, make_consumer, make_producer, produce_all, read_partition
from confluent_kafka import KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from strom.core.testing import BrokerProcess

PARTITIONS = 2
LOG_OVERHEAD = 12  # base_offset int64 + batch_length int32


class _Recorder:
    """Produces unique values on a thread and records every acknowledged (partition, offset, value)."""

    def __init__(self, bootstrap: str, topic: str, acks: str) -> None:
        self.topic = topic
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self.stop = threading.Event()
        self.producer = make_producer(bootstrap, acks=acks, **{
            "linger.ms": 2, "retries": 0, "message.timeout.ms": 5000, "queue.buffering.max.messages": 20000,
            "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})
        self.thread = threading.Thread(target=self._run, name=f"produce-{acks}")

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            partition, offset, value = msg.partition(), msg.offset(), msg.value()
            assert partition is not None and offset is not None and isinstance(value, bytes)
            self.acked.append((partition, offset, value))
        else:
            self.failed += 1

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, value=f"rec-{i:08d}".encode(), partition=i % PARTITIONS,
                                      on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0)
        # Drop what was never acknowledged: those records may or may not be on disk.
        self.producer.purge(in_queue=True, in_flight=True)
        self.producer.flush(10)

    def start(self) -> None:
        self.thread.start()

    def wait_acked(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < n:
            assert time.monotonic() < deadline, f"only {len(self.acked)} acks within {timeout}s"
            time.sleep(0.01)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def _read_all(bootstrap: str, topic: str, partition: int) -> list[Message]:
    consumer = make_consumer(bootstrap)
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()
    assert low == 0
    return read_partition(bootstrap, topic, partition, high, 0, timeout=60) if high else []


@pytest.mark.parametrize("acks", ["1", "all"])
def test_acknowledged_records_survive_kill9(acks: str, fresh_broker: BrokerProcess, topic_name: str) -> None:
    fresh_broker.start()
    create_topic(AdminClient({"bootstrap.servers": fresh_broker.bootstrap}), topic_name, partitions=PARTITIONS)
    rec = _Recorder(fresh_broker.bootstrap, topic_name, acks)
    rec.start()
    try:
        rec.wait_acked(3000)
        assert rec.thread.is_alive()
        fresh_broker.kill()  # mid-stream: the producer is still sending
        in_flight_at_kill = len(rec.acked)
    finally:
        rec.finish()
    acked = list(rec.acked)
    assert len(acked) >= in_flight_at_kill >= 3000

    fresh_broker.start()
    for p in range(PARTITIONS):
        msgs = _read_all(fresh_broker.bootstrap, topic_name, p)
        stored = {int(m.offset() or 0): m.value() for m in msgs}
        assert sorted(stored) == list(range(len(msgs))), f"partition {p}: offsets not contiguous"
        mine = [(o, v) for (part, o, v) in acked if part == p]
        lost = [(o, v) for o, v in mine if stored.get(o) != v]
        assert not lost, f"partition {p}: {len(lost)} acknowledged records lost or moved, first {lost[:3]}"
        # The log continues right after what survived.
        after = produce_all(make_producer(fresh_broker.bootstrap, acks=acks),
                            topic_name, [{"value": b"after-restart", "partition": p}])
        assert after[0].offset == len(msgs)
        again = read_partition(fresh_broker.bootstrap, topic_name, p, 1, len(msgs))
        assert again[0].value() == b"after-restart"


def _batches(path: Path) -> list[tuple[int, int, int]]:
    """(file position, base offset, size) of each batch in a segment file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + LOG_OVERHEAD <= len(data):
        base_offset, batch_length = struct.unpack_from(">qi", data, pos)
        size = LOG_OVERHEAD + batch_length
        if batch_length <= 0 or pos + size > len(data):
            break
        out.append((pos, base_offset, size))
        pos += size
    return out


def test_torn_tail_and_missing_indexes_recovered(fresh_broker: BrokerProcess, topic_name: str) -> None:
    fresh_broker.start()
    create_topic(AdminClient({"bootstrap.servers": fresh_broker.bootstrap}), topic_name)
    producer = make_producer(fresh_broker.bootstrap, acks="all")
    for b in range(5):  # five batches of 20 records (flush between them)
        produce_all(producer, topic_name, [{"value": f"b{b}-r{r}".encode(), "key": b"k"} for r in range(20)])
    fresh_broker.kill()

    part_dirs = [d for d in fresh_broker.data_dir.rglob(f"{topic_name}-0") if d.is_dir()]
    assert len(part_dirs) == 1, part_dirs
    pdir = part_dirs[0]
    segment = pdir / "00000000000000000000.log"
    assert segment.exists(), sorted(p.name for p in pdir.iterdir())
    batches = _batches(segment)
    assert [b[1] for b in batches] == [0, 20, 40, 60, 80]
    for name in ("00000000000000000000.index", "00000000000000000000.timeindex"):
        (pdir / name).unlink(missing_ok=True)
    last_pos, _, last_size = batches[-1]
    with segment.open("r+b") as f:
        f.truncate(last_pos + last_size // 2)  # the last batch is torn in the middle

    fresh_broker.start()
    assert fresh_broker.wait_for_log(segment.name, timeout=10), fresh_broker.log_text()
    lines = [ln for ln in fresh_broker.log_text().splitlines() if segment.name in ln]
    assert any(w in ln.lower() for ln in lines for w in ("warn", "truncat", "corrupt", "torn")), lines

    msgs = _read_all(fresh_broker.bootstrap, topic_name, 0)
    assert [(m.offset(), m.value()) for m in msgs] == [
        (b * 20 + r, f"b{b}-r{r}".encode()) for b in range(4) for r in range(20)]
    # Rebuilt offset index: a seek into the middle of the log lands where it should.
    mid = read_partition(fresh_broker.bootstrap, topic_name, 0, 3, 47)
    assert [m.value() for m in mid] == [b"b2-r7", b"b2-r8", b"b2-r9"]
    # The log continues at the truncation point.
    after = produce_all(make_producer(fresh_broker.bootstrap), topic_name, [{"value": b"new"}])
    assert after[0].offset == 80
    assert segment.stat().st_size == last_pos + _batches(segment)[-1][2]
