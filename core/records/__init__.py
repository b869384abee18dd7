"""RecordBatch v2: header parsing, CRC-32C validation, compression codecs, offset assignment.

Modules: :mod:`.batch` (header layout, ``read_header``, ``iter_headers``), :mod:`.codecs`
(none/gzip/snappy/lz4/zstd), :mod:`.builder` (build and decode batches and records, control
records), :mod:`.validate` (produce-path validation, in-place offset assignment).
"""

from strom.core.records.batch import BATCH_OVERHEAD, BatchHeader, iter_headers, read_header
from strom.core.records.builder import (
    DecodedBatch,
    LogRecord,
    Record,
    SimpleRecord,
    build_batch,
    build_control_batch,
    decode_batch,
    decode_records,
)
from strom.core.records.validate import AssignResult, assign_offsets, validate_produce_batches

__all__ = [
    "BATCH_OVERHEAD",
    "AssignResult",
    "BatchHeader",
    "DecodedBatch",
    "LogRecord",
    "Record",
    "SimpleRecord",
    "assign_offsets",
    "build_batch",
    "build_control_batch",
    "decode_batch",
    "decode_records",
    "iter_headers",
    "read_header",
    "validate_produce_batches",
]
