"""The broker's side of the remote tier (KIP-405): loads the remote storage and remote log
metadata managers, runs :class:`~strom.tiered.remote_log_manager.RemoteLogManager` and hands it
the leadership changes of ``remote.storage.enable`` partitions.

Only a broker with ``remote.log.storage.system.enable=true`` imports this module. The metadata
manager is a Kafka client of this very broker, so it is built once the listeners serve; every
call into the managers blocks (network, S3), so leadership changes go to one worker thread in
the order they happened, never run on the event loop.
"""

from __future__ import annotations

import logging
import uuid
from concurrent.futures import ThreadPoolExecutor

import pluggy

from strom.core.config import BrokerConfig
from strom.core.exceptions import ConfigError
from strom.core.log.remote_view import UnifiedLogTieredView
from strom.core.replica.partition import Partition
from strom.plugins.hookspecs.storage import (
    REMOTE_CONFIG_KEY,
    RemoteLogMetadataManager,
    RemoteStorageManager,
    TopicIdPartition,
)
from strom.plugins.manager import (
    config_properties,
    load_remote_log_metadata_manager,
    load_remote_storage_manager,
)
from strom.tiered.remote_log_manager import RemoteLogManager, TieredLog

log = logging.getLogger(__name__)

RLMM_BOOTSTRAP_KEY = "rlmm.config.remote.log.metadata.common.client.bootstrap.servers"


def load_storage_manager(pm: pluggy.PluginManager, config: BrokerConfig) -> RemoteStorageManager:
    """The remote storage manager, built (and its ``rsm.config.`` keys checked) at broker start."""
    rsm = load_remote_storage_manager(pm, config)
    if rsm is None:
        raise ConfigError(REMOTE_CONFIG_KEY, config.remote_log_storage_manager_class_name,
                          "a remote storage manager plugin name (required when "
                          "remote.log.storage.system.enable=true)")
    return rsm


def topic_id_partition(part: Partition) -> TopicIdPartition:
    return TopicIdPartition(part.topic_id, part.topic, part.index)


class RemoteLogBinding:
    """The running remote tier of one broker: the managers and the leadership event thread."""

    def __init__(self, rsm: RemoteStorageManager, rlmm: RemoteLogMetadataManager, manager: RemoteLogManager) -> None:
        self.rsm, self.rlmm, self.manager = rsm, rlmm, manager
        self._events = ThreadPoolExecutor(1, thread_name_prefix="remote-log-leadership")

    @classmethod
    def start(cls, pm: pluggy.PluginManager, config: BrokerConfig, rsm: RemoteStorageManager,
              bootstrap: str) -> RemoteLogBinding:
        """Build the metadata manager against ``bootstrap`` (this broker, unless the operator named
        other servers) and start the copy task. Blocking: call it off the event loop."""
        props = config_properties(config)
        if not props.get(RLMM_BOOTSTRAP_KEY):
            props[RLMM_BOOTSTRAP_KEY] = bootstrap
        props["node.id"] = config.node_id
        rlmm = load_remote_log_metadata_manager(pm, props)
        manager = RemoteLogManager(rsm, rlmm, broker_id=config.node_id, config=props)
        manager.start()
        log.info("remote log manager started (metadata through %s)", props[RLMM_BOOTSTRAP_KEY])
        return cls(rsm, rlmm, manager)

    def on_roles(self, leaders: list[Partition], followers: list[Partition],
                 stopped: list[tuple[str, int, uuid.UUID]]) -> None:
        """The replica manager's listener (event loop): queue the change for the worker thread."""
        views: dict[TopicIdPartition, TieredLog] = {topic_id_partition(p): UnifiedLogTieredView(p.log)
                                                   for p in leaders}
        follower_ids = {topic_id_partition(p) for p in followers}
        stopped_ids = {TopicIdPartition(topic_id, topic, index) for topic, index, topic_id in stopped}
        self._events.submit(self._apply, views, follower_ids, stopped_ids)

    def _apply(self, leaders: dict[TopicIdPartition, TieredLog], followers: set[TopicIdPartition],
               stopped: set[TopicIdPartition]) -> None:
        try:
            if stopped:
                self.manager.on_stopped_partitions(stopped)
            if leaders or followers:
                self.manager.on_leadership_change(leaders, followers)
        except Exception:  # the next metadata change or restart tries again; the broker goes on
            log.exception("remote log manager: applying leadership change failed")

    def close(self) -> None:
        """Stop the copy task and the managers (blocking)."""
        self._events.shutdown(wait=True, cancel_futures=True)
        self.manager.close()
        for closing in (self.rlmm, self.rsm):
            try:
                closing.close()
            except Exception:
                log.exception("closing %s", type(closing).__name__)
