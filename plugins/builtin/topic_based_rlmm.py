"""Built-in remote log metadata manager ``topic-based`` (alias Kafka's
``org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager``).

Selected by ``remote.log.metadata.manager.class.name`` (its default); configured from the broker's
``rlmm.config.`` keys (the prefix is ``remote.log.metadata.manager.impl.prefix``) and ``node.id``:
:class:`strom.tiered.topic_based_rlmm.TopicBasedRemoteLogMetadataManager`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strom.plugins.hookspecs.storage import (
    DEFAULT_RLMM_CONFIG_PREFIX,
    RLMM_CONFIG_PREFIX_KEY,
    TOPIC_BASED_REMOTE_LOG_METADATA_MANAGER,
    RemoteLogMetadataManager,
    RemoteLogMetadataManagerFactory,
    prefixed_configs,
)
from strom.plugins.markers import hookimpl


def build_topic_based_rlmm(config: Mapping[str, Any]) -> RemoteLogMetadataManager:
    """The topic-based manager over the broker config's ``rlmm.config.`` keys."""
    from strom.tiered.topic_based_rlmm import TopicBasedRemoteLogMetadataManager

    prefix = str(config.get(RLMM_CONFIG_PREFIX_KEY) or DEFAULT_RLMM_CONFIG_PREFIX)
    raw_id = config.get("node.id") if config.get("node.id") is not None else config.get("broker.id")
    broker_id = -1 if raw_id is None else int(raw_id)
    return TopicBasedRemoteLogMetadataManager(prefixed_configs(config, prefix), broker_id=broker_id,
                                              config_prefix=prefix)


@hookimpl
def strom_remote_log_metadata_managers() -> Mapping[str, RemoteLogMetadataManagerFactory]:
    return {TOPIC_BASED_REMOTE_LOG_METADATA_MANAGER: build_topic_based_rlmm}
