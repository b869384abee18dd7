"""MetadataLoader: turns the committed raft log into MetadataImages and publishes them.

It is the raft client's listener. A snapshot load replaces the image (the delta is taken
from the empty image, so publishers see every topic as created); each committed batch of data
records is replayed into one :class:`MetadataDelta` — a batch is one controller request, so
publishers never see half a request. Control batches (LeaderChange) change no metadata.
"""

from __future__ import annotations

import logging

from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.image import MetadataImage
from strom.core.metadata.publisher import MetadataPublisher
from strom.core.metadata.records import UnknownMetadataRecordError, decode_record
from strom.core.raft.client import CommittedBatch
from strom.core.raft.snapshot import SnapshotId

log = logging.getLogger(__name__)


class MetadataLoader:
    """Holds the latest image and the ordered list of publishers."""

    def __init__(self, cluster_id: str = "") -> None:
        self.image = MetadataImage(cluster_id=cluster_id)
        self.publishers: list[MetadataPublisher] = []
        self.bytes_since_snapshot = 0

    def add_publisher(self, publisher: MetadataPublisher) -> None:
        """Register ``publisher``; it is caught up at once with a delta from the empty image."""
        self.publishers.append(publisher)
        if not self.image.is_empty():
            delta = MetadataDelta(MetadataImage(cluster_id=self.image.cluster_id))
            for record in self.image.to_records():
                delta.replay(record)
            publisher.on_metadata_update(delta, self.image)

    def remove_publisher(self, publisher: MetadataPublisher) -> None:
        self.publishers.remove(publisher)

    def _publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        for publisher in list(self.publishers):
            try:
                publisher.on_metadata_update(delta, image)
            except Exception:
                # One faulty publisher must not stop the others or the metadata log.
                log.exception("metadata publisher %r failed at offset %d", publisher, image.offset)

    # -- RaftListener --------------------------------------------------------------------------

    def handle_load_snapshot(self, snapshot_id: SnapshotId, values: list[bytes]) -> None:
        delta = MetadataDelta(MetadataImage(cluster_id=self.image.cluster_id))
        for value in values:
            delta.replay(decode_record(value))
        self.bytes_since_snapshot = 0
        self._publish(delta, delta.apply(snapshot_id.end_offset - 1, snapshot_id.epoch))

    def handle_commit(self, batch: CommittedBatch) -> None:
        if batch.is_control or not batch.records:
            return
        delta = MetadataDelta(self.image)
        for offset, value in batch.records:
            try:
                record = decode_record(value)
            except UnknownMetadataRecordError as e:
                raise UnknownMetadataRecordError(f"the metadata log's record at offset {offset}: {e}") from None
            delta.replay(record)
        self.bytes_since_snapshot += batch.size_in_bytes
        self._publish(delta, delta.apply(batch.records[-1][0], batch.epoch))
