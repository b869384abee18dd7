"""Compression codecs of RecordBatch v2: the batch's records section is compressed as a whole.

Codec ids are Kafka's (attributes bits 0-2): 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.
Formats are what Kafka clients write and read:

- gzip: a gzip stream (RFC 1952); several members are accepted on read.
- snappy: the Java client writes xerial's snappy-java block framing (magic header, then
  length-prefixed raw snappy blocks); librdkafka may send raw snappy. We write the xerial framing
  (every client reads it) and read both, telling them apart by the xerial magic header.
- lz4: the LZ4 *frame* format (magic 0x184D2204), not raw LZ4 blocks.
- zstd: zstd frames; the Java client streams them, so the frame header may carry no content
  size, which is why decompression streams instead of calling one-shot ``decompress``.

Bad compressed input raises :class:`CorruptMessageError`; an unknown codec id raises
:class:`UnsupportedCompressionTypeError`.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from strom.core.exceptions import CorruptMessageError, UnsupportedCompressionTypeError

Buffer = bytes | bytearray | memoryview

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_IDS: dict[str, int] = {name: codec for codec, name in CODEC_NAMES.items()}

# xerial snappy-java stream header: magic, then format version and min-compatible version.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_LEN = len(_XERIAL_HEADER)  # 16
# snappy-java's default block size; the Java client uses it for Kafka batches.
XERIAL_BLOCK_SIZE = 32 * 1024

_unpack_int = struct.Struct(">i").unpack_from
_pack_int = struct.Struct(">i").pack

# Kafka's default levels (compression.gzip.level etc. default to the codec's own default).
_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3

_zstd_compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
_zstd_decompressor = zstandard.ZstdDecompressor()


def codec_name(codec_id: int) -> str:
    try:
        return CODEC_NAMES[codec_id]
    except KeyError:
        raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec_id}") from None


def compress(codec_id: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` with codec ``codec_id`` in the format Kafka clients read."""
    if codec_id == NONE:
        return bytes(data)
    if codec_id == GZIP:
        # mtime=0 keeps the output deterministic (same input -> same batch bytes and CRC).
        return gzip.compress(data, compresslevel=_GZIP_LEVEL if level is None else level, mtime=0)
    if codec_id == SNAPPY:
        return _xerial_compress(data)
    if codec_id == LZ4:
        # Block independence and no content checksum, like Kafka's KafkaLZ4BlockOutputStream.
        return bytes(lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_linked=False,
            content_checksum=False,
        ))
    if codec_id == ZSTD:
        if level is None:
            return _zstd_compressor.compress(data)
        return zstandard.ZstdCompressor(level=level).compress(data)
    raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec_id}")


def decompress(codec_id: int, data: Buffer) -> bytes:
    """Decompress a batch's records section; corrupt input raises :class:`CorruptMessageError`."""
    if codec_id == NONE:
        return bytes(data)
    name = codec_name(codec_id)
    try:
        if codec_id == GZIP:
            return gzip.decompress(data)
        if codec_id == SNAPPY:
            return _snappy_decompress(data)
        if codec_id == LZ4:
            return bytes(lz4.frame.decompress(data))
        return _zstd_decompress(data)
    except CorruptMessageError:
        raise
    except (OSError, EOFError, ValueError, RuntimeError, zlib.error, zstandard.ZstdError,
            cramjam.DecompressionError) as exc:
        # lz4 raises RuntimeError, gzip OSError/EOFError/zlib.error: all mean bad input bytes.
        raise CorruptMessageError(f"{name} decompression failed: {exc}") from exc


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_pack_int(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    if len(view) >= _XERIAL_HEADER_LEN and view[:8] == XERIAL_MAGIC:
        return _xerial_decompress(view)
    return bytes(cramjam.snappy.decompress_raw(view))


def _xerial_decompress(view: memoryview) -> bytes:
    out: list[bytes] = []
    decompress_raw = cramjam.snappy.decompress_raw
    pos = _XERIAL_HEADER_LEN
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptMessageError(f"xerial snappy: truncated block length at byte {pos}")
        (block_len,) = _unpack_int(view, pos)
        pos += 4
        if block_len < 0 or pos + block_len > end:
            raise CorruptMessageError(
                f"xerial snappy: block of {block_len} bytes at byte {pos} runs past the end ({end})"
            )
        out.append(bytes(decompress_raw(view[pos:pos + block_len])))
        pos += block_len
    return b"".join(out)


def _zstd_decompress(data: Buffer) -> bytes:
    # Streaming decompression object: frames written by zstd-jni's ZstdOutputStream have no
    # content size, which the one-shot API refuses. Loop for several concatenated frames, and
    # insist every frame ends (a truncated frame otherwise decodes to short output silently).
    chunks: list[bytes] = []
    remaining: Buffer = data
    while True:
        dobj = _zstd_decompressor.decompressobj()
        chunks.append(dobj.decompress(remaining))
        if not dobj.eof:
            raise CorruptMessageError("zstd decompression failed: truncated frame")
        remaining = dobj.unused_data
        if not remaining:
            return b"".join(chunks)
