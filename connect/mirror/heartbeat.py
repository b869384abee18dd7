"""``MirrorHeartbeatConnector`` and ``MirrorHeartbeatTask`` (Kafka's): emit a heartbeat into the
target's ``heartbeats`` topic every ``emit.heartbeats.interval.seconds``. Replicated onward by
the flows out of the target (``<alias>.heartbeats``), heartbeats show which clusters replicate
into which, and with what lag (:meth:`RemoteClusterUtils.replication_hops`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from strom.connect.api.config import ConfigDef
from strom.connect.api.connector import ExactlyOnceSupport, SourceConnector
from strom.connect.api.records import SourceRecord
from strom.connect.api.task import SourceTask, Task
from strom.connect.data import Schema
from strom.connect.mirror import clients
from strom.connect.mirror.clients import MirrorRetriableError
from strom.connect.mirror.config import HEARTBEAT_CONFIG_DEF, MirrorHeartbeatConfig
from strom.connect.mirror.offsets import validate_offsets
from strom.connect.mirror.records import Heartbeat

log = logging.getLogger(__name__)


class MirrorHeartbeatConnector(SourceConnector):
    """Creates the target's ``heartbeats`` topic and runs one heartbeat task."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"

    def __init__(self) -> None:
        self.cfg: MirrorHeartbeatConfig | None = None

    def config(self) -> ConfigDef:
        return HEARTBEAT_CONFIG_DEF

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def task_class(self) -> type[Task]:
        return MirrorHeartbeatTask

    def alter_offsets(self, props: Mapping[str, str],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> bool:
        """Kafka's: partitions ``{"sourceClusterAlias", "targetClusterAlias"}``, offsets ``{"offset": 0}``."""
        return validate_offsets(offsets, ("sourceClusterAlias", "targetClusterAlias"), None, offset_must_be_zero=True)

    def start(self, props: dict[str, str]) -> None:
        cfg = self.cfg = MirrorHeartbeatConfig(props)
        for key in MirrorHeartbeatConfig.unknown_keys(props):
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
        if cfg.emit_heartbeats_interval_s < 0:
            return  # heartbeats off: nothing to create, no task
        admin = clients.admin_client(cfg.target_admin_config("heartbeats-target-admin"))
        try:
            clients.create_topic(admin, cfg.heartbeats_topic, 1, cfg.heartbeats_replication_factor,
                                 {"cleanup.policy": "compact"}, cfg.admin_timeout_s)
        except MirrorRetriableError as exc:
            # The worker's producer creates nothing: the task retries by producing; log it.
            log.warning("%s: creating %s: %s", cfg.connector_name, cfg.heartbeats_topic, exc)

    def stop(self) -> None:
        """Nothing runs in the connector itself."""

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        cfg = self.cfg
        if cfg is None or cfg.emit_heartbeats_interval_s < 0:
            return []
        # One task is enough, however many are allowed (Kafka's).
        return [dict(cfg.originals, **{"task.index": "0"})]


class MirrorHeartbeatTask(SourceTask):
    """One heartbeat record per interval."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.mirror.MirrorHeartbeatTask"

    def __init__(self) -> None:
        self.cfg: MirrorHeartbeatConfig | None = None
        self._stopping = threading.Event()
        self._next = 0.0

    def start(self, props: dict[str, str]) -> None:
        self.cfg = MirrorHeartbeatConfig(props)
        self._stopping.clear()
        self._next = time.monotonic()

    def stop(self) -> None:
        self._stopping.set()

    def poll(self) -> Sequence[SourceRecord] | None:
        cfg = self.cfg
        assert cfg is not None
        interval = cfg.emit_heartbeats_interval_s
        # The pause between heartbeats is the connector's schedule; stop() ends it at once.
        if self._stopping.wait(max(0.0, min(1.0, self._next - time.monotonic()))) or interval < 0:
            return None
        if time.monotonic() < self._next:
            return None
        self._next = time.monotonic() + interval
        hb = Heartbeat(cfg.source_cluster_alias, cfg.target_cluster_alias, int(time.time() * 1000))
        return [SourceRecord(hb.connect_partition(), {"offset": 0}, cfg.heartbeats_topic, 0,
                             Schema.BYTES_SCHEMA, hb.record_key(), Schema.BYTES_SCHEMA, hb.record_value(),
                             hb.timestamp)]
