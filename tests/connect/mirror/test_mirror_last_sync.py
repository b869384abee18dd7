"""The offset sync of a topic's last record, and the checkpoint it allows, in dedicated mode.

Kafka's rule (4.3.1, ``MirrorSourceTask.commitRecord`` / ``OffsetSyncWriter``): a record whose
downstream offset is within ``offset.lag.max`` of the partition's last sync only *delays* a
sync; delayed syncs are promoted and sent by ``MirrorSourceTask.commit()``, which the worker
calls after each offset commit, every ``offset.flush.interval.ms``. With that key's default
(60 s) the sync of a topic's last record -- and so the checkpoint of a group that consumed to
the end -- arrives up to a minute after the producer stops, from Kafka's MirrorMaker as from
strom's: measured in dedicated mode, 250 records, defaults, the sync of offset 249 came 60.0 s
(Kafka 4.3.1) and 58.3 s (strom) after the last record was acknowledged, with the same syncs
(0,0) (101,101) (202,202) (249,249). The flow's worker key ``B.offset.flush.interval.ms`` bounds
the wait; here it is 1 s, so the last sync and the group's checkpoint at the end offset arrive
within seconds.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from strom.connect.mirror.records import Checkpoint, OffsetSync
from strom.core.testing import wait_for

from .conftest import Mirror, MirrorMakerProcess

N = 250
# Well under the 60 s the default offset.flush.interval.ms would take; a few 1 s commits
DEADLINE_S = 25.0


def test_last_offset_sync_and_checkpoint_follow_the_offset_commit(mirror: Mirror, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"last-{tag}", f"last-g-{tag}"
    mirror.create_topic(mirror.a, topic, 1)
    props = tmp_path / "mm2.properties"
    props.write_text("\n".join([
        "clusters = A, B",
        f"A.bootstrap.servers = {mirror.a}",
        f"B.bootstrap.servers = {mirror.b}",
        "A->B.enabled = true",
        f"A->B.topics = {topic}",
        f"A->B.groups = {group}",
        "emit.heartbeats.enabled = false",
        "emit.checkpoints.interval.seconds = 1",
        "refresh.groups.interval.seconds = 1",
        "tasks.max = 1",
        "replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "config.storage.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        # the flow's worker (Kafka's workerConfig takes the target cluster's properties)
        "B.offset.flush.interval.ms = 1000",
        f"B.group.id = mm2-{tag}",
        f"B.config.storage.topic = mm2-configs-{tag}",
        f"B.offset.storage.topic = mm2-offsets-{tag}",
        f"B.status.storage.topic = mm2-status-{tag}",
    ]) + "\n")
    with MirrorMakerProcess(props, ["B"]) as mm:
        wait_for(mm.task_lines, 90, "the source task running", detail=lambda: mm.log_tail(20))
        mirror.produce(mirror.a, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(N)])
        # the group consumed to the end (offsets committed on A without members, as a tool would)
        c = Consumer({"bootstrap.servers": mirror.a, "group.id": group, "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition(topic, 0, N)], asynchronous=False)
        finally:
            c.close()

        def syncs() -> list[OffsetSync]:
            # offset-syncs.topic.location=source: mm2-offset-syncs.B.internal on A, shared by tests
            rows = mirror.read_all(mirror.a, "mm2-offset-syncs.B.internal", 1)
            return [s for s in (OffsetSync.deserialize(r[2], r[3]) for r in rows) if s.topic == topic]

        got = wait_for(lambda: (s := syncs()) and s[-1].upstream_offset == N - 1 and s, DEADLINE_S,
                       f"the offset sync of offset {N - 1}", ignore=(KafkaException,),
                       detail=lambda: f"syncs {syncs()}\n{mm.log_tail(20)}")
        # Kafka's syncs: the first record, then whenever offset.lag.max (100) is exceeded, then
        # the last one at the commit; a 1:1 copy has upstream == downstream
        assert [(s.upstream_offset, s.downstream_offset) for s in got] == [(0, 0), (101, 101), (202, 202),
                                                                            (N - 1, N - 1)]

        def checkpoint() -> int:
            rows = mirror.read_all(mirror.b, "A.checkpoints.internal", 1)
            mine = [cp for cp in (Checkpoint.deserialize(r[2], r[3]) for r in rows) if cp.group == group]
            return mine[-1].downstream_offset if mine else -1

        # emit.checkpoints.interval.seconds=1: the group's committed end offset translates to the
        # remote topic's end once the last sync is written
        wait_for(lambda: checkpoint() == N, DEADLINE_S, f"{group}'s checkpoint at {N}", ignore=(KafkaException,),
                 detail=lambda: f"checkpoint {checkpoint()}\n{mm.log_tail(20)}")
        assert mirror.end_offsets(mirror.b, f"A.{topic}") == {0: N}
        assert mm.stop() == 0
