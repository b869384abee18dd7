"""Replication policies (Kafka's ``ReplicationPolicy``): how a remote topic is named after its
source cluster and upstream topic, and which topics are MirrorMaker's internal ones.

:class:`DefaultReplicationPolicy` names a remote topic ``<source><separator><topic>``
(``us-west.orders``); :class:`IdentityReplicationPolicy` keeps the name (heartbeats excepted,
which must stay distinguishable to detect cycles). Both read ``replication.policy.separator``
and ``replication.policy.internal.topic.separator.enabled`` as Kafka does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

SEPARATOR_CONFIG = "replication.policy.separator"
SEPARATOR_DEFAULT = "."
INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG = "replication.policy.internal.topic.separator.enabled"
HEARTBEATS_TOPIC = "heartbeats"
CHECKPOINTS_TOPIC_SUFFIX = ".checkpoints.internal"
OFFSET_SYNCS_TOPIC_PREFIX = "mm2-offset-syncs"


class ReplicationPolicy(ABC):
    """Kafka's ``ReplicationPolicy`` interface with its default methods."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.ReplicationPolicy"

    def configure(self, props: Mapping[str, str]) -> None:  # noqa: B027 - optional, as in Kafka
        """Read the policy's own keys (``replication.policy.*``)."""

    @abstractmethod
    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        raise NotImplementedError

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster ``topic`` was replicated from, or None for a local topic."""
        raise NotImplementedError

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """The name ``topic`` has on its source cluster, or None for a local topic."""
        raise NotImplementedError

    def original_topic(self, topic: str) -> str:
        """The topic's name on the cluster it was first produced to (follows chains A.B.t)."""
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"{OFFSET_SYNCS_TOPIC_PREFIX}.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}{CHECKPOINTS_TOPIC_SUFFIX}"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(CHECKPOINTS_TOPIC_SUFFIX)

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return (topic.startswith(OFFSET_SYNCS_TOPIC_PREFIX) and topic.endswith(".internal")) \
            or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        """Kafka's rule: MM2's own topics, ``__x``, ``.x`` and ``*.internal``/``*-internal``."""
        return (self.is_mm2_internal_topic(topic) or topic.startswith("__") or topic.startswith(".")
                or topic.endswith(".internal") or topic.endswith("-internal"))


class DefaultReplicationPolicy(ReplicationPolicy):
    """``<source><separator><topic>``; the separator defaults to ``.``."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"

    def __init__(self) -> None:
        self.separator = SEPARATOR_DEFAULT
        self.separator_for_internal = True

    def configure(self, props: Mapping[str, str]) -> None:
        sep = props.get(SEPARATOR_CONFIG)
        if sep is not None:
            self.separator = sep
        flag = props.get(INTERNAL_TOPIC_SEPARATOR_ENABLED_CONFIG)
        if flag is not None:
            self.separator_for_internal = str(flag).strip().lower() == "true"

    def _internal_separator(self) -> str:
        return self.separator if self.separator_for_internal else "."

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{source_cluster_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        if topic is None:
            return None
        parts = topic.split(self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator):]

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator()
        return f"{OFFSET_SYNCS_TOPIC_PREFIX}{sep}{cluster_alias}{sep}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        sep = self._internal_separator()
        return f"{cluster_alias}{sep}checkpoints{sep}internal"

    def is_checkpoints_topic(self, topic: str) -> bool:
        sep = self._internal_separator()
        return topic.endswith(f"{sep}checkpoints{sep}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        sep = self._internal_separator()
        return (topic.startswith(OFFSET_SYNCS_TOPIC_PREFIX) and topic.endswith(f"{sep}internal")) \
            or self.is_checkpoints_topic(topic)


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names (heartbeats excepted). Cycles cannot be detected from
    names, so use it for one-way replication only (Kafka's warning)."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    SOURCE_CLUSTER_ALIAS_CONFIG = "source.cluster.alias"

    def __init__(self) -> None:
        super().__init__()
        self.source_cluster_alias: str | None = None

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self.source_cluster_alias = props.get(self.SOURCE_CLUSTER_ALIAS_CONFIG)

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic is not None and topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


POLICIES: dict[str, type[ReplicationPolicy]] = {}
for _cls in (DefaultReplicationPolicy, IdentityReplicationPolicy):
    POLICIES[_cls.KAFKA_CLASS_NAME] = _cls
    POLICIES[_cls.__name__] = _cls
    POLICIES[f"{_cls.__module__}.{_cls.__qualname__}"] = _cls


def replication_policy(class_name: str, props: Mapping[str, str]) -> ReplicationPolicy:
    """An instance of the policy ``class_name`` (Kafka's, simple or Python name, or
    ``module.Class`` of a user's subclass), configured with ``props``."""
    cls = POLICIES.get(class_name)
    if cls is None:
        import importlib

        module, _, name = class_name.rpartition(".")
        try:
            found = getattr(importlib.import_module(module), name) if module else None
        except (ImportError, AttributeError):
            found = None
        if not (isinstance(found, type) and issubclass(found, ReplicationPolicy)):
            from strom.connect.exceptions import ConfigException

            raise ConfigException("replication.policy.class", class_name,
                                  "not a ReplicationPolicy (DefaultReplicationPolicy, IdentityReplicationPolicy "
                                  "or module.Class of a subclass)")
        cls = found
    policy = cls()
    policy.configure(props)
    return policy
