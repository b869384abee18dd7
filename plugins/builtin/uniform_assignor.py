"""Built-in assignor ``uniform``: balanced and sticky (Kafka's ``UniformAssignor``).

Balanced: with homogeneous subscriptions every member ends with ``floor(P/M)`` or ``ceil(P/M)``
partitions; with heterogeneous ones no single move of a partition to another subscriber of its
topic would bring two members' counts closer. Sticky: a member keeps every partition it
currently owns unless that partition must move for balance (or is no longer subscribed/exists).

Algorithm: (1) keep valid current ownership; (2) give each unowned partition to the eligible
member with the fewest partitions, most constrained topics first; (3) while some member has at
least two more partitions than a member that could take one of them, move one (preferring a
partition that was not sticky). Each move lowers the sum of squared loads, so (3) terminates.
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

TopicPartition = tuple[uuid.UUID, int]


class UniformAssignor:
    """Balanced, sticky assignment of all subscribed partitions."""

    def name(self) -> str:
        return "uniform"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        members = sorted(group_spec.members)  # sorted: the result must not depend on dict order
        subscribers = {t: sorted(ms) for t, ms in subscribers_by_topic(group_spec, topics).items()}
        counts = {t: topics.num_partitions(t) for t in subscribers}
        owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
        load = dict.fromkeys(members, 0)
        owner: dict[TopicPartition, str] = {}
        sticky: set[TopicPartition] = set()

        # (1) Stickiness: keep what each member owns and may still own.
        for m in members:
            subscribed = group_spec.members[m].subscribed_topic_ids
            for t, parts in group_spec.member_assignment(m).partitions.items():
                if t not in subscribed or t not in counts:
                    continue
                for p in sorted(parts):
                    if 0 <= p < counts[t] and (t, p) not in owner:
                        owner[(t, p)] = m
                        owned[m].setdefault(t, set()).add(p)
                        load[m] += 1
                        sticky.add((t, p))

        # (2) Unowned partitions, most constrained topics first, then by partition number so
        # that each topic's partitions spread over the members.
        unowned = [(t, p) for t, n in counts.items() for p in range(n) if (t, p) not in owner]
        unowned.sort(key=lambda tp: (len(subscribers[tp[0]]), tp[1], str(tp[0])))
        for t, p in unowned:
            m = min(subscribers[t], key=lambda c: (load[c], c))
            owner[(t, p)] = m
            owned[m].setdefault(t, set()).add(p)
            load[m] += 1

        # (3) Balance.
        while True:
            move = self._best_move(members, owned, load, subscribers, sticky)
            if move is None:
                break
            src, dst, (t, p) = move
            owned[src][t].discard(p)
            owned[dst].setdefault(t, set()).add(p)
            load[src] -= 1
            load[dst] += 1
            sticky.discard((t, p))
        return build_assignment(group_spec.members, owned)

    @staticmethod
    def _best_move(members: Sequence[str], owned: dict[str, dict[uuid.UUID, set[int]]],
                   load: dict[str, int], subscribers: dict[uuid.UUID, list[str]],
                   sticky: set[TopicPartition]) -> tuple[str, str, TopicPartition] | None:
        """A move from the most loaded member able to give a partition to one with >= 2 fewer."""
        for src in sorted(members, key=lambda m: (-load[m], m)):
            best: tuple[tuple[int, bool, str], str, TopicPartition] | None = None
            for t, parts in owned[src].items():
                for p in parts:
                    for dst in subscribers[t]:
                        if load[dst] <= load[src] - 2:
                            rank = (load[dst], (t, p) in sticky, dst)
                            if best is None or rank < best[0]:
                                best = (rank, dst, (t, p))
            if best is not None:
                return src, best[1], best[2]
        return None


@hookimpl
def strom_assignors() -> Sequence[ConsumerGroupPartitionAssignor]:
    return [UniformAssignor()]
