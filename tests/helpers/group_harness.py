"""In-process harness for KIP-848 group state tests: one ConsumerGroup, its records written
through the real codec into a log and replayed (the coordinator shell's job), a fake clock and
a metadata image of the topics. No broker; the wire-level tests use a real one."""

from __future__ import annotations

import uuid

from strom.core.coordinator.group import records as R
from strom.core.coordinator.group.consumer_group import ConsumerGroup, GroupEnv, HeartbeatRequest
from strom.core.coordinator.group.consumer_group_member import ConsumerGroupMember, normalize
from strom.core.coordinator.group.consumer_group_service import ImageTopics
from strom.core.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from strom.plugins.manager import get_plugin_manager, load_assignors

SESSION_MS = 45000
REBALANCE_MS = 30000

Parts = dict[uuid.UUID, frozenset[int]]
Record = tuple[R.CoordinatorMessage, R.CoordinatorMessage | None]


def make_image(topics: dict[str, int], ids: dict[str, uuid.UUID] | None = None) -> MetadataImage:
    """Topics of ``n`` partitions led by broker 1; ``ids`` keeps topic ids across images."""
    ids = ids if ids is not None else {}
    images = {}
    for name, n in topics.items():
        tid = ids.setdefault(name, uuid.uuid4())
        parts = {p: PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0, partition_epoch=0)
                 for p in range(n)}
        images[name] = TopicImage(name=name, topic_id=tid, partitions=parts)
    return MetadataImage(topics=images, topics_by_id={t.topic_id: t for t in images.values()})


def replay(group: ConsumerGroup, raw_key: bytes, raw_value: bytes | None) -> None:
    decoded = R.decode_key(raw_key)
    assert decoded is not None
    group.replay(decoded[1], R.decode_value(decoded[0], raw_value))


class Cluster:
    """One group ("g"), its record log, a clock, the topics and a count of heartbeats."""

    def __init__(self, topics: dict[str, int], *, assignors: str = "uniform,range") -> None:
        self.ids: dict[str, uuid.UUID] = {}
        self.image = make_image(topics, self.ids)
        pm = get_plugin_manager(autoload=False, env={})
        self.assignors = load_assignors(pm, {"group.consumer.assignors": assignors})
        self.group = ConsumerGroup("g")
        self.log: list[tuple[bytes, bytes | None]] = []
        self.now = 1_000_000
        self.heartbeats = 0

    def env(self) -> GroupEnv:
        return GroupEnv(topics=ImageTopics(self.image), assignors=self.assignors, session_timeout_ms=SESSION_MS)

    def set_topics(self, topics: dict[str, int]) -> None:
        self.image = make_image(topics, self.ids)

    def write(self, records: list[Record]) -> None:
        """Persist through the real codec and replay the decoded records."""
        for key, value in records:
            raw = R.encode_record(key, value)
            self.log.append(raw)
            replay(self.group, *raw)

    def replayed(self) -> ConsumerGroup:
        """A group rebuilt from the log alone, as after a coordinator restart."""
        fresh = ConsumerGroup("g")
        for raw_key, raw_value in self.log:
            replay(fresh, raw_key, raw_value)
        return fresh

    def heartbeat(self, req: HeartbeatRequest) -> tuple[int, Parts | None]:
        """(member epoch, assignment if the response carries one)."""
        self.heartbeats += 1
        result = self.group.heartbeat(req, self.env(), self.now)
        self.write(result.records)
        self.group.set_deadlines(result)
        return result.member_epoch, (None if result.assignment is None else normalize(result.assignment))

    def expire(self) -> None:
        self.write(self.group.expire(self.now, self.env()))

    def member(self, member_id: str) -> ConsumerGroupMember:
        return self.group.members[member_id]

    def tp(self, topic: str, *partitions: int) -> Parts:
        return {self.ids[topic]: frozenset(partitions)}
