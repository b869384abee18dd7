"""MirrorCheckpointConnector between two strom brokers: a consumer group's committed offsets
on A become checkpoints in B's ``A.checkpoints.internal`` (Kafka's format), which
``translate_offsets`` (RemoteClusterUtils) reads; the group fails over to B and resumes within
``offset.lag.max`` records of where it stopped, never after it; ``sync.group.offsets.enabled``
commits the translation into B's idle group; a group 100,000 records behind still translates."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, TopicPartition

from strom.connect.api.records import TopicPartition as TP
from strom.connect.mirror import translate_offsets
from strom.core.testing import wait_for

from .conftest import Mirror

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
CHECKPOINT = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
LAG_MAX = 50


def _consume_and_commit(bootstrap: str, topic: str, group: str, upto: dict[int, int]) -> None:
    """Group ``group`` reads each partition up to offset ``upto[p]`` (exclusive) and commits it."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in upto])
        pos = dict.fromkeys(upto, 0)
        while any(pos[p] < upto[p] for p in upto):
            for m in c.consume(500, 1.0):
                partition, offset = m.partition(), m.offset()
                if m.error() is None and partition is not None and offset is not None and offset < upto[partition]:
                    pos[partition] = offset + 1
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in upto.items()], asynchronous=False)
    finally:
        c.close()


def _record_at(bootstrap: str, topic: str, partition: int, offset: int) -> bytes:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-test-at", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        while True:
            for m in c.consume(1, 1.0):
                if m.error() is None:
                    value = m.value()
                    assert m.offset() == offset and value is not None
                    return value
    finally:
        c.close()


def _setup(mirror: Mirror, topic: str, per_partition: int, partitions: int, pre: int) -> None:
    """``topic`` on A with values ``<upstream offset>``; the remote topic on B already holds
    ``pre`` other records per partition, so target offsets differ from source ones."""
    mirror.create_topic(mirror.a, topic, partitions)
    mirror.create_topic(mirror.b, f"A.{topic}", partitions)
    mirror.produce(mirror.b, f"A.{topic}", [{"partition": p, "value": b"older"} for p in range(partitions)
                                             for _ in range(pre)])
    mirror.produce(mirror.a, topic, [{"partition": p, "value": str(i).encode()} for p in range(partitions)
                                     for i in range(per_partition)])


def _start(mirror: Mirror, name: str, topic: str, end: dict[int, int], **extra: str) -> None:
    """Source connector; once the remote topic holds ``end``, the checkpoint connector (so its
    first checkpoint is computed from every offset sync: the test reads that one, it does not
    wait for a good one)."""
    herder = mirror.herder(mirror.b, name)
    common = {"topics": topic, "offset_lag_max": str(LAG_MAX), "emit_checkpoints_interval_seconds": "1",
              "refresh_groups_interval_seconds": "1"}
    herder.put_connector_config(f"{name}-src", mirror.connector(SOURCE, f"{name}-src", ("A", mirror.a),
                                                                ("B", mirror.b), **common), False)
    wait_for(lambda: mirror.end_offsets(mirror.b, f"A.{topic}") == end, 90, f"A.{topic} mirrored")
    herder.put_connector_config(f"{name}-cp", mirror.connector(CHECKPOINT, f"{name}-cp", ("A", mirror.a),
                                                               ("B", mirror.b), **common, **extra), False)


def _check_resume(mirror: Mirror, topic: str, committed: dict[int, int], translated: dict[TP, int]) -> None:
    for p, upstream in committed.items():
        offset = translated[TP(f"A.{topic}", p)]
        resumed_at = int(_record_at(mirror.b, f"A.{topic}", p, offset))  # the upstream offset of that record
        assert resumed_at <= upstream, f"p{p}: translation skips records {resumed_at}..{upstream}"
        assert upstream - resumed_at <= LAG_MAX, f"p{p}: {upstream - resumed_at} records re-read > offset.lag.max"


