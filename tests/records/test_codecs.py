"""Compression codecs: round trips, the formats Kafka clients write, and corrupt input."""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.core.errors import CorruptMessageError, UnsupportedCompressionTypeError
from strom.core.records import codecs

ALL = [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD]
COMPRESSED = ALL[1:]

# Compressible and incompressible data, sometimes over the 32 KiB xerial block size.
payloads = st.one_of(
    st.binary(max_size=5000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=50), st.integers(1, 2000)),
)


@pytest.mark.parametrize("codec", ALL)
@settings(max_examples=60, deadline=None)
@given(data=payloads)
def test_round_trip(codec: int, data: bytes) -> None:
    assert codecs.decompress(codec, codecs.compress(codec, data)) == data


@pytest.mark.parametrize("codec", ALL)
def test_memoryview_and_bytearray_input(codec: int) -> None:
    data = b"abc" * 20000
    packed = codecs.compress(codec, bytearray(data))
    assert codecs.decompress(codec, memoryview(bytearray(packed))) == data


def test_snappy_writes_xerial_framing_in_32k_blocks() -> None:
    data = bytes(range(256)) * 300  # 76800 bytes -> 3 blocks
    packed = codecs.compress(codecs.SNAPPY, data)
    assert packed[:8] == codecs.XERIAL_MAGIC
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert [len(b) for b in blocks] == [32768, 32768, 76800 - 65536]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_snappy() -> None:
    data = b"raw snappy as librdkafka may send it " * 100
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert raw[:8] != codecs.XERIAL_MAGIC
    assert codecs.decompress(codecs.SNAPPY, raw) == data


def test_snappy_reads_kafka_python_xerial() -> None:
    from kafka.codec import snappy_encode

    data = b"xerial from an independent encoder " * 3000
    framed = snappy_encode(data, xerial_compatible=True, xerial_blocksize=32 * 1024)
    assert framed[:8] == codecs.XERIAL_MAGIC
    assert codecs.decompress(codecs.SNAPPY, framed) == data


def test_lz4_is_frame_format() -> None:
    packed = codecs.compress(codecs.LZ4, b"x" * 1000)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic 0x184D2204, little endian
    assert lz4.frame.decompress(packed) == b"x" * 1000


def test_lz4_reads_linked_blocks_with_checksum() -> None:
    data = b"linked blocks and content checksum " * 5000
    packed = lz4.frame.compress(data, block_linked=True, content_checksum=True)
    assert codecs.decompress(codecs.LZ4, packed) == data


def test_zstd_frame_without_content_size() -> None:
    data = b"streamed like zstd-jni's ZstdOutputStream " * 2000
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = cobj.compress(data) + cobj.flush()
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(frame)  # what a one-shot decoder does
    assert codecs.decompress(codecs.ZSTD, frame) == data


def test_zstd_concatenated_frames() -> None:
    a, b = b"first frame " * 100, b"second frame " * 100
    packed = codecs.compress(codecs.ZSTD, a) + codecs.compress(codecs.ZSTD, b)
    assert codecs.decompress(codecs.ZSTD, packed) == a + b


def test_gzip_multiple_members() -> None:
    packed = gzip.compress(b"one ") + gzip.compress(b"two")
    assert codecs.decompress(codecs.GZIP, packed) == b"one two"


def test_gzip_deterministic() -> None:
    assert codecs.compress(codecs.GZIP, b"same" * 99) == codecs.compress(codecs.GZIP, b"same" * 99)


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("cut", ["half", "tail"])
def test_truncated_input_is_corrupt(codec: int, cut: str) -> None:
    packed = codecs.compress(codec, bytes(range(256)) * 400)
    bad = packed[: len(packed) // 2] if cut == "half" else packed[:-3]
    with pytest.raises(CorruptMessageError):
        codecs.decompress(codec, bad)


@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.LZ4, codecs.ZSTD])
def test_garbage_is_corrupt(codec: int) -> None:
    with pytest.raises(CorruptMessageError):
        codecs.decompress(codec, b"\x00\x01 this is not compressed data \xff" * 3)


def test_garbage_raw_snappy_is_corrupt() -> None:
    with pytest.raises(CorruptMessageError):
        codecs.decompress(codecs.SNAPPY, b"\xff\xff\xff\xff\x0f not snappy")


def test_xerial_truncated_block_length() -> None:
    packed = codecs.compress(codecs.SNAPPY, b"abc" * 100)
    with pytest.raises(CorruptMessageError, match="truncated block length"):
        codecs.decompress(codecs.SNAPPY, packed + b"\x00\x00")


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        codecs.compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionTypeError):
        codecs.decompress(codec, b"x")


@pytest.mark.parametrize("codec", ALL)
def test_decompression_stops_at_the_limit(codec: int) -> None:
    """8 MiB of zeros (a few KB compressed) against a 1 MiB bound is refused; a bound of
    exactly its size is not, one byte less is."""
    data = bytes(8 << 20)
    packed = codecs.compress(codec, data)
    with pytest.raises(codecs.DecompressionLimitError, match="more than 1048576 bytes"):
        codecs.decompress(codec, packed, max_bytes=1 << 20)
    assert codecs.decompress(codec, packed, max_bytes=len(data)) == data
    with pytest.raises(codecs.DecompressionLimitError):
        codecs.decompress(codec, packed, max_bytes=len(data) - 1)


def test_snappy_block_declaring_gigabytes_is_refused_before_allocation() -> None:
    # Raw snappy: the uncompressed length varint (0xffffffff) and a few bytes of nothing.
    claim = b"\xff\xff\xff\xff\x0f" + b"\x00" * 8
    with pytest.raises(codecs.DecompressionLimitError):
        codecs.decompress(codecs.SNAPPY, claim, max_bytes=64 << 20)
    xerial = codecs.XERIAL_MAGIC + bytes([0, 0, 0, 1, 0, 0, 0, 1]) + len(claim).to_bytes(4, "big") + claim
    with pytest.raises(codecs.DecompressionLimitError):
        codecs.decompress(codecs.SNAPPY, xerial, max_bytes=64 << 20)


@pytest.mark.parametrize("codec", [codecs.GZIP, codecs.LZ4, codecs.ZSTD])
def test_truncated_stream_is_corrupt_with_a_limit(codec: int) -> None:
    packed = codecs.compress(codec, bytes(range(256)) * 400)
    with pytest.raises(CorruptMessageError):
        codecs.decompress(codec, packed[:-5], max_bytes=1 << 20)
