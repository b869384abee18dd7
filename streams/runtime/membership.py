"""Who is in an application's consumer group and which partitions each instance holds.

Kafka Streams carries each instance's process id and ``application.server`` in its own
assignor's subscription user data. strom.streams uses librdkafka's standard assignors, so it
carries them in the consumer's ``client.id`` instead:
``<application.id>-<process id>-StreamThread-<n>-consumer[@<host>:<port>]`` and reads the group
back with the AdminClient (DescribeGroups: member, client id, assigned partitions). Standby
placement and interactive-query metadata are both computed from this view, so every instance
computes the same answer from the same group generation.

Which partition a key belongs to comes from :func:`strom.partitioner.murmur2_partition`
(Kafka's default partitioner, which the stream threads' producers also use).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

THREAD_MARK = "-StreamThread-"


def consumer_client_id(app: str, process_id: str, index: int, server: str | None) -> str:
    cid = f"{app}-{process_id}{THREAD_MARK}{index}-consumer"
    return f"{cid}@{server}" if server else cid


@dataclass
class Instance:
    """One KafkaStreams instance of the group (all its stream threads' members together)."""

    process_id: str
    server: str | None
    partitions: set[tuple[str, int]] = field(default_factory=set)


def parse_client_id(client_id: str) -> tuple[str, str | None]:
    """(process key, application.server) of a member's client id."""
    base, _, server = client_id.partition("@")
    process = base.split(THREAD_MARK, 1)[0] if THREAD_MARK in base else base
    return process, server or None


class GroupView:
    """Cached description of the application's group (refreshed at most every ``max_age_s``)."""

    def __init__(self, bootstrap: str, group: str, admin_conf: dict[str, Any], max_age_s: float = 1.0) -> None:
        self.group = group
        self._admin = AdminClient({"bootstrap.servers": bootstrap, **admin_conf})
        self._max_age = max_age_s
        self._lock = threading.Lock()
        self._at = 0.0
        self._instances: dict[str, Instance] = {}
        #: ConsumerGroupState of the last description
        self.state: Any = None
        self._partition_counts: dict[str, int] = {}

    def instances(self, refresh: bool = False) -> dict[str, Instance]:
        """process key -> Instance, for members with an assignment (stable groups only)."""
        with self._lock:
            if refresh or time.monotonic() - self._at > self._max_age:
                self._instances = self._describe()
                self._at = time.monotonic()
            return self._instances

    def _describe(self) -> dict[str, Instance]:
        fut = self._admin.describe_consumer_groups([self.group], request_timeout=10)[self.group]
        desc = fut.result()
        self.state = desc.state
        out: dict[str, Instance] = {}
        for m in desc.members:
            process, server = parse_client_id(m.client_id or m.member_id)
            inst = out.setdefault(process, Instance(process, server))
            if inst.server is None:
                inst.server = server
            if m.assignment is not None:
                inst.partitions.update((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        return out

    def partition_count(self, topic: str) -> int:
        n = self._partition_counts.get(topic)
        if n is None:
            md = self._admin.list_topics(topic, timeout=10).topics[topic]
            if md.error is not None:
                raise KeyError(f"topic {topic!r}: {md.error}")
            n = self._partition_counts[topic] = len(md.partitions)
        return n


