"""Crashes of a tiering broker (issue 21, item 7): kill -9 while a segment is being uploaded and
while a remote segment is being deleted, then restart. Real parts: the broker process,
confluent-kafka, moto's S3 server behind a small TCP proxy of this module that holds the one S3
request the test wants the crash to interrupt (so the crash lands there, not by timing)."""

from __future__ import annotations

import contextlib
import itertools
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from tier_kit import consume_all, list_offsets, local_bases, produce, topic_id_partition

from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.hookspecs.storage import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from strom.plugins.manager import get_plugin_manager, load_remote_log_metadata_manager

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.tiered.conftest import TierConfig

pytestmark = pytest.mark.broker

S = RemoteLogSegmentState
TOPIC = "tiered"


# The broker helpers of test_broker_tier.py (test modules do not import each other).
class HoldingProxy:
    """Forwards TCP to the S3 endpoint; a request whose bytes contain ``hold_on`` is never
    forwarded: its connection is held open until ``release()``, which drops it. ``down()`` makes
    S3 unreachable (connections dropped and refused) until ``up()``."""

    def __init__(self, upstream: str) -> None:
        u = urlsplit(upstream)
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.hold_on: bytes | None = None
        self.held = threading.Event()
        self._down = False
        self._released = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True, name="s3-proxy").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._down:
                client.close()
                continue
            upstream = socket.create_connection(self.upstream)
            self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while data := src.recv(65536):
                if requests and self.hold_on is not None and self.hold_on in data:
                    self.held.set()
                    self._released.wait()  # the request never reaches S3
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def down(self) -> None:
        self._down = True
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def up(self) -> None:
        self._down = False

    def release(self) -> None:
        self.hold_on = None
        self._released.set()

    def close(self) -> None:
        self.release()
        self._listener.close()
        for s in self._sockets:
            s.close()


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[HoldingProxy]:
    p = HoldingProxy(s3_endpoint)
    try:
        yield p
    finally:
        p.close()


def objects(s3: S3Client, bucket: str) -> list[str]:
    return [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]


