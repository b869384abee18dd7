"""Helpers shared by the built-in assignors: subscribed topics and building the result."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from strom.plugins.hookspecs.assignors import (
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    SubscribedTopicDescriber,
)


def subscribers_by_topic(spec: GroupSpec, topics: SubscribedTopicDescriber) -> dict[uuid.UUID, list[str]]:
    """Existing subscribed topics -> the member ids subscribing to them (in the spec's order).

    Topics missing from the metadata (``num_partitions == -1``) are left out, as in Kafka: a
    subscription may name a topic before it is created.
    """
    out: dict[uuid.UUID, list[str]] = {}
    for member_id, sub in spec.members.items():
        for topic_id in sub.subscribed_topic_ids:
            if topics.num_partitions(topic_id) > 0:
                out.setdefault(topic_id, []).append(member_id)
    return out


def build_assignment(member_ids: Iterable[str],
                     owned: Mapping[str, Mapping[uuid.UUID, set[int]]]) -> GroupAssignment:
    """A :class:`GroupAssignment` with every member present (possibly with nothing)."""
    return GroupAssignment({
        m: MemberAssignment({t: frozenset(ps) for t, ps in owned.get(m, {}).items() if ps})
        for m in member_ids
    })
