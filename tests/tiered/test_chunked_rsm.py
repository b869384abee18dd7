"""The chunked RemoteStorageManager without a network (no broker, no S3): Aiven's chunk-size codec
and chunk index, settings validation, alias selection and a copy/fetch round trip on Aiven's
filesystem backend."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.core.exceptions import ConfigError
from strom.plugins.exceptions import RemoteResourceNotFoundError
from strom.plugins.hookspecs.storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteStorageManager,
    TopicIdPartition,
)
from strom.plugins.manager import get_plugin_manager, load_remote_storage_manager
from strom.tiered.chunk_manifest import ChunkIndex, SegmentManifest, decode_chunk_sizes, encode_chunk_sizes
from strom.tiered.chunked_rsm import ChunkedRemoteStorageManager

AIVEN_RSM = "io.aiven.kafka.tieredstorage.RemoteStorageManager"


def load(config: dict[str, str]) -> RemoteStorageManager:
    rsm = load_remote_storage_manager(get_plugin_manager(autoload=False, env={}), config)
    assert rsm is not None
    return rsm


def s3_config(**override: str) -> dict[str, str]:
    return {"remote.log.storage.manager.class.name": AIVEN_RSM,
            "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
            "rsm.config.storage.s3.bucket.name": "b", "rsm.config.storage.s3.region": "us-east-1",
            "rsm.config.storage.s3.endpoint.url": "http://127.0.0.1:1",
            "rsm.config.storage.aws.access.key.id": "k", "rsm.config.storage.aws.secret.access.key": "s",
            "rsm.config.chunk.size": "1024", **override}


def test_chunk_sizes_codec_matches_aivens_layout() -> None:
    # Aiven's example: 1000000, 1000010, 1000020 need one byte each over the base; the last is full.
    encoded = encode_chunk_sizes([1000000, 1000010, 1000020])
    assert encoded == (b"\x00\x00\x00\x03" + (1000000).to_bytes(4, "big") + b"\x01" + b"\x00\x0a"
                       + (1000020).to_bytes(4, "big"))
    assert encode_chunk_sizes([]) == b"\x00\x00\x00\x00"
    assert encode_chunk_sizes([7]) == b"\x00\x00\x00\x01\x00\x00\x00\x07"


@given(st.lists(st.integers(min_value=0, max_value=2**31 - 1), max_size=50))
def test_chunk_sizes_codec_round_trips(values: list[int]) -> None:
    assert decode_chunk_sizes(encode_chunk_sizes(values)) == values


def test_chunk_index_ranges() -> None:
    index = ChunkIndex.build(100, 250, [30, 20, 10], fixed=False)
    assert [(c.original_position, c.original_size, c.transformed_position, c.transformed_size)
            for c in index.chunks()] == [(0, 100, 0, 30), (100, 100, 30, 20), (200, 50, 50, 10)]
    assert [c.id for c in index.chunks_for_range(99, 100)] == [0, 1]
    assert [c.id for c in index.chunks_for_range(240, 10_000)] == [2]
    assert index.chunks_for_range(250, 300) == []
    assert ChunkIndex.from_json(index.to_json()) == index
    fixed = ChunkIndex.build(100, 250, [100, 100, 50], fixed=True)
    assert fixed.to_json() == {"type": "fixed", "originalChunkSize": 100, "originalFileSize": 250,
                               "transformedChunkSize": 100, "finalTransformedChunkSize": 50}
    assert ChunkIndex.from_json(fixed.to_json()) == fixed
    with pytest.raises(ValueError):
        ChunkIndex.build(100, 250, [1, 2], fixed=False)
    manifest = SegmentManifest(fixed, dict.fromkeys(IndexType), False)
    assert SegmentManifest.from_json_bytes(manifest.to_json_bytes()) == manifest


@pytest.mark.parametrize(("drop", "override", "key"), [
    ("rsm.config.chunk.size", {}, "rsm.config.chunk.size"),
    (None, {"rsm.config.chunk.size": "0"}, "rsm.config.chunk.size"),
    (None, {"rsm.config.chunk.size": "lots"}, "rsm.config.chunk.size"),
    ("rsm.config.storage.s3.bucket.name", {}, "rsm.config.storage.s3.bucket.name"),
    ("rsm.config.storage.s3.region", {}, "rsm.config.storage.s3.region"),
    ("rsm.config.storage.aws.secret.access.key", {}, "rsm.config.storage.aws.secret.access.key"),
    (None, {"rsm.config.storage.backend.class": "com.example.Nope"}, "rsm.config.storage.backend.class"),
    (None, {"rsm.config.storage.s3.endpoint.url": "localhost:9000"}, "rsm.config.storage.s3.endpoint.url"),
    (None, {"rsm.config.compression.enabled": "yes"}, "rsm.config.compression.enabled"),
    (None, {"rsm.config.storage.s3.multipart.upload.part.size": "1024"},
     "rsm.config.storage.s3.multipart.upload.part.size"),
])
def test_bad_or_missing_settings_name_the_key(drop: str | None, override: dict[str, str], key: str) -> None:
    config = s3_config(**override)
    if drop:
        del config[drop]
    with pytest.raises(ConfigError) as e:
        load(config)
    assert e.value.key == key and key in str(e.value)


def test_builtin_selected_by_strom_name_and_by_aivens_class_name() -> None:
    assert isinstance(load(s3_config()), ChunkedRemoteStorageManager)
    assert isinstance(load({**s3_config(), "remote.log.storage.manager.class.name": "s3"}),
                      ChunkedRemoteStorageManager)
    with pytest.raises(ConfigError) as e:
        load({**s3_config(), "remote.log.storage.manager.class.name": "com.example.Unknown"})
    assert e.value.key == "remote.log.storage.manager.class.name" and "s3" in str(e.value)


def test_round_trip_on_aivens_filesystem_backend(tmp_path: Path) -> None:
    seg_dir = tmp_path / "local"
    seg_dir.mkdir()
    log = bytes(range(256)) * 40 + b"tail"
    files = {s: seg_dir / f"{0:020d}{s}" for s in (".log", ".index", ".timeindex", ".snapshot")}
    files[".log"].write_bytes(log)
    files[".index"].write_bytes(b"offset-index")
    files[".timeindex"].write_bytes(b"")
    files[".snapshot"].write_bytes(b"snap")
    rsm = load({"remote.log.storage.manager.class.name": AIVEN_RSM,
                "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
                "rsm.config.storage.root": str(tmp_path / "remote"), "rsm.config.chunk.size": "1000",
                "rsm.config.compression.enabled": "true"})
    tip = TopicIdPartition(uuid.uuid4(), "t", 0)
    m = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), 0, 99, 0, 1, 0, len(log), {0: 0})
    rsm.copy_log_segment_data(m, LogSegmentData(files[".log"], files[".index"], files[".timeindex"], None,
                                                files[".snapshot"], b"0\n1\n0 0\n"))
    with rsm.fetch_log_segment(m, 0) as stream:
        assert stream.read() == log
    with rsm.fetch_log_segment(m, 999, 2000) as stream:
        assert stream.read() == log[999:2001]
    for index_type, content in [(IndexType.OFFSET, b"offset-index"), (IndexType.TIMESTAMP, b""),
                                (IndexType.PRODUCER_SNAPSHOT, b"snap"), (IndexType.LEADER_EPOCH, b"0\n1\n0 0\n")]:
        with rsm.fetch_index(m, index_type) as stream:
            assert stream.read() == content
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(m, IndexType.TRANSACTION)
    rsm.delete_log_segment_data(m)
    assert not [p for p in (tmp_path / "remote").rglob("*") if p.is_file()]


def test_selected_from_a_broker_config(tmp_path: Path) -> None:
    from strom.core.config import BrokerConfig

    config = BrokerConfig.model_validate({
        "remote.log.storage.manager.class.name": AIVEN_RSM, "rsm.config.chunk.size": "1000",
        "rsm.config.storage.backend.class": "filesystem", "rsm.config.storage.root": str(tmp_path)})
    rsm = load_remote_storage_manager(get_plugin_manager(autoload=False, env={}), config)
    assert isinstance(rsm, ChunkedRemoteStorageManager) and rsm.chunk_size == 1000
