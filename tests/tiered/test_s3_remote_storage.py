"""The S3 RemoteStorageManager (Aiven's chunked layout, boto3) against moto in server mode, on
segments written by strom's broker; and a third-party manager chosen through its entry point."""

from __future__ import annotations

import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from botocore.exceptions import ClientError

from strom.core.exceptions import ConfigError
from strom.plugins.exceptions import RemoteResourceNotFoundError, RemoteStorageError
from strom.plugins.hookspecs.storage import (
    IndexType,
    RemoteLogSegmentMetadata,
    RemoteStorageManager,
    kafka_uuid_str,
)
from strom.plugins.manager import get_plugin_manager, load_remote_storage_manager
from strom.tiered.chunked_rsm import ChunkedRemoteStorageManager
from strom.tiered.object_storage import S3Storage

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.tiered.conftest import S3Config, Segment, StromSegments

pytestmark = pytest.mark.broker  # strom_segments starts strom's broker

MIB = 1024 * 1024
CHUNK = 10007  # s3_rsm_config's chunk.size


def load(config: dict[str, str]) -> RemoteStorageManager:
    rsm = load_remote_storage_manager(get_plugin_manager(autoload=False, env={}), config)
    assert rsm is not None
    return rsm


def read_all(rsm: RemoteStorageManager, m: RemoteLogSegmentMetadata, start: int, end: int | None = None) -> bytes:
    with rsm.fetch_log_segment(m, start, end) as stream:
        return stream.read()


