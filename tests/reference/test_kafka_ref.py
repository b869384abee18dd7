"""The reference-broker harness itself (scripts/kafka_ref/kafka_ref.py): a KafkaRef node
serves real clients, survives kill -9 + restart on its data dir with its data and port, and
stops cleanly."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka_ref import KafkaRef, new_cluster_id
from ref_fixtures import skip_without_java


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 3})
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    assert p.flush(60) == 0


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm", "log_level": 3})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        return int(low), int(high)
    finally:
        c.close()


def test_kill_and_restart_keeps_data_and_port(tmp_path: Path) -> None:
    skip_without_java()
    ref = KafkaRef(tmp_path / "kafka")
    try:
        ref.start()
        port = ref.port
        produce(ref.bootstrap, "survivor", 25)
        assert watermarks(ref.bootstrap, "survivor") == (0, 25)
        ref.kill()
        assert not ref.alive
        ref.start()  # same data dir: no re-format, recovery after an unclean stop
        assert ref.port == port
        assert watermarks(ref.bootstrap, "survivor") == (0, 25)
        assert ref.stop() is not None
        assert not ref.alive
    finally:
        ref.close()


def test_cluster_ids_never_look_like_options() -> None:
    ids = {new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
