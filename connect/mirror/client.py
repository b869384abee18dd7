"""Reading MirrorMaker's internal topics from a client (Kafka's ``MirrorClient`` and
``RemoteClusterUtils``): which clusters replicate into this one, through how many hops, and a
consumer group's offsets translated from a remote cluster's checkpoints — the call a consumer
makes to fail over from the source cluster to the target.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError
from confluent_kafka import TopicPartition as KTopicPartition
from confluent_kafka.admin import AdminClient

from strom.client_security import to_librdkafka
from strom.connect.api.records import TopicPartition
from strom.connect.exceptions import ConnectException
from strom.connect.mirror.config import (
    REPLICATION_POLICY_CLASS,
    REPLICATION_POLICY_CLASS_DEFAULT,
    property_text,
)
from strom.connect.mirror.policy import ReplicationPolicy, replication_policy
from strom.connect.mirror.records import Checkpoint, Heartbeat

log = logging.getLogger(__name__)


def _client_props(properties: Mapping[str, Any]) -> dict[str, str | int | float | bool]:
    """Client properties: ``replication.policy.*`` and ``consumer.``/``admin.`` forms are the
    MirrorClientConfig's; the rest goes to librdkafka, Kafka's security keys in its names."""
    props = {str(k): v for k, v in properties.items() if not str(k).startswith("replication.policy.")}
    return {k: property_text(v) for k, v in to_librdkafka(props).items()}


def _policy(properties: Mapping[str, Any]) -> ReplicationPolicy:
    props = {str(k): str(v) for k, v in properties.items()}
    return replication_policy(props.get(REPLICATION_POLICY_CLASS, REPLICATION_POLICY_CLASS_DEFAULT), props)


def _read_topic(properties: Mapping[str, Any], topic: str, timeout: float) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of partition 0 of ``topic`` up to its end offset at the call, within
    ``timeout`` seconds (a bounded read: Kafka's MirrorClient reads to the end the same way)."""
    props = _client_props(properties)
    props.setdefault("group.id", "mm2-client-unused")
    props["enable.auto.commit"] = "false"
    consumer = Consumer(props)
    try:
        deadline = time.monotonic() + timeout
        md = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if md is None or md.error is not None or not md.partitions:
            return []  # no such topic (yet): nothing replicated or checkpointed here
        tp = KTopicPartition(topic, 0)
        _, end = consumer.get_watermark_offsets(tp, timeout=timeout)
        out: list[tuple[bytes | None, bytes | None]] = []
        if end <= 0:
            return out
        consumer.assign([KTopicPartition(topic, 0, OFFSET_BEGINNING)])
        pos = 0
        while pos < end:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ConnectException(f"reading {topic}: only {pos} of {end} records within {timeout:.0f} s")
            for msg in consumer.consume(10000, min(left, 0.5)):
                err, offset = msg.error(), msg.offset()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        log.warning("reading %s: %s", topic, err.str())
                    continue
                assert offset is not None  # a record has its offset
                out.append((msg.key(), msg.value()))
                pos = offset + 1
        return out
    finally:
        consumer.close()


def remote_consumer_offsets(properties: Mapping[str, Any], remote_cluster_alias: str, consumer_group_id: str,
                            timeout: float = 30.0) -> dict[TopicPartition, int]:
    """The latest checkpoint of each partition for ``consumer_group_id`` read from the local
    cluster's ``<remote>.checkpoints.internal`` (Kafka's ``MirrorClient.remoteConsumerOffsets``)."""
    policy = _policy(properties)
    offsets: dict[TopicPartition, int] = {}
    for key, value in _read_topic(properties, policy.checkpoints_topic(remote_cluster_alias), timeout):
        try:
            cp = Checkpoint.deserialize(key, value)
        except Exception as exc:  # Kafka's client skips records it cannot read too
            log.warning("skipping an unreadable checkpoint: %s", exc)
            continue
        if cp.group == consumer_group_id:
            offsets[TopicPartition(cp.topic, cp.partition)] = cp.downstream_offset
    return offsets