def check_round_trip(rsm: RemoteStorageManager, seg: Segment, m: RemoteLogSegmentMetadata) -> None:
    local = seg.path(".log").read_bytes()
    assert read_all(rsm, m, 0) == local
    size = len(local)
    for start, end in [(0, 0), (0, CHUNK - 1), (CHUNK - 1, CHUNK), (CHUNK + 5, 3 * CHUNK + 7),
                       (size - 1, size - 1), (size // 2, None), (size - 10, size + 100)]:
        assert read_all(rsm, m, start, end) == local[start:None if end is None else end + 1], (start, end)
    data = seg.data()
    expected = {IndexType.OFFSET: data.offset_index.read_bytes(), IndexType.TIMESTAMP: data.time_index.read_bytes(),
                IndexType.PRODUCER_SNAPSHOT: data.producer_snapshot_index.read_bytes(),
                IndexType.LEADER_EPOCH: data.leader_epoch_index}
    if data.transaction_index is not None:
        expected[IndexType.TRANSACTION] = data.transaction_index.read_bytes()
    for index_type, content in expected.items():
        with rsm.fetch_index(m, index_type) as stream:
            assert stream.read() == content, index_type


@pytest.mark.parametrize("compression", ["false", "true"])
def test_segments_copied_fetched_and_deleted_in_aivens_layout(
        strom_segments: StromSegments, s3: S3Client, s3_bucket: str, s3_rsm_config: S3Config,
        compression: str) -> None:
    rsm = load(s3_rsm_config(s3_bucket, compression_enabled=compression))
    assert isinstance(rsm, ChunkedRemoteStorageManager)
    copied = []
    for seg in [*strom_segments.small, *strom_segments.txn]:
        m = seg.metadata()
        assert rsm.copy_log_segment_data(m, seg.data()) is None
        copied.append((seg, m))
    for seg, m in copied:
        check_round_trip(rsm, seg, m)

    seg, m = copied[0]
    tip = m.topic_id_partition
    main = (f"tiered/{tip.topic}-{kafka_uuid_str(tip.topic_id)}/{tip.partition}/"
            f"{m.start_offset:020d}-{kafka_uuid_str(m.segment_id.id)}")
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=s3_bucket, Prefix=main)["Contents"])
    assert keys == [f"{main}.indexes", f"{main}.log", f"{main}.rsm-manifest"]
    assert re.fullmatch(r"tiered/small-[A-Za-z0-9_-]{22}/0/\d{20}-[A-Za-z0-9_-]{22}\.log", keys[1])
    manifest = json.loads(s3.get_object(Bucket=s3_bucket, Key=f"{main}.rsm-manifest")["Body"].read())
    assert manifest["version"] == "1" and manifest["compression"] is (compression == "true")
    index = manifest["chunkIndex"]
    assert index["type"] == ("variable" if compression == "true" else "fixed")
    assert (index["originalChunkSize"], index["originalFileSize"]) == (CHUNK, seg.path(".log").stat().st_size)
    assert set(manifest["segmentIndexes"]) == {"offset", "timestamp", "producerSnapshot", "leaderEpoch",
                                               "transaction"}
    if compression == "true":
        stored = s3.head_object(Bucket=s3_bucket, Key=f"{main}.log")["ContentLength"]
        assert stored < seg.path(".log").stat().st_size  # batch framing compresses even with random values

    # A transaction index is absent from a segment that has none; the txn topic's first has one.
    aborted = [(s, mm) for s, mm in copied if s.topic_id_partition.topic == "txn"]
    assert any(s.data().transaction_index is not None and s.data().transaction_index.stat().st_size  # type: ignore[union-attr]
               for s, _ in aborted), "the txn topic's segments record no aborted transaction"

    rsm.delete_log_segment_data(m)
    assert "Contents" not in s3.list_objects_v2(Bucket=s3_bucket, Prefix=main)
    with pytest.raises(RemoteResourceNotFoundError):
        read_all(rsm, m, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        rsm.fetch_index(m, IndexType.OFFSET)
    rsm.delete_log_segment_data(m)  # deleting what is gone is not an error
    check_round_trip(rsm, *copied[1])  # the others stay
    rsm.close()


def test_large_segment_goes_up_as_multipart_upload(strom_segments: StromSegments, s3: S3Client,
                                                   s3_bucket: str, s3_rsm_config: S3Config) -> None:
    rsm = load(s3_rsm_config(s3_bucket, chunk_size=str(MIB),
                         storage_s3_multipart_upload_part_size=str(5 * MIB)))
    assert isinstance(rsm, ChunkedRemoteStorageManager)
    seg = strom_segments.big
    m = seg.metadata()
    rsm.copy_log_segment_data(m, seg.data())
    head = s3.head_object(Bucket=s3_bucket, Key=rsm.object_key(m, "log"))
    assert str(head["ETag"]).strip('"').endswith("-2")  # S3's ETag of a two-part upload
    local = seg.path(".log").read_bytes()
    assert read_all(rsm, m, 0) == local
    assert read_all(rsm, m, 5 * MIB - 3, 5 * MIB + 3) == local[5 * MIB - 3:5 * MIB + 4]


def test_s3_failures_are_remote_storage_errors(strom_segments: StromSegments, s3_rsm_config: S3Config) -> None:
    rsm = load(s3_rsm_config("no-such-bucket"))
    seg = strom_segments.small[0]
    with pytest.raises(RemoteStorageError) as e:
        rsm.copy_log_segment_data(seg.metadata(), seg.data())
    assert "no-such-bucket" in str(e.value) and isinstance(e.value.__cause__, ClientError)


def test_third_party_manager_selected_by_name_through_its_entry_point(
        strom_segments: StromSegments, tmp_path: Path) -> None:
    name = "strom_test_plugin.DirectoryRemoteStorageManager"
    config = {"remote.log.storage.manager.class.name": name, "rsm.config.dir": str(tmp_path)}
    with pytest.raises(ConfigError):  # not offered when entry points are not loaded
        load_remote_storage_manager(get_plugin_manager(autoload=False, env={}), config)
    rsm = load_remote_storage_manager(get_plugin_manager(autoload=True, env={}), config)
    assert rsm is not None and type(rsm).__module__ == "strom_test_plugin.remote_storage"
    seg = strom_segments.small[1]
    m = seg.metadata()
    assert rsm.copy_log_segment_data(m, seg.data()) is not None
    assert read_all(rsm, m, 3, 99) == seg.path(".log").read_bytes()[3:100]
    with rsm.fetch_index(m, IndexType.TIMESTAMP) as stream:
        assert stream.read() == seg.path(".timeindex").read_bytes()
    rsm.delete_log_segment_data(m)
    assert not any(tmp_path.rglob("*.log"))


def test_a_sequential_read_makes_one_get_per_object_of_its_segment(
        strom_segments: StromSegments, s3_bucket: str, s3_rsm_config: S3Config) -> None:
    """With the chunk cache and a prefetch window past the segment's end, a segment read from
    start to end by several threads at once, with all its indexes, costs one GET of each of its
    objects: the manifest and the .indexes object are fetched once (by one thread, the others wait
    for it), every chunk comes in the one GET of the .log object. GETs are counted by botocore's
    own event hook on the manager's client, whatever the manager counts itself."""
    rsm = load(s3_rsm_config(s3_bucket, fetch_chunk_cache_class="memory", fetch_chunk_cache_size=str(64 * MIB),
                             fetch_chunk_cache_prefetch_max_size=str(4 * MIB)))
    assert isinstance(rsm, ChunkedRemoteStorageManager)
    seg = next(s for s in strom_segments.txn if s.data().transaction_index is not None)
    m = seg.metadata()
    rsm.copy_log_segment_data(m, seg.data())
    gets: list[str] = []
    storage = rsm.storage
    assert isinstance(storage, S3Storage)
    storage.client.meta.events.register("before-call.s3.GetObject",
                                        lambda params, **_: gets.append(params["url_path"].rsplit(".", 1)[1]))
    local = seg.path(".log").read_bytes()
    start = threading.Barrier(4)

    def reader() -> tuple[bytes, dict[IndexType, bytes]]:
        start.wait(10)
        indexes = {}
        for index_type in IndexType:
            with rsm.fetch_index(m, index_type) as stream:
                indexes[index_type] = stream.read()
        data = b"".join(read_all(rsm, m, pos, pos + CHUNK - 1) for pos in range(0, len(local), CHUNK))
        return data, indexes

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: reader(), range(4)))
    data = seg.data()
    assert data.transaction_index is not None
    for got, indexes in results:
        assert got == local
        assert indexes[IndexType.OFFSET] == data.offset_index.read_bytes()
        assert indexes[IndexType.TRANSACTION] == data.transaction_index.read_bytes()
    assert sorted(gets) == ["indexes", "log", "rsm-manifest"], gets
    rsm.close()
