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

Decompression is streamed and bounded: ``decompress(..., max_bytes=N)`` never holds more than
about N bytes of output (zlib and LZ4 take an output bound, zstd is fed small input slices whose
worst-case expansion fits what is left, snappy blocks declare their size before they are
decompressed) and raises :class:`DecompressionLimitError` past it, so a batch of a few KB that
expands to GBs (a decompression bomb) costs the broker N bytes and a few milliseconds.
"""

from __future__ import annotations

import gzip
import struct
import sys
import zlib

import cramjam
import lz4.frame
import zstandard

from strom.core.errors import CorruptMessageError, UnsupportedCompressionTypeError
from strom.core.exceptions import BrokerError

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


class DecompressionLimitError(BrokerError):
    """The data decompresses to more than the ``max_bytes`` the caller allowed."""

    def __init__(self, codec: str, limit: int) -> None:
        super().__init__(f"{codec} data decompresses to more than {limit} bytes")
        self.codec = codec
        self.limit = limit


def decompress(codec_id: int, data: Buffer, max_bytes: int | None = None) -> bytes:
    """Decompress a batch's records section; corrupt input raises :class:`CorruptMessageError`.

    With ``max_bytes`` the output is produced piecewise and :class:`DecompressionLimitError` is
    raised as soon as it would exceed ``max_bytes`` (memory stays within a few MB of it).
    """
    if codec_id == NONE:
        if max_bytes is not None and len(data) > max_bytes:
            raise DecompressionLimitError("none", max_bytes)
        return bytes(data)
    name = codec_name(codec_id)
    limit = _UNBOUNDED if max_bytes is None else max_bytes
    try:
        if codec_id == GZIP:
            return _gzip_decompress(data, limit)
        if codec_id == SNAPPY:
            return _snappy_decompress(data, limit)
        if codec_id == LZ4:
            return _lz4_decompress(data, limit)
        return _zstd_decompress(data, limit)
    except (CorruptMessageError, DecompressionLimitError):
        raise
    except (OSError, EOFError, ValueError, RuntimeError, zlib.error, zstandard.ZstdError,
            cramjam.DecompressionError) as exc:
        # lz4 raises RuntimeError, gzip OSError/EOFError/zlib.error: all mean bad input bytes.
        raise CorruptMessageError(f"{name} decompression failed: {exc}") from exc


# No bound: larger than any buffer Python can hold.
_UNBOUNDED = sys.maxsize
# Output asked of zlib / LZ4 per call: big enough that the loop costs nothing next to the work.
_CHUNK = 1 << 20


def _gzip_decompress(data: Buffer, limit: int) -> bytes:
    # A gzip stream may hold several members (gzip.decompress reads them all; so do we); zero
    # padding after a member is ignored as gzip.decompress ignores it. wbits=31: gzip framing,
    # whose trailer (CRC-32 and length) zlib checks.
    out = bytearray()
    remaining = bytes(data)
    while True:
        dobj = zlib.decompressobj(wbits=31)
        chunk = remaining
        while True:
            piece = dobj.decompress(chunk, min(_CHUNK, limit - len(out) + 1))
            out += piece
            if len(out) > limit:
                raise DecompressionLimitError("gzip", limit)
            if dobj.eof:
                break
            chunk = dobj.unconsumed_tail
            if not chunk and not piece:
                raise CorruptMessageError("gzip decompression failed: truncated stream")
        remaining = dobj.unused_data.lstrip(b"\x00")
        if not remaining:
            return bytes(out)


def _lz4_decompress(data: Buffer, limit: int) -> bytes:
    out = bytearray()
    remaining: Buffer = data
    while True:  # concatenated frames, as lz4.frame.decompress reads them
        dobj = lz4.frame.LZ4FrameDecompressor()
        chunk: Buffer = remaining
        while not dobj.eof:
            piece = dobj.decompress(chunk, max_length=min(_CHUNK, limit - len(out) + 1))
            out += piece
            if len(out) > limit:
                raise DecompressionLimitError("lz4", limit)
            chunk = b""
            if not piece and dobj.needs_input and not dobj.eof:
                raise CorruptMessageError("lz4 decompression failed: truncated frame")
        remaining = dobj.unused_data
        if not remaining:
            return bytes(out)


# zstd's largest expansion: an RLE block of a 3-byte header and one byte gives 128 KiB.
_ZSTD_MAX_RATIO = 1 << 15
_ZSTD_MIN_SLICE = 256  # below it the per-call cost dominates; overshoot is <= 8 MiB then
# At most this much output per call (for a bomb): each call holds its thread for milliseconds only.
_ZSTD_MAX_CALL_OUTPUT = 16 << 20


def _zstd_decompress(data: Buffer, limit: int) -> bytes:
    # A decompression object per frame: frames written by zstd-jni's ZstdOutputStream have no
    # content size, which the one-shot API refuses. Loop for several concatenated frames, and
    # insist every frame ends (a truncated frame otherwise decodes to short output silently).
    # zstd's objects take no output bound, so the input goes in slices whose worst-case output
    # fits what is left of the limit.
    view = memoryview(data)
    out = bytearray()
    pos = 0
    end = len(view)
    while True:
        dobj = _zstd_decompressor.decompressobj()
        while not dobj.eof:
            if pos >= end:
                raise CorruptMessageError("zstd decompression failed: truncated frame")
            room = limit - len(out)
            step = end - pos if limit == _UNBOUNDED else max(
                _ZSTD_MIN_SLICE, min(room, _ZSTD_MAX_CALL_OUTPUT) // _ZSTD_MAX_RATIO)
            nxt = min(end, pos + step)
            out += dobj.decompress(view[pos:nxt])
            pos = nxt
            if len(out) > limit:
                raise DecompressionLimitError("zstd", limit)
        # What the object did not use of the last slice belongs to the next frame.
        pos -= len(dobj.unused_data)
        if pos >= end:
            return bytes(out)


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_pack_int(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer, limit: int = _UNBOUNDED) -> bytes:
    view = memoryview(data)
    if len(view) >= _XERIAL_HEADER_LEN and view[:8] == XERIAL_MAGIC:
        return _xerial_decompress(view, limit)
    _check_snappy_size(view, 0, limit)
    return bytes(cramjam.snappy.decompress_raw(view))


def _check_snappy_size(view: memoryview, produced: int, limit: int) -> None:
    """Refuse a raw snappy block whose declared size (its leading varint, which the
    decompressor allocates before it reads a byte) would take the output past ``limit``."""
    size = 0
    shift = 0
    for i in range(min(len(view), 5)):
        b = view[i]
        size |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if produced + size > limit:
        raise DecompressionLimitError("snappy", limit)


def _xerial_decompress(view: memoryview, limit: int = _UNBOUNDED) -> bytes:
    out = bytearray()
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
        block = view[pos:pos + block_len]
        _check_snappy_size(block, len(out), limit)
        out += decompress_raw(block)
        pos += block_len
    return bytes(out)