def translate_offsets(properties: Mapping[str, Any], remote_cluster_alias: str, consumer_group_id: str,
                      timeout: float = 30.0) -> dict[TopicPartition, int]:
    """Kafka's ``RemoteClusterUtils.translateOffsets``: where ``consumer_group_id``, which
    consumed on cluster ``remote_cluster_alias``, resumes on the cluster ``properties`` connects
    to (``bootstrap.servers`` &c.): remote topic partition -> offset to resume from."""
    return remote_consumer_offsets(properties, remote_cluster_alias, consumer_group_id, timeout)


class RemoteClusterUtils:
    """Kafka's ``RemoteClusterUtils`` (static helpers on a local cluster's client properties)."""

    @staticmethod
    def translate_offsets(properties: Mapping[str, Any], remote_cluster_alias: str, consumer_group_id: str,
                          timeout: float = 30.0) -> dict[TopicPartition, int]:
        return translate_offsets(properties, remote_cluster_alias, consumer_group_id, timeout)

    @staticmethod
    def heartbeat_topics(properties: Mapping[str, Any], timeout: float = 30.0) -> set[str]:
        """Every heartbeats topic of the cluster (``heartbeats``, ``A.heartbeats``, ...)."""
        policy = _policy(properties)
        md = AdminClient(_client_props(properties)).list_topics(timeout=timeout)
        return {t for t in md.topics if policy.is_heartbeats_topic(t)}

    @staticmethod
    def checkpoint_topics(properties: Mapping[str, Any], timeout: float = 30.0) -> set[str]:
        policy = _policy(properties)
        md = AdminClient(_client_props(properties)).list_topics(timeout=timeout)
        return {t for t in md.topics if policy.is_checkpoints_topic(t)}

    @staticmethod
    def upstream_clusters(properties: Mapping[str, Any], timeout: float = 30.0) -> set[str]:
        """Aliases of the clusters replicating into this one (directly or not), from its
        heartbeats topics."""
        policy = _policy(properties)
        out: set[str] = set()
        for topic in RemoteClusterUtils.heartbeat_topics(properties, timeout):
            t: str | None = topic
            while t is not None and (source := policy.topic_source(t)) is not None:
                out.add(source)
                upstream = policy.upstream_topic(t)
                t = upstream if upstream != t else None
        return out

    @staticmethod
    def replication_lag(properties: Mapping[str, Any], upstream_cluster_alias: str,
                        timeout: float = 30.0) -> float | None:
        """Seconds between now and the newest heartbeat in ``<upstream>.heartbeats`` here: how
        far behind this cluster's copy of that upstream is (at most the heartbeat interval when
        in sync); None when no heartbeat of it arrived."""
        policy = _policy(properties)
        topic = policy.format_remote_topic(upstream_cluster_alias, policy.heartbeats_topic())
        newest: int | None = None
        for key, value in _read_topic(properties, topic, timeout):
            try:
                hb = Heartbeat.deserialize(key, value)
            except Exception as exc:  # skipped like an unreadable checkpoint
                log.warning("skipping an unreadable heartbeat: %s", exc)
                continue
            # Any heartbeat in <upstream>.heartbeats was written on the upstream cluster (by
            # whichever flow into it) and reached us through the upstream->here flow.
            if newest is None or hb.timestamp > newest:
                newest = hb.timestamp
        return None if newest is None else max(0.0, time.time() - newest / 1000.0)

    @staticmethod
    def replication_hops(properties: Mapping[str, Any], upstream_cluster_alias: str, timeout: float = 30.0) -> int:
        """Hops from ``upstream_cluster_alias`` to this cluster (-1: it does not replicate here)."""
        policy = _policy(properties)
        best = -1
        for topic in RemoteClusterUtils.heartbeat_topics(properties, timeout):
            hops, t = 0, topic
            while (source := policy.topic_source(t)) is not None:
                hops += 1
                if source == upstream_cluster_alias:
                    best = hops if best < 0 else min(best, hops)
                    break
                upstream = policy.upstream_topic(t)
                if upstream is None or upstream == t:
                    break
                t = upstream
        return best
