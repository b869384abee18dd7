"""Extension point: server-side consumer group assignors (KIP-848).

Shaped after Kafka's ``org.apache.kafka.coordinator.group.api.assignor``: the group coordinator
describes the group (:class:`GroupSpec`: members, their subscriptions and their current
assignment) and the subscribed topics (:class:`SubscribedTopicDescriber`), and an assignor
returns the target :class:`GroupAssignment`. Topics are identified by topic id, as in KIP-848.

Selection: plugins offer assignor instances through :func:`strom_assignors`; the broker config
key ``group.consumer.assignors`` (Kafka's; default ``uniform,range``) lists the enabled ones,
the first being the default when a member names none.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from strom.plugins.markers import hookspec

CONFIG_KEY = "group.consumer.assignors"
DEFAULT_ASSIGNORS = "uniform,range"


class SubscriptionType(enum.Enum):
    """``HOMOGENEOUS`` when every member subscribes to the same topics."""

    HOMOGENEOUS = "homogeneous"
    HETEROGENEOUS = "heterogeneous"


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What one member subscribes to (topic ids), and where it runs."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    rack_id: str | None = None
    instance_id: str | None = None  # group.instance.id of a static member


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """The partitions of one member: topic id -> partition numbers."""

    partitions: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)

    def count(self) -> int:
        return sum(len(p) for p in self.partitions.values())


EMPTY_ASSIGNMENT = MemberAssignment({})


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The group as the assignor sees it (Kafka's ``GroupSpec``).

    ``current`` holds each member's current (target) assignment; members missing there own
    nothing yet.
    """

    members: Mapping[str, MemberSubscription]
    current: Mapping[str, MemberAssignment] = field(default_factory=dict)

    def member_ids(self) -> list[str]:
        return list(self.members)

    def subscription_type(self) -> SubscriptionType:
        subs = {m.subscribed_topic_ids for m in self.members.values()}
        return SubscriptionType.HOMOGENEOUS if len(subs) <= 1 else SubscriptionType.HETEROGENEOUS

    def member_subscription(self, member_id: str) -> MemberSubscription:
        return self.members[member_id]

    def member_assignment(self, member_id: str) -> MemberAssignment:
        return self.current.get(member_id, EMPTY_ASSIGNMENT)

    def is_partition_assigned(self, topic_id: uuid.UUID, partition: int) -> bool:
        return any(partition in a.partitions.get(topic_id, ()) for a in self.current.values())


@dataclass(frozen=True, slots=True)
class GroupAssignment:
    """The target assignment: member id -> its partitions (every member of the spec appears)."""

    members: Mapping[str, MemberAssignment]


@runtime_checkable
class SubscribedTopicDescriber(Protocol):
    """Metadata of the subscribed topics (Kafka's ``SubscribedTopicDescriber``)."""

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        """Partition count of the topic, ``-1`` if it does not exist."""
        ...

    def racks_for_partition(self, topic_id: uuid.UUID, partition: int) -> frozenset[str]:
        """Racks of the partition's replicas (empty when unknown)."""
        ...


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One topic as the coordinator knows it."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SubscribedTopicMetadata:
    """The plain :class:`SubscribedTopicDescriber` the coordinator hands to assignors."""

    topics: Mapping[uuid.UUID, TopicMetadata]

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        topic = self.topics.get(topic_id)
        return -1 if topic is None else topic.num_partitions

    def racks_for_partition(self, topic_id: uuid.UUID, partition: int) -> frozenset[str]:
        topic = self.topics.get(topic_id)
        return frozenset() if topic is None else topic.partition_racks.get(partition, frozenset())


@runtime_checkable
class ConsumerGroupPartitionAssignor(Protocol):
    """A server-side assignor (Kafka's ``ConsumerGroupPartitionAssignor``)."""

    def name(self) -> str:
        """The name members use in ``group.remote.assignor`` (e.g. ``"uniform"``)."""
        ...

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        """Compute the target assignment.

        Every partition of every subscribed, existing topic goes to exactly one member that
        subscribes to the topic; raise :class:`~strom.plugins.exceptions.PartitionAssignorError`
        when impossible. Runs on the coordinator, so it must not block on I/O.
        """
        ...


@hookspec
def strom_assignors() -> Sequence[ConsumerGroupPartitionAssignor]:  # type: ignore[empty-body]
    """Offer server-side assignors; each reports its own :meth:`~ConsumerGroupPartitionAssignor.name`."""
