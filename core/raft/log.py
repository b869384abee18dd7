"""The storage the raft client replicates into: the ``RaftLog`` protocol and a file adapter.

Kafka's KRaft log (``KafkaMetadataLog``) wraps a regular ``UnifiedLog``; here
:class:`MetadataLog` wraps strom's ``strom.core.log.log.Log`` the same way and is what
``MetadataSystem`` uses. Raft only talks to the small :class:`RaftLog` protocol.
:class:`FileRaftLog` is a dependency-free implementation over one segment file in Kafka's
format (no indexes), written while ``Log`` was still being built; it is kept for tools/tests.

Recovery (:meth:`FileRaftLog.open`): batches are scanned from the start; the first batch that is
partial, has a bad length, magic or CRC, or breaks offset continuity ends the log, and the file
is truncated there — a torn write after kill -9 is dropped, never half-applied.

Committed data is never trimmed (:func:`check_metadata_log`, run before :class:`MetadataLog`
lets ``Log`` recovery cut a bad tail). Kafka's ``KafkaMetadataLog`` recovers like any log and
relies on other voters to refill what it cut; a single voter has no one to refill from, so
strom tells the two cases apart:

* a torn tail — the batch being appended when the process died — lies at or past the last
  durable high watermark (``appliedOffset`` in ``quorum-state``) and nothing valid follows it:
  it was never acknowledged, and it is truncated with a WARNING, as Kafka does;
* a bad batch below that high watermark, or followed by a valid batch (raft writes a batch only
  after the previous one was fsynced, so anything followed by more was committed), or followed
  by a later segment (a roll happens in the append after a committed one) is corruption of
  committed metadata: :class:`MetadataLogCorruptedError` stops the node, naming the file, the
  byte and the offset, unless the latest snapshot already holds everything that would be cut.

The way out is ``strom storage truncate-metadata`` (it lists what truncating drops and asks
for ``--yes``) or a backup of the directory.
"""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol, cast

from strom.core.errors import CorruptMessageError, OffsetOutOfRangeError
from strom.core.exceptions import CorruptStateError
from strom.core.records.batch import (
    BATCH_OVERHEAD,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_OFFSET,
    BatchHeader,
    Buffer,
    read_header,
)
from strom.core.records.builder import crc_of

log = logging.getLogger(__name__)

_MAGIC_POS = 16  # base_offset int64, batch_length int32, partition_leader_epoch int32
_MAX_RELATIVE_OFFSET = (1 << 31) - 1


class MetadataLogCorruptedError(CorruptStateError):
    """A batch of the metadata log below its committed offset is unreadable: the node stops."""

    def __init__(self, message: str, damage: LogDamage | None = None) -> None:
        super().__init__(message)
        self.damage = damage


class ScannedBatch(NamedTuple):
    """A valid batch of a segment file: where it is and its header."""

    path: Path
    position: int
    header: BatchHeader


@dataclass(frozen=True, slots=True)
class LogDamage:
    """The first bad batch of a metadata log and what follows it."""

    path: Path
    position: int        # byte position of the bad batch in ``path``
    offset: int          # the offset it should hold (end of the last good batch)
    reason: str
    later: tuple[ScannedBatch, ...]  # valid batches found after it (same segment, then later segments)
    later_segments: tuple[Path, ...]  # segment files after ``path``


@dataclass(frozen=True, slots=True)
class MetadataLogScan:
    """The result of :func:`scan_metadata_log`: the good prefix and the first damage, if any."""

    batches: tuple[ScannedBatch, ...]
    damage: LogDamage | None
    end_offset: int      # end of the good prefix

    def committed_end(self, high_watermark: int) -> int:
        """Every offset below this was committed: the durable high watermark, or the last valid
        batch found after the damage (it was written after the damaged one was fsynced), or
        the base of a later segment (rolled by an append after a committed batch)."""
        end = high_watermark
        if self.damage is not None:
            if self.damage.later:
                end = max(end, self.damage.later[-1].header.base_offset)
            for seg in self.damage.later_segments:
                end = max(end, int(seg.stem))
        return end