def test_group_fails_over_within_offset_lag_max_and_never_skips(mirror: Mirror) -> None:
    topic, group = f"co-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _setup(mirror, topic, per_partition=1500, partitions=2, pre=37)
    committed = {0: 1234, 1: 577}
    _consume_and_commit(mirror.a, topic, group, committed)
    _start(mirror, "cp", topic, {0: 1537, 1: 1537}, sync_group_offsets_enabled="true",
           sync_group_offsets_interval_seconds="1")
    target = {"bootstrap.servers": mirror.b}
    translated = wait_for(lambda: (t := translate_offsets(target, "A", group, timeout=20)) and len(t) == 2 and t,
                          60, "checkpoints of both partitions")
    _check_resume(mirror, topic, committed, translated)
    # sync.group.offsets.enabled: the idle group on B got the translated offsets committed
    c = Consumer({"bootstrap.servers": mirror.b, "group.id": group})
    try:
        def synced() -> bool:
            got = c.committed([TopicPartition(f"A.{topic}", p) for p in committed], timeout=10)
            return all(tp.offset == translated[TP(tp.topic, tp.partition)] for tp in got)

        wait_for(synced, 60, "target group offsets synced")
    finally:
        c.close()
    # the group moves on upstream: the checkpoint follows
    _consume_and_commit(mirror.a, topic, group, {0: 1499, 1: 1500})
    later = wait_for(lambda: (t := translate_offsets(target, "A", group, timeout=20))
                     and t.get(TP(f"A.{topic}", 0), 0) > translated[TP(f"A.{topic}", 0)] and t, 60, "newer checkpoint")
    _check_resume(mirror, topic, {0: 1499}, later)
    assert later[TP(f"A.{topic}", 1)] == 1500 + 37  # at the end: exactly the end of the remote partition


def test_group_lagging_100k_records_still_translates(mirror: Mirror) -> None:
    topic, group = f"lag-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _setup(mirror, topic, per_partition=102_000, partitions=1, pre=5)
    committed = {0: 1_777}  # 100,223 records behind the log end
    _consume_and_commit(mirror.a, topic, group, committed)
    _start(mirror, "lag", topic, {0: 102_005})
    target = {"bootstrap.servers": mirror.b}
    translated = wait_for(lambda: translate_offsets(target, "A", group, timeout=20), 60, "a checkpoint")
    _check_resume(mirror, topic, committed, translated)


def test_sync_group_offsets_leaves_active_target_groups_alone(mirror: Mirror) -> None:
    topic, group = f"act-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    _setup(mirror, topic, per_partition=300, partitions=1, pre=0)
    _consume_and_commit(mirror.a, topic, group, {0: 250})
    # the group is active on B (a member consuming the remote topic) before MirrorMaker starts
    active = Consumer({"bootstrap.servers": mirror.b, "group.id": group, "enable.auto.commit": False,
                       "auto.offset.reset": "latest"})
    try:
        active.subscribe([f"A.{topic}"])
        wait_for(lambda: active.consume(1, 0.5) is not None and active.assignment(), 30, "member of the group on B")
        _start(mirror, "act", topic, {0: 300}, sync_group_offsets_enabled="true",
               sync_group_offsets_interval_seconds="1")
        target = {"bootstrap.servers": mirror.b}
        # the first checkpoint is emitted by the same round that first tried to sync offsets
        wait_for(lambda: translate_offsets(target, "A", group, timeout=20), 60, "a checkpoint")
        committed = active.committed([TopicPartition(f"A.{topic}", 0)], timeout=10)
        assert committed[0].offset < 0  # nothing committed into the active group
    finally:
        active.close()  # leaves the group: now it is idle and gets the translated offsets
    translated = translate_offsets({"bootstrap.servers": mirror.b}, "A", group, timeout=20)
    probe = Consumer({"bootstrap.servers": mirror.b, "group.id": group})
    try:
        wait_for(lambda: probe.committed([TopicPartition(f"A.{topic}", 0)], timeout=10)[0].offset
                 == translated[TP(f"A.{topic}", 0)], 60, "offsets synced once the group is idle")
    finally:
        probe.close()
