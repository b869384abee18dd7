"""Built-in assignor ``range``: per-topic contiguous ranges, co-partitioned (Kafka's ``RangeAssignor``).

For each topic the members subscribing to it are put in one fixed order — static members by
``group.instance.id`` first, then the others by member id — and member ``i`` of ``k`` gets a
contiguous range: ``n // k`` partitions, plus one for the first ``n % k`` members. Topics with
the same partition count and the same subscribers are therefore co-partitioned: partition ``p``
of each goes to the same member (what joins of co-partitioned topics need). The order does not
depend on the current assignment, so an unchanged group keeps its assignment and a restarted
static member gets its old ranges back.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from strom.plugins.builtin._assignment import build_assignment, subscribers_by_topic
from strom.plugins.hookspecs.assignors import (
    ConsumerGroupPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    SubscribedTopicDescriber,
)
from strom.plugins.markers import hookimpl


class RangeAssignor:
    """Contiguous per-topic ranges in a fixed member order."""

    def name(self) -> str:
        return "range"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        def order(member_id: str) -> tuple[bool, str, str]:
            instance = group_spec.members[member_id].instance_id
            return (instance is None, instance or "", member_id)

        owned: dict[str, dict[uuid.UUID, set[int]]] = {}
        for topic_id, subs in subscribers_by_topic(group_spec, topics).items():
            ordered = sorted(subs, key=order)
            n, k = topics.num_partitions(topic_id), len(ordered)
            per_member, extra = divmod(n, k)
            start = 0
            for i, member_id in enumerate(ordered):
                size = per_member + (1 if i < extra else 0)
                if size:
                    owned.setdefault(member_id, {})[topic_id] = set(range(start, start + size))
                start += size
        return build_assignment(group_spec.members, owned)


@hookimpl
def strom_assignors() -> Sequence[ConsumerGroupPartitionAssignor]:
    return [RangeAssignor()]
