"""A third-party RemoteStorageManager that keeps remote segments in a directory, offered through
this package's ``strom.plugins`` entry point as ``strom_test_plugin.DirectoryRemoteStorageManager``.

Layout: ``<rsm.config.dir>/<topic>-<partition>/<20-digit start offset>-<segment uuid>/`` holding the
segment's files under their local names (``segment.log``, ``segment.index``, ...). Written as an
outside author would, against the storage hookspec's Protocol only.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strom.plugins.exceptions import RemoteResourceNotFoundError
from strom.plugins.hookspecs.storage import IndexType, LogSegmentData, RemoteLogSegmentMetadata

NAME = "strom_test_plugin.DirectoryRemoteStorageManager"
DIR_KEY = "rsm.config.dir"


class DirectoryRemoteStorageManager:
    def __init__(self, broker_config: Mapping[str, Any]) -> None:
        self.root = Path(".")
        self.configure({"dir": broker_config.get(DIR_KEY)})

    def configure(self, configs: Mapping[str, object]) -> None:
        if not configs.get("dir"):
            raise ValueError(f"{DIR_KEY} is required")
        self.root = Path(str(configs["dir"]))

    def _dir(self, metadata: RemoteLogSegmentMetadata) -> Path:
        tip = metadata.segment_id.topic_id_partition
        return self.root / f"{tip.topic}-{tip.partition}" / f"{metadata.start_offset:020d}-{metadata.segment_id.id}"

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        target = self._dir(metadata)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data.log_segment, target / "segment.log")
        shutil.copyfile(data.offset_index, target / f"segment{IndexType.OFFSET.value}")
        shutil.copyfile(data.time_index, target / f"segment{IndexType.TIMESTAMP.value}")
        shutil.copyfile(data.producer_snapshot_index, target / f"segment{IndexType.PRODUCER_SNAPSHOT.value}")
        if data.transaction_index is not None:
            shutil.copyfile(data.transaction_index, target / f"segment{IndexType.TRANSACTION.value}")
        (target / f"segment{IndexType.LEADER_EPOCH.value}").write_bytes(data.leader_epoch_index)
        return str(target).encode()

    def _read(self, path: Path) -> bytes:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise RemoteResourceNotFoundError(f"{path} does not exist") from None

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> io.BytesIO:
        data = self._read(self._dir(metadata) / "segment.log")
        return io.BytesIO(data[start_position:None if end_position is None else end_position + 1])

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> io.BytesIO:
        return io.BytesIO(self._read(self._dir(metadata) / f"segment{index_type.value}"))

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        shutil.rmtree(self._dir(metadata), ignore_errors=True)

    def close(self) -> None:
        pass
