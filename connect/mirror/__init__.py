"""MirrorMaker 2 on strom's Connect runtime (Kafka's ``org.apache.kafka.connect.mirror``).

Three source connectors — :class:`MirrorSourceConnector` (topics),
:class:`MirrorCheckpointConnector` (consumer group offsets),
:class:`MirrorHeartbeatConnector` (heartbeats) — registered under their Kafka class names, so
a worker runs them from the same JSON or properties Kafka's workers take; the dedicated-mode
driver (``strom connect mirror-maker mm2.properties``) is :mod:`strom.connect.mirror.maker`.
Internal topics and record formats are Kafka's (:mod:`strom.connect.mirror.records`).
:func:`translate_offsets` is Kafka's ``RemoteClusterUtils.translateOffsets``.
"""

from __future__ import annotations

from strom.connect.mirror.checkpoint import MirrorCheckpointConnector, MirrorCheckpointTask, OffsetSyncStore
from strom.connect.mirror.client import RemoteClusterUtils, translate_offsets
from strom.connect.mirror.config import MirrorMakerConfig, SourceAndTarget
from strom.connect.mirror.heartbeat import MirrorHeartbeatConnector, MirrorHeartbeatTask
from strom.connect.mirror.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, ReplicationPolicy
from strom.connect.mirror.records import Checkpoint, Heartbeat, OffsetSync
from strom.connect.mirror.source import MirrorSourceConnector, MirrorSourceTask

PLUGINS: list[type] = [MirrorSourceConnector, MirrorCheckpointConnector, MirrorHeartbeatConnector]

__all__ = [
    "PLUGINS",
    "Checkpoint",
    "DefaultReplicationPolicy",
    "Heartbeat",
    "IdentityReplicationPolicy",
    "MirrorCheckpointConnector",
    "MirrorCheckpointTask",
    "MirrorHeartbeatConnector",
    "MirrorHeartbeatTask",
    "MirrorMakerConfig",
    "MirrorSourceConnector",
    "MirrorSourceTask",
    "OffsetSync",
    "OffsetSyncStore",
    "RemoteClusterUtils",
    "ReplicationPolicy",
    "SourceAndTarget",
    "translate_offsets",
]