def _check_batch(data: bytes | mmap.mmap, pos: int, next_offset: int, segment_base: int) -> tuple[BatchHeader | None, str]:
    """The header of the batch at ``pos`` if it is whole and valid (Log recovery's rules), else
    None and the reason."""
    left = len(data) - pos
    if left < BATCH_OVERHEAD:
        return None, f"torn batch header ({left} bytes left, a header needs {BATCH_OVERHEAD})"
    # An mmap has the buffer protocol read_header and crc_of use (struct.unpack_from, crc32c);
    # their Buffer alias just does not name it.
    buf = cast(Buffer, data)
    try:
        header = read_header(buf, pos)
    except CorruptMessageError as e:
        return None, f"unreadable batch header ({e})"
    if header.batch_length < MIN_BATCH_LENGTH:
        return None, f"batch_length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}"
    if header.magic != CURRENT_MAGIC:
        return None, f"unsupported magic {header.magic}"
    size = header.batch_length + LOG_OVERHEAD
    if size > left:
        return None, f"torn batch (batch_length {header.batch_length} needs {size} bytes, {left} left)"
    computed = crc_of(buf, pos, header)
    if computed != header.crc:
        return None, f"CRC mismatch (stored 0x{header.crc:08x}, computed 0x{computed:08x})"
    if header.last_offset_delta < 0 or header.base_offset < next_offset:
        return None, (f"offset {header.base_offset} (last offset delta {header.last_offset_delta}) is below "
                      f"the expected next offset {next_offset}")
    if header.last_offset - segment_base > _MAX_RELATIVE_OFFSET or header.base_offset < segment_base:
        return None, f"offset {header.last_offset} does not belong to a segment based at {segment_base}"
    return header, ""


def _resync(data: bytes | mmap.mmap, pos: int, min_offset: int, segment_base: int) -> list[tuple[int, BatchHeader]]:
    """Valid batches after a bad one at ``pos``: the first found by trying every position whose
    magic byte is 2 (CRC-32C makes a false match vanishingly unlikely), then the chain after it."""
    out: list[tuple[int, BatchHeader]] = []
    probe = data.find(CURRENT_MAGIC.to_bytes(1, "big"), pos + 1 + _MAGIC_POS)
    while probe >= 0:
        start = probe - _MAGIC_POS
        header, _ = _check_batch(data, start, min_offset, segment_base)
        if header is not None:
            while header is not None:
                out.append((start, header))
                start += header.size
                header, _ = _check_batch(data, start, header.last_offset + 1, segment_base)
            return out
        probe = data.find(CURRENT_MAGIC.to_bytes(1, "big"), probe + 1)
    return out


def segment_files(directory: Path) -> list[Path]:
    """The ``<20-digit base offset>.log`` files of a partition directory, by base offset."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if p.suffix == ".log" and p.stem.isdigit() and len(p.stem) == 20]
    return sorted(found, key=lambda p: int(p.stem))


def scan_metadata_log(directory: Path) -> MetadataLogScan:
    """Validate every batch of the metadata log in ``directory`` as ``Log`` recovery does
    (whole header, length, magic, CRC-32C, increasing offsets inside the segment) without
    changing anything; report the first bad batch and the valid batches after it."""
    batches: list[ScannedBatch] = []
    segments = segment_files(directory)
    end = int(segments[0].stem) if segments else 0
    for i, path in enumerate(segments):
        base = int(path.stem)
        data = _map(path)
        next_offset = base
        pos = 0
        while pos < len(data):
            header, reason = _check_batch(data, pos, next_offset, base)
            if header is None:
                later = [ScannedBatch(path, p, h) for p, h in _resync(data, pos, next_offset, base)]
                for seg in segments[i + 1:]:
                    later.extend(_valid_prefix(seg))
                damage = LogDamage(path, pos, max(next_offset, end), reason, tuple(later), tuple(segments[i + 1:]))
                return MetadataLogScan(tuple(batches), damage, max(next_offset, end))
            batches.append(ScannedBatch(path, pos, header))
            next_offset = header.last_offset + 1
            end = next_offset
            pos += header.size
        end = max(end, next_offset)
    return MetadataLogScan(tuple(batches), None, end)


def _map(path: Path) -> bytes | mmap.mmap:
    """A segment's bytes, mapped read-only: a metadata segment may be large and is read once. The
    dir's .lock keeps writers (another broker, the repair tool) away while it is mapped."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _valid_prefix(path: Path) -> list[ScannedBatch]:
    data = _map(path)
    base = int(path.stem)
    out: list[ScannedBatch] = []
    pos, next_offset = 0, base
    while pos < len(data):
        header, _ = _check_batch(data, pos, next_offset, base)
        if header is None:
            break
        out.append(ScannedBatch(path, pos, header))
        next_offset = header.last_offset + 1
        pos += header.size
    return out


