"""RecordBatch v2 header: layout constants, one-``struct`` parsing, walking a buffer of batches.

Layout (big endian, 61 bytes, Kafka's ``DefaultRecordBatch``)::

    0  base_offset            int64
    8  batch_length           int32   bytes after this field (total size = batch_length + 12)
    12 partition_leader_epoch int32
    16 magic                  int8    (2)
    17 crc                    uint32  CRC-32C of bytes [21, end of batch)
    21 attributes             int16   bits 0-2 codec, 3 timestamp type, 4 transactional,
                                      5 control, 6 delete horizon set
    23 last_offset_delta      int32
    27 base_timestamp         int64
    35 max_timestamp          int64
    43 producer_id            int64
    51 producer_epoch         int16
    53 base_sequence          int32
    57 records_count          int32
    61 records...

The broker treats batches as opaque: it parses this header, checks the CRC and patches
``base_offset`` / ``partition_leader_epoch`` (both outside the CRC) in place.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from strom.core.errors import CorruptMessageError

Buffer = bytes | bytearray | memoryview

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
BATCH_OVERHEAD = 61
assert HEADER_STRUCT.size == BATCH_OVERHEAD

# Field offsets inside a batch.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes not counted by batch_length
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers [ATTRIBUTES_OFFSET, end)
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
# Smallest legal batch_length: a header with no records.
MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD

CURRENT_MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TIMESTAMP_CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire / on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at 2**31 as Kafka's does); -1 without sequences."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


_unpack_from = HEADER_STRUCT.unpack_from


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header of the batch starting at ``pos``.

    Raises :class:`CorruptMessageError` when fewer than 61 bytes remain. The batch body is not
    checked here (see :mod:`strom.core.records.validate`).
    """
    if pos < 0 or len(buf) - pos < BATCH_OVERHEAD:
        raise CorruptMessageError(
            f"batch at byte {pos}: {max(len(buf) - pos, 0)} bytes left, a batch header needs {BATCH_OVERHEAD}"
        )
    return BatchHeader._make(_unpack_from(buf, pos))


def iter_headers(buf: Buffer, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each whole batch in ``buf``.

    Stops silently at a trailing partial batch, as a fetch response may end with one (Kafka
    clients ignore it too). A batch_length too small to hold a header is corruption, not a
    partial batch, and raises :class:`CorruptMessageError`.
    """
    end = len(buf)
    pos = start
    while end - pos >= BATCH_OVERHEAD:
        header = BatchHeader._make(_unpack_from(buf, pos))
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptMessageError(
                f"batch at byte {pos}: batch_length {header.batch_length} is smaller than the "
                f"minimum {MIN_BATCH_LENGTH}"
            )
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > end:
            return
        yield pos, header
        pos += size
