"""The storage the raft client replicates into: the ``RaftLog`` protocol and a file adapter.

Kafka's KRaft log (``KafkaMetadataLog``) wraps a regular ``UnifiedLog``; here
:class:`MetadataLog` wraps strom's ``strom.core.log.log.Log`` the same way and is what
``MetadataSystem`` uses. Raft only talks to the small :class:`RaftLog` protocol.
:class:`FileRaftLog` is a dependency-free implementation over one segment file in Kafka's
format (no indexes), written while ``Log`` was still being built; it is kept for tools/tests.

Recovery (:meth:`FileRaftLog.open`): batches are scanned from the start; the first batch that is
partial, has a bad length, magic or CRC, or breaks offset continuity ends the log, and the file
is truncated there — a torn write after kill -9 is dropped, never half-applied.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Protocol

from strom.core.exceptions import CorruptMessageError, OffsetOutOfRangeError
from strom.core.records.batch import (
    BATCH_OVERHEAD,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_OFFSET,
    read_header,
)
from strom.core.records.builder import crc_of

log = logging.getLogger(__name__)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class RaftLog(Protocol):
    """What the raft client needs from its log."""

    @property
    def end_offset(self) -> int: ...

    @property
    def start_offset(self) -> int: ...

    def append(self, batch: bytes, epoch: int) -> tuple[int, int]:
        """Append one batch whose base offset is ``end_offset``; return (first, last) offset."""
        ...

    def read(self, offset: int) -> list[tuple[int, bytes]]:
        """Whole batches from the one containing ``offset`` to the end, as (base offset, bytes)."""
        ...

    def truncate_to(self, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything; the next append gets ``offset`` (after loading a newer snapshot)."""
        ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class FileRaftLog:
    """A single-segment Kafka-format log; batches are indexed in memory (the metadata log is small)."""

    def __init__(self, directory: Path, base_offset: int = 0) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.path = directory / segment_name(base_offset)
        self._file = open(self.path, "a+b")  # noqa: SIM115  (kept open for the log's lifetime)
        # (base_offset, last_offset, file position, size) of each batch, in order.
        self._batches: list[tuple[int, int, int, int]] = []
        self._size = 0
        self._end_offset = base_offset

    @classmethod
    def open(cls, directory: Path) -> FileRaftLog:
        """Open (creating if needed) the log in ``directory`` and recover its tail."""
        directory.mkdir(parents=True, exist_ok=True)
        segments = sorted(int(p.stem) for p in directory.glob("*.log") if p.stem.isdigit())
        # One segment is written at a time; older ones are only left by a crash mid-reset.
        for stale in segments[:-1]:
            (directory / segment_name(stale)).unlink()
        self = cls(directory, segments[-1] if segments else 0)
        self._recover()
        return self

    def _recover(self) -> None:
        data = self.path.read_bytes()
        pos = 0
        expected: int | None = None
        while len(data) - pos >= BATCH_OVERHEAD:
            try:
                header = read_header(data, pos)
            except CorruptMessageError:
                break
            size = header.batch_length + LOG_OVERHEAD
            if (header.batch_length < MIN_BATCH_LENGTH or pos + size > len(data)
                    or header.magic != CURRENT_MAGIC or crc_of(data, pos, header) != header.crc
                    or (expected is not None and header.base_offset != expected)):
                break
            self._batches.append((header.base_offset, header.last_offset, pos, size))
            expected = header.last_offset + 1
            pos += size
        if pos != len(data):
            log.warning("metadata log %s: truncating %d byte(s) of torn or corrupt tail at byte %d",
                        self.path, len(data) - pos, pos)
            self._file.truncate(pos)
            self._file.flush()
            os.fsync(self._file.fileno())
        self._size = pos
        self._end_offset = expected if expected is not None else self.base_offset

    @property
    def end_offset(self) -> int:
        return self._end_offset

    @property
    def start_offset(self) -> int:
        return self._batches[0][0] if self._batches else self.base_offset

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def append(self, batch: bytes, epoch: int) -> tuple[int, int]:
        header = read_header(batch, 0)
        if header.base_offset != self._end_offset:
            raise ValueError(f"batch base offset {header.base_offset} != log end offset {self._end_offset}")
        if header.partition_leader_epoch != epoch:
            raise ValueError(f"batch epoch {header.partition_leader_epoch} != leader epoch {epoch}")
        self._file.seek(0, os.SEEK_END)
        self._file.write(batch)
        self._file.flush()  # to the page cache: readable, durable only after flush()
        self._batches.append((header.base_offset, header.last_offset, self._size, len(batch)))
        self._size += len(batch)
        self._end_offset = header.last_offset + 1
        return header.base_offset, header.last_offset

    def read(self, offset: int) -> list[tuple[int, bytes]]:
        if offset == self._end_offset:
            return []
        if not self.start_offset <= offset < self._end_offset:
            raise OffsetOutOfRangeError(f"offset {offset} outside [{self.start_offset}, {self._end_offset})")
        out = []
        for base, last, pos, size in self._batches:
            if last < offset:
                continue
            out.append((base, os.pread(self._file.fileno(), size, pos)))
        return out

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after ``offset`` (a batch straddling it goes too)."""
        keep = [b for b in self._batches if b[1] < offset]
        self._size = keep[-1][2] + keep[-1][3] if keep else 0
        self._batches = keep
        self._end_offset = keep[-1][1] + 1 if keep else self.base_offset
        self._file.truncate(self._size)
        self._file.flush()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        old = self.path
        self._file.close()
        self.base_offset = offset
        self.path = self.directory / segment_name(offset)
        self._file = open(self.path, "w+b")  # noqa: SIM115
        os.fsync(self._file.fileno())
        if old != self.path:
            old.unlink(missing_ok=True)
        self._batches = []
        self._size = 0
        self._end_offset = offset

    def flush(self) -> None:
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()


def set_partition_leader_epoch(batch: bytearray, epoch: int) -> None:
    """Patch the partition leader epoch (outside the CRC) of a batch in place."""
    batch[PARTITION_LEADER_EPOCH_OFFSET:PARTITION_LEADER_EPOCH_OFFSET + 4] = epoch.to_bytes(4, "big", signed=True)


class MetadataLog:
    """:class:`RaftLog` over strom's partition :class:`~strom.core.log.log.Log` (as Kafka's
    ``KafkaMetadataLog`` wraps ``UnifiedLog``): Kafka's segment files, indexes and
    ``leader-epoch-checkpoint`` in ``__cluster_metadata-0``.

    The log is opened as after an unclean shutdown (recovery point 0), so every start
    re-validates it batch by batch and truncates a torn tail; the metadata log is small enough
    for that to be cheap, and it needs no recovery-point checkpoint of its own.
    """

    def __init__(self, directory: Path, segment_bytes: int = 1 << 30) -> None:
        from strom.core.config import LogConfig
        from strom.core.log.log import Log

        config = LogConfig.build(None, {"segment.bytes": segment_bytes, "retention.ms": -1})
        self.log = Log(directory, config, recovery_point=0, had_clean_shutdown=False)
        self.directory = directory

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    def append(self, batch: bytes, epoch: int) -> tuple[int, int]:
        from strom.core.records.batch import iter_headers

        if read_header(batch, 0).base_offset != self.end_offset:
            raise ValueError(f"batch base offset != log end offset {self.end_offset}")
        buf = bytearray(batch)
        info = self.log.append_as_leader(buf, list(iter_headers(buf)), epoch)
        return info.first_offset, info.last_offset

    def read(self, offset: int) -> list[tuple[int, bytes]]:
        from strom.core.records.batch import iter_headers

        out: list[tuple[int, bytes]] = []
        while offset < self.end_offset:
            data = self.log.read(offset, 1 << 20, None, True).records
            if not data:
                break
            for pos, header in iter_headers(data):
                out.append((header.base_offset, bytes(data[pos:pos + header.size])))
                offset = header.last_offset + 1
        return out

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        if not self.log.closed:
            self.log.flush()
            self.log.close()