def check_metadata_log(directory: Path, *, high_watermark: int, snapshot_end_offset: int,
                       metadata_log_dir: Path | None = None) -> MetadataLogScan:
    """Refuse a metadata log whose committed part is damaged; return the scan otherwise.

    A bad batch is only left to ``Log`` recovery (truncated with a WARNING) when nothing
    committed would go with it: everything from the bad batch on lies at or past the committed
    end, or is already in the latest snapshot (``snapshot_end_offset``).
    """
    scan = scan_metadata_log(directory)
    damage = scan.damage
    committed = scan.committed_end(high_watermark)
    if damage is not None:
        lost_from = max(damage.offset, snapshot_end_offset)
        if committed > lost_from:
            raise MetadataLogCorruptedError(
                corruption_message(damage, committed, metadata_log_dir or directory.parent), damage)
        return scan
    if scan.end_offset < high_watermark and snapshot_end_offset < high_watermark:
        # Whole batches are missing (a file cut at a batch boundary, a deleted segment) and the
        # snapshot does not hold them either.
        files = segment_files(directory)
        where = files[-1] if files else directory
        raise MetadataLogCorruptedError(
            f"metadata log {where} ends at offset {scan.end_offset}, but offsets up to "
            f"{high_watermark - 1} were committed (appliedOffset {high_watermark} in "
            f"{directory / 'quorum-state'}) and the latest snapshot ends at {snapshot_end_offset}: committed "
            f"metadata records are missing. {way_out(metadata_log_dir or directory.parent, scan.end_offset)}")
    return scan


def way_out(metadata_log_dir: Path, offset: int) -> str:
    return (f"Restore {metadata_log_dir} from a backup, or run `strom storage truncate-metadata "
            f"--metadata-log-dir {metadata_log_dir} --offset {offset}` to list what truncating the "
            "metadata log there drops (add --yes to truncate; records in the latest snapshot are kept)")


def corruption_message(damage: LogDamage, committed_end: int, metadata_log_dir: Path) -> str:
    proof = []
    if damage.later:
        proof.append(f"{len(damage.later)} valid batch(es) follow it, up to offset {damage.later[-1].header.last_offset}")
    if damage.later_segments:
        proof.append(f"later segment(s) {', '.join(p.name for p in damage.later_segments)} exist")
    if not proof:
        proof.append(f"offsets below {committed_end} were committed (appliedOffset in quorum-state)")
    return (f"metadata log {damage.path} is corrupt at byte {damage.position} (the batch at offset "
            f"{damage.offset}): {damage.reason}; it holds committed metadata ({'; '.join(proof)}), so it is "
            f"not truncated. {way_out(metadata_log_dir, damage.offset)}")


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

    def __init__(self, directory: Path, segment_bytes: int = 1 << 30, *, high_watermark: int = 0,
                 snapshot_end_offset: int = 0) -> None:
        """``high_watermark`` / ``snapshot_end_offset``: what is known committed (quorum-state's
        appliedOffset, the latest snapshot); damage below them raises
        :class:`MetadataLogCorruptedError` before ``Log`` recovery could cut it."""
        from strom.core.config import LogConfig
        from strom.core.log.log import Log

        scan = check_metadata_log(directory, high_watermark=high_watermark, snapshot_end_offset=snapshot_end_offset)
        config = LogConfig.build(None, {"segment.bytes": segment_bytes, "retention.ms": -1})
        self.log = Log(directory, config, recovery_point=0, had_clean_shutdown=False)
        self.directory = directory
        # Log recovery must not cut more than the check allowed (should its rules ever grow
        # stricter than the check's): stop rather than run on with committed metadata gone.
        kept = max(min(scan.end_offset, scan.committed_end(high_watermark)), snapshot_end_offset)
        if self.log.log_end_offset < min(scan.end_offset, kept):
            end = self.log.log_end_offset
            self.log.close()
            raise MetadataLogCorruptedError(
                f"recovery of the metadata log {directory} cut it at offset {end}, below offset {scan.end_offset} "
                f"up to which its batches were checked valid; committed metadata records are missing. "
                f"{way_out(directory.parent, end)}")

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