def remote_segments(bootstrap: str, tip: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
    """Every segment the metadata topic records for ``tip``, as a second manager replays it."""
    reader = load_remote_log_metadata_manager(get_plugin_manager(autoload=False, env={}), {
        "node.id": "99", "rlmm.config.remote.log.metadata.common.client.bootstrap.servers": bootstrap,
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1"})
    try:
        reader.on_partition_leadership_changes(set(), {tip})
        return list(reader.list_remote_log_segments(tip))
    finally:
        reader.close()


def assert_consistent(bootstrap: str, tip: TopicIdPartition, s3: S3Client, bucket: str, local_start: int) -> int:
    """Every remote segment FINISHED, each offset range once, contiguous up to the local start;
    the bucket holds exactly their three objects each (no orphan). Returns the first remote offset."""
    segments = remote_segments(bootstrap, tip)
    assert segments and all(m.state is S.COPY_SEGMENT_FINISHED for m in segments), \
        [(m.start_offset, m.state.name) for m in segments]
    assert all(a.end_offset + 1 == b.start_offset for a, b in itertools.pairwise(segments))
    assert segments[-1].end_offset == local_start - 1
    stems: dict[str, set[str]] = {}
    for key in objects(s3, bucket):
        stem, suffix = key.rsplit(".", 1)
        stems.setdefault(stem, set()).add(suffix)
    assert all(s == {"log", "indexes", "rsm-manifest"} for s in stems.values()), stems
    assert sorted(int(stem.rsplit("/", 1)[1][:20]) for stem in stems) == [m.start_offset for m in segments]
    return segments[0].start_offset


def test_kill_9_during_an_upload_then_restart(tmp_path: Path, s3_bucket: str, tier_config: TierConfig,
                                             proxy: HoldingProxy, s3: S3Client) -> None:
    config = tier_config(s3_bucket, endpoint=proxy.url)
    with BrokerProcess(tmp_path / "broker", config=config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
                "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})]).values():
            f.result(30)
        sent = produce(broker.bootstrap, TOPIC, 1000)
        wait_for(lambda: sum(k.endswith(".rsm-manifest") for k in objects(s3, s3_bucket)) >= 2, 60,
                 "two segments copied")
        # The next copy uploads its .log and .indexes, then hangs on its manifest: killed there.
        proxy.hold_on = b".rsm-manifest"
        sent += produce(broker.bootstrap, TOPIC, 1000)
        wait_for(proxy.held.is_set, 60, "an upload in flight")
        partial = [k for k in objects(s3, s3_bucket) if not k.endswith(".rsm-manifest")]
        partition_dir = broker.data_dir / "logs" / f"{TOPIC}-0"
        tip = topic_id_partition(partition_dir, TOPIC, 0)
        assert any(m.state is S.COPY_SEGMENT_STARTED for m in remote_segments(broker.bootstrap, tip))
        broker.kill()
        proxy.release()
        assert len(partial) > 2 * sum(k.endswith(".rsm-manifest") for k in objects(s3, s3_bucket))
        broker.start()

        def settled() -> bool:
            return len(local_bases(partition_dir)) == 1 and \
                all(m.state is S.COPY_SEGMENT_FINISHED for m in remote_segments(broker.bootstrap, tip))

        wait_for(settled, 60, "every closed segment copied after the restart, the abandoned copy cleaned up",
                 detail=lambda: f"local {local_bases(partition_dir)}, remote "
                                f"{[(m.start_offset, m.state.name) for m in remote_segments(broker.bootstrap, tip)]}")
        assert assert_consistent(broker.bootstrap, tip, s3, s3_bucket, local_bases(partition_dir)[0]) == 0
        got = consume_all(broker.bootstrap, TOPIC, len(sent))
        assert [o for o, _, _ in got] == list(range(len(sent)))
        assert [(k, v) for _, k, v in got] == sent


def test_kill_9_during_a_remote_deletion_then_restart(tmp_path: Path, s3_bucket: str, tier_config: TierConfig,
                                                     proxy: HoldingProxy, s3: S3Client) -> None:
    config = tier_config(s3_bucket, endpoint=proxy.url)
    proxy.hold_on = b"?delete"  # S3 DeleteObjects: the first remote deletion hangs, killed there
    with BrokerProcess(tmp_path / "broker", config=config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
                "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1",
                "retention.bytes": str(3 * 16384)})]).values():
            f.result(30)
        produce(broker.bootstrap, TOPIC, 3000)
        wait_for(proxy.held.is_set, 60, "a remote deletion in flight")
        partition_dir = broker.data_dir / "logs" / f"{TOPIC}-0"
        tip = topic_id_partition(partition_dir, TOPIC, 0)
        assert any(m.state is S.DELETE_SEGMENT_STARTED for m in remote_segments(broker.bootstrap, tip))
        broker.kill()
        proxy.release()
        broker.start()

        def settled() -> bool:
            segments = remote_segments(broker.bootstrap, tip)
            return len(local_bases(partition_dir)) == 1 and bool(segments) and \
                all(m.state is S.COPY_SEGMENT_FINISHED for m in segments) and \
                list_offsets(broker.bootstrap, TOPIC, -2) == (0, segments[0].start_offset)

        wait_for(settled, 60, "the interrupted deletion finished after the restart",
                 detail=lambda: f"local {local_bases(partition_dir)}, remote "
                                f"{[(m.start_offset, m.state.name) for m in remote_segments(broker.bootstrap, tip)]}")
        start = assert_consistent(broker.bootstrap, tip, s3, s3_bucket, local_bases(partition_dir)[0])
        assert start > 0
        got = consume_all(broker.bootstrap, TOPIC, 3000 - start, **{"auto.offset.reset": "earliest"})
        assert [o for o, _, _ in got] == list(range(start, 3000))


@pytest.mark.slow  # ~22 s
def test_s3_unavailable_for_a_while(tmp_path: Path, s3_bucket: str, tier_config: TierConfig,
                                    proxy: HoldingProxy, s3: S3Client) -> None:
    config = tier_config(s3_bucket, endpoint=proxy.url)
    with BrokerProcess(tmp_path / "broker", config=config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={
                "remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "1"})]).values():
            f.result(30)
        partition_dir = broker.data_dir / "logs" / f"{TOPIC}-0"
        proxy.down()
        sent = produce(broker.bootstrap, TOPIC, 2000)  # producers do not notice
        closed = local_bases(partition_dir)[:-1]
        assert len(closed) >= 5
        # Copies fail and are retried with a growing backoff (remote.log.manager.task.retry.backoff.ms
        # 500 doubling, jitter 0.2).
        retries = re.compile(r"failed round (\d+), retried in (\d+) ms")
        wait_for(lambda: len(retries.findall(broker.log_text())) >= 3, 60,
                 "copy rounds failing against the missing S3")
        backoffs = [(int(n), int(ms)) for n, ms in retries.findall(broker.log_text())]
        assert [n for n, _ in backoffs[:3]] == [1, 2, 3]
        assert backoffs[0][1] < backoffs[1][1] < backoffs[2][1], backoffs
        assert local_bases(partition_dir)[:len(closed)] == closed  # nothing deleted locally that is not in S3
        assert list_offsets(broker.bootstrap, TOPIC, -5) == (0, -1)
        assert not objects(s3, s3_bucket)
        proxy.up()
        wait_for(lambda: len(local_bases(partition_dir)) == 1, 60, "every closed segment copied once S3 is back",
                 detail=lambda: str(local_bases(partition_dir)))
        tip = topic_id_partition(partition_dir, TOPIC, 0)

        def clean() -> bool:  # the copies abandoned while S3 was away are cleaned up
            return all(m.state is S.COPY_SEGMENT_FINISHED for m in remote_segments(broker.bootstrap, tip))

        wait_for(clean, 60, "abandoned copies cleaned up")
        assert assert_consistent(broker.bootstrap, tip, s3, s3_bucket, local_bases(partition_dir)[0]) == 0
        got = consume_all(broker.bootstrap, TOPIC, len(sent))
        assert [(k, v) for _, k, v in got] == sent
