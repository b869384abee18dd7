"""MetadataSystem: the KRaft metadata path of one node, wired and ready for the broker.

It assembles the raft client, the metadata loader and the QuorumController (Kafka's
``SharedServer`` with the ``ControllerServer``'s controller), so it sits at the controller's
layer, above both ``strom.core.metadata`` and ``strom.core.raft``: raft < metadata < controller.

Usage (on the broker's event loop)::

    system = MetadataSystem.open(config)          # reads meta.properties, opens the log
    system.add_publisher(replica_manager)         # any MetadataPublisher, in order
    await system.start()                          # snapshot + log replay, election, bootstrap
    epoch = await system.controller.register_broker(node_id, endpoints, rack, incarnation_id)
    results = await system.controller.create_topics([...])
    system.image                                  # latest committed MetadataImage
    await system.close()                          # controlled shutdown: fenced, leaders moved

Layout: ``<metadata.log.dir>/__cluster_metadata-0/`` holds the log segment, ``quorum-state`` and
``<offset>-<epoch>.checkpoint`` snapshots; ``bootstrap.checkpoint`` and ``meta.properties`` sit
in ``metadata.log.dir``. ``open`` refuses an unformatted directory unless ``auto_format`` is set
(then it formats with a random cluster id, as ``strom dev`` wants).

Snapshots: after ``metadata.log.max.record.bytes.between.snapshots`` bytes of committed
batches, the current image is written as a snapshot (in a worker thread); on start the newest
readable snapshot is loaded and only the log after it is replayed.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from strom.core.config import BrokerConfig, split_csv
from strom.core.controller.quorum_controller import QuorumController
from strom.core.metadata.bootstrap import (
    FormatError,
    format_storage,
    random_uuid,
    read_bootstrap,
    read_meta_properties,
)
from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.features import FEATURES
from strom.core.metadata.image import MetadataImage
from strom.core.metadata.loader import MetadataLoader
from strom.core.metadata.publisher import MetadataPublisher
from strom.core.metadata.records import encode_record
from strom.core.raft.client import METADATA_PARTITION_DIR, RaftClient
from strom.core.raft.log import MetadataLog
from strom.core.raft.quorum_state import QuorumStateStore
from strom.core.raft.snapshot import SnapshotId, delete_snapshots_before, list_snapshots

log = logging.getLogger(__name__)


def parse_voters(config: BrokerConfig) -> list[int]:
    """Voter ids from ``controller.quorum.voters`` (``id@host:port,...``); default: this node."""
    voters = [int(v.split("@", 1)[0]) for v in split_csv(config.controller_quorum_voters)]
    return voters or [config.node_id]


class MetadataSystem:
    """Raft client + metadata loader + quorum controller of one node."""

    def __init__(self, config: BrokerConfig, cluster_id: str, raft: RaftClient, loader: MetadataLoader) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.raft = raft
        self.loader = loader
        self.controller = QuorumController(config, raft, loader)
        self.snapshot_bytes = config.metadata_log_max_record_bytes_between_snapshots
        self._snapshot_tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._started = False

    @classmethod
    def open(cls, config: BrokerConfig, *, auto_format: bool = False) -> MetadataSystem:
        meta_dir = config.metadata_dir
        props = read_meta_properties(meta_dir)
        if props is None:
            if not auto_format:
                raise FormatError(f"{meta_dir} is not formatted (no meta.properties); run 'strom format'")
            format_storage(config, random_uuid(), ignore_formatted=True)
            props = read_meta_properties(meta_dir)
            assert props is not None
        if props.get("node.id") not in (None, str(config.node_id)):
            raise FormatError(f"{meta_dir} belongs to node.id {props.get('node.id')}, not {config.node_id}")
        cluster_id = props.get("cluster.id", "")
        part_dir = Path(meta_dir) / METADATA_PARTITION_DIR
        # What is known committed bounds what recovery may cut (quorum-state read errors name the file).
        stored = QuorumStateStore(part_dir).read()
        snapshots = list_snapshots(part_dir)
        raft_log = MetadataLog(part_dir, config.metadata_log_segment_bytes,
                               high_watermark=stored.high_watermark if stored else 0,
                               snapshot_end_offset=snapshots[-1].end_offset if snapshots else 0)
        raft = RaftClient(config.node_id, parse_voters(config), part_dir, raft_log)
        loader = MetadataLoader(cluster_id)
        raft.register_listener(loader)
        return cls(config, cluster_id, raft, loader)

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    def add_publisher(self, publisher: MetadataPublisher) -> None:
        self.loader.add_publisher(publisher)

    async def start(self) -> None:
        """Replay snapshot + log, become leader, write the bootstrap records into an empty log."""
        self.loader.add_publisher(_SnapshotTrigger(self))
        await self.raft.start()
        # As in Kafka, bootstrap.checkpoint only matters to an empty log (no metadata.version yet).
        bootstrap = read_bootstrap(self.config.metadata_dir) if self.image.metadata_version == 0 else []
        for name, level in sorted(self.image.features.items()):
            spec = FEATURES.get(name)
            if spec is not None and level > spec.max_level:
                # A log Kafka wrote (share.version / streams.version 1): kept and reported as
                # finalized, but strom has not that level's behaviour.
                log.warning("the metadata log finalizes %s=%d, but strom implements %s only up to level %d: "
                            "what that level enables is not served", name, level, name, spec.max_level)
        await self.controller.activate(bootstrap)
        self._started = True

    async def snapshot(self) -> SnapshotId | None:
        """Write a snapshot of the current image now (None if nothing is committed)."""
        image = self.image
        if image.offset < 0:
            return None
        sid = SnapshotId(image.offset + 1, image.epoch)
        if self.raft.latest_snapshot is not None and sid <= self.raft.latest_snapshot:
            self.loader.bytes_since_snapshot = 0  # nothing newer to write
            return self.raft.latest_snapshot
        covered = self.loader.bytes_since_snapshot  # what this image holds
        # Each record in the version Kafka writes at the image's metadata.version, as the log has them.
        mv = image.metadata_version or None
        await self.raft.write_snapshot(sid, [encode_record(r, metadata_version=mv) for r in image.to_records()])
        # Batches committed while the snapshot was written are not in it: they still count.
        self.loader.bytes_since_snapshot = max(self.loader.bytes_since_snapshot - covered, 0)
        await asyncio.to_thread(delete_snapshots_before, self.raft.directory, sid)
        log.info("wrote metadata snapshot %s", sid.file_name)
        return sid

    def _maybe_snapshot(self) -> None:
        if self._snapshot_tasks or self.loader.bytes_since_snapshot < self.snapshot_bytes:
            return
        task = asyncio.get_running_loop().create_task(self._snapshot_quietly())
        self._snapshot_tasks.add(task)
        task.add_done_callback(self._after_snapshot)

    def _after_snapshot(self, task: asyncio.Task[None]) -> None:
        self._snapshot_tasks.discard(task)
        # A commit that arrived during the snapshot found it running and started none.
        if self._started and not self._closing:
            self._maybe_snapshot()

    async def _snapshot_quietly(self) -> None:
        try:
            await self.snapshot()
        except Exception:
            log.exception("metadata snapshot failed")

    async def close(self, *, controlled_shutdown: bool = True) -> None:
        """Stop the node's metadata path. With ``controlled_shutdown`` (a clean stop), this
        node's broker is first taken out of ISR and leadership and fenced, with the records
        Kafka's controller writes for a controlled shutdown, so whoever opens this log next
        (strom or Kafka) finds no live registration of a process that is gone."""
        self._closing = True
        if controlled_shutdown and self._started:
            # The broker is stopping: its components no longer follow the image.
            self.loader.publishers = [p for p in self.loader.publishers if isinstance(p, _SnapshotTrigger)]
            try:
                await self.controller.controlled_shutdown(self.config.node_id)
            except Exception:
                # The log stays as it was: the next start re-registers and elects anyway.
                log.exception("controlled shutdown of broker %d failed", self.config.node_id)
        if self._snapshot_tasks:
            await asyncio.gather(*self._snapshot_tasks, return_exceptions=True)
        self.raft.close()


class _SnapshotTrigger:
    """Publisher that starts a snapshot once enough bytes were committed since the last one."""

    def __init__(self, system: MetadataSystem) -> None:
        self.system = system

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if self.system._started:
            self.system._maybe_snapshot()
