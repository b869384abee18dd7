"""A full disk answers KAFKA_STORAGE_ERROR, never kills the broker, never loses an acknowledged record.

The broker's data dir is a 16 MB tmpfs (mounting needs root; the test is skipped otherwise).
A ballast file in the same tmpfs stands for "the rest of the disk": producing fills what is
left, then the broker must stay up, answer producers KAFKA_STORAGE_ERROR (56) rather than
UNKNOWN_SERVER_ERROR, log one ERROR naming the log dir, and keep serving reads of what it
acknowledged. After a stop, the ballast is deleted (space freed) and the broker restarted:
every acknowledged offset reads back with its value.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ck_helpers import create_topic, read_partition
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from strom.core.testing import BrokerProcess

TMPFS_SIZE = "16m"
BALLAST_BYTES = 6 * 1024 * 1024
VALUE = b"x" * 1000


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


class _Acks:
    """Delivery reports of one producer: acknowledged (offset, value) and error codes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[int, bytes] = {}
        self.errors: list[int] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            if err is None:
                offset, value = msg.offset(), msg.value()
                assert offset is not None and isinstance(value, bytes)
                self.acked[offset] = value
            else:
                self.errors.append(err.code())


def test_full_disk_answers_storage_error_and_keeps_acknowledged_records(tmpfs: Path) -> None:
    broker = BrokerProcess(tmpfs / "data")
    topic = f"full-{uuid.uuid4().hex[:8]}"
    try:
        broker.start()
        create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), topic)
        (tmpfs / "ballast").write_bytes(b"\1" * BALLAST_BYTES)
        acks = _Acks()
        # No retries: each refused batch shows its error at once.
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0,
                             "enable.idempotence": False, "linger.ms": 5, "batch.size": 65536,
                             "message.timeout.ms": 30000})
        deadline = time.monotonic() + 120
        i = 0
        while not acks.errors:
            assert time.monotonic() < deadline, f"no error after {len(acks.acked)} acknowledged records"
            for _ in range(200):
                try:
                    producer.produce(topic, value=b"%08d" % i + VALUE, partition=0, on_delivery=acks)
                    i += 1
                except BufferError:
                    producer.poll(0.05)
            assert producer.flush(60) == 0
        # The disk stays full: the next records are refused the same way.
        for _ in range(50):
            producer.produce(topic, value=b"after-full", partition=0, on_delivery=acks)
        assert producer.flush(60) == 0
        storage_error = KafkaError.KAFKA_STORAGE_ERROR
        assert set(acks.errors) == {storage_error}, {KafkaError(c).name() for c in set(acks.errors)}
        acked = dict(acks.acked)
        assert len(acked) > 1000, "the disk filled before anything was acknowledged"

        # The broker is up, serves metadata and every acknowledged record.
        assert broker.alive
        md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(topic, timeout=10)
        assert topic in md.topics
        got = read_partition(broker.bootstrap, topic, 0, len(acked), 0, timeout=60)
        assert {m.offset(): m.value() for m in got} == acked

        log_dir = str(tmpfs / "data" / "logs")
        lines = broker.log_text().splitlines()
        errors = [ln for ln in lines if " ERROR " in ln]
        assert len([ln for ln in errors if log_dir in ln]) == 1, errors
        assert not [ln for ln in lines if "Traceback" in ln or "unexpected error" in ln], lines[-40:]

        broker.stop()
        (tmpfs / "ballast").unlink()
        broker.start()
        got = read_partition(broker.bootstrap, topic, 0, len(acked), 0, timeout=60)
        stored = {m.offset(): m.value() for m in got}
        lost = [o for o, v in acked.items() if stored.get(o) != v]
        assert not lost, f"{len(lost)} acknowledged records lost, first {sorted(lost)[:5]}"
        # And the partition takes writes again.
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        again = _Acks()
        producer.produce(topic, value=b"after-restart", partition=0, on_delivery=again)
        assert producer.flush(30) == 0 and not again.errors and len(again.acked) == 1
    finally:
        broker.kill()
