"""Restart, snapshots, torn tails, quorum-state and storage formatting — all from real files."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from strom.core.config import BrokerConfig
from strom.core.controller.metadata_system import MetadataSystem
from strom.core.controller.quorum_controller import OP_SET, AlterConfigsResource, CreatableTopic
from strom.core.metadata.bootstrap import (
    FormatError,
    format_storage,
    random_uuid,
    read_bootstrap,
    read_meta_properties,
    uuid_from_str,
)
from strom.core.metadata.features import FeatureError, parse_feature_levels
from strom.core.metadata.image import TOPIC_RESOURCE
from strom.core.metadata.records import FeatureLevelRecord
from strom.core.raft.client import METADATA_PARTITION_DIR
from strom.core.raft.log import MetadataLogCorruptedError
from strom.core.raft.snapshot import list_snapshots
from strom.core.records.batch import iter_headers
from strom.core.records.builder import decode_batch


def part_dir(config: BrokerConfig) -> Path:
    return config.metadata_dir / METADATA_PARTITION_DIR


async def populate(system: MetadataSystem) -> None:
    c = system.controller
    await c.create_topics([CreatableTopic("orders", 3, 1, configs={"retention.ms": "60000"}),
                           CreatableTopic("users", 1, 1, configs={"cleanup.policy": "compact"})])
    await c.incremental_alter_configs([AlterConfigsResource(TOPIC_RESOURCE, "orders",
                                                            [("segment.bytes", OP_SET, "1048576")])])
    await c.allocate_producer_ids(1)
    await c.delete_topics(["users"])


async def test_restart_rebuilds_identical_image(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    await populate(system)
    before = system.image
    epoch1 = system.raft.epoch
    await system.close(controlled_shutdown=False)

    again = MetadataSystem.open(config)
    await again.start()
    try:
        assert again.image.same_content(before)
        orders_now, orders_before = again.image.topic("orders"), before.topic("orders")
        assert orders_now is not None and orders_before is not None
        assert orders_now.topic_id == orders_before.topic_id
        assert again.raft.epoch == epoch1 + 1  # a new election on every start
        state = json.loads((part_dir(config) / "quorum-state").read_text())
        # appliedOffset: the high watermark made durable by the new epoch's first batch.
        assert state == {"clusterId": "", "leaderId": 1, "leaderEpoch": epoch1 + 1, "votedId": -1,
                         "appliedOffset": again.raft.high_watermark, "currentVoters": [{"voterId": 1}],
                         "data_version": 0}
    finally:
        await again.close()


async def test_log_is_kafka_format_with_leader_change_and_epochs(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    await populate(system)
    await system.close(controlled_shutdown=False)
    data = (part_dir(config) / f"{0:020d}.log").read_bytes()
    headers = [h for _, h in iter_headers(data)]
    first = decode_batch(data, 0)
    assert first.header.is_control and first.header.partition_leader_epoch == 1
    assert first.records[0].key == b"\x00\x00\x00\x02"  # ControlRecordType LEADER_CHANGE
    assert all(not h.is_control and h.partition_leader_epoch == 1 for h in headers[1:])
    offsets = [(h.base_offset, h.last_offset) for h in headers]
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(offsets))


async def test_snapshot_then_replay_of_later_log(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    await populate(system)
    sid = await system.snapshot()
    assert sid is not None and list_snapshots(part_dir(config)) == [sid]
    assert (part_dir(config) / f"{sid.end_offset:020d}-{sid.epoch:010d}.checkpoint").exists()
    await system.controller.create_topics([CreatableTopic("after", 2, 1)])
    before = system.image
    await system.close(controlled_shutdown=False)

    # Prove the snapshot is what restores the state: drop the log before the snapshot point.
    seg = part_dir(config) / f"{0:020d}.log"
    data = seg.read_bytes()
    keep = b"".join(data[pos:pos + h.size] for pos, h in iter_headers(data) if h.base_offset >= sid.end_offset)
    seg.unlink()
    (part_dir(config) / f"{sid.end_offset:020d}.log").write_bytes(keep)

    again = MetadataSystem.open(config)
    await again.start()
    try:
        assert again.raft.latest_snapshot == sid
        assert again.image.same_content(before)
        assert again.image.topic("after") is not None and again.image.topic("users") is None
    finally:
        await again.close()


async def test_automatic_snapshot_every_n_bytes(tmp_path: Path, open_system: Any) -> None:
    cfg = BrokerConfig.from_mapping({"node.id": 1, "log.dirs": str(tmp_path / "l"),
                                     "metadata.log.max.record.bytes.between.snapshots": 500})
    format_storage(cfg, random_uuid())
    system = await open_system(cfg)
    for i in range(6):
        await system.controller.create_topics([CreatableTopic(f"t{i}", 4, 1)])
    await system.close(controlled_shutdown=False)  # waits for the snapshot task
    snaps = list_snapshots(part_dir(cfg))
    assert len(snaps) == 1 and snaps[0].end_offset > 0


async def test_corrupt_snapshot_falls_back_to_log(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    await populate(system)
    sid = await system.snapshot()
    assert sid is not None
    before = system.image
    await system.close(controlled_shutdown=False)
    path = part_dir(config) / sid.file_name
    path.write_bytes(path.read_bytes()[:-10])  # footer torn off
    again = MetadataSystem.open(config)
    await again.start()
    try:
        assert again.raft.latest_snapshot is None
        assert again.image.same_content(before)
    finally:
        await again.close()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
async def test_torn_tail_is_dropped(config: BrokerConfig, open_system: Any, damage: str) -> None:
    system = await open_system(config)
    await populate(system)
    committed = system.image
    # A crash leaves quorum-state as the start wrote it: its appliedOffset is below the batches
    # appended since, so the last of them may be torn. (A clean close records the end instead.)
    state_at_start = (part_dir(config) / "quorum-state").read_bytes()
    await system.controller.create_topics([CreatableTopic("torn", 2, 1)])
    assert system.image.topic("torn") is not None
    await system.close(controlled_shutdown=False)
    (part_dir(config) / "quorum-state").write_bytes(state_at_start)

    seg = part_dir(config) / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    last_pos = [pos for pos, _ in iter_headers(data)][-1]
    if damage == "truncate":
        data = data[:len(data) - 7]           # the last batch is half-written
    elif damage == "garbage":
        data = data[:last_pos] + os.urandom(len(data) - last_pos)
    else:
        data[-3] ^= 0xFF                      # CRC no longer matches
    seg.write_bytes(bytes(data))

    again = MetadataSystem.open(config)
    await again.start()
    try:
        assert again.image.topic("torn") is None
        assert again.image.same_content(committed)
        # The log continues cleanly after the truncation point.
        [r] = await again.controller.create_topics([CreatableTopic("torn", 1, 1)])
        assert r.error_code == 0
    finally:
        await again.close()
    final = MetadataSystem.open(config)
    await final.start()
    try:
        assert final.image.topic("torn") is not None
    finally:
        await final.close()


@pytest.mark.parametrize("damage", ["flip", "garbage"])
async def test_damaged_last_batch_after_clean_close_is_refused(config: BrokerConfig, open_system: Any,
                                                               damage: str) -> None:
    """A clean close records the high watermark: the last batch is committed, never a torn tail."""
    system = await open_system(config)
    await populate(system)
    await system.close(controlled_shutdown=False)
    seg = part_dir(config) / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    last_pos, last = list(iter_headers(data))[-1]
    if damage == "flip":
        data[-3] ^= 0xFF
    else:
        data[last_pos:] = os.urandom(len(data) - last_pos)
    seg.write_bytes(bytes(data))

    with pytest.raises(MetadataLogCorruptedError) as info:
        MetadataSystem.open(config)
    message = str(info.value)
    assert f"{seg} is corrupt at byte {last_pos} (the batch at offset {last.base_offset})" in message
    assert f"truncate-metadata --metadata-log-dir {config.metadata_dir} --offset {last.base_offset}" in message
    assert seg.read_bytes() == bytes(data)  # nothing was cut


def test_format_storage(tmp_path: Path) -> None:
    cfg = BrokerConfig.from_mapping({"node.id": 3, "log.dirs": f"{tmp_path}/a,{tmp_path}/b",
                                     "metadata.log.dir": str(tmp_path / "m")})
    cid = random_uuid()
    written = format_storage(cfg, cid, release_version="4.0")
    assert written == [tmp_path / "a", tmp_path / "b", tmp_path / "m"]
    dir_ids = set()
    for d in written:
        props = read_meta_properties(d)
        assert props is not None
        assert (props["version"], props["cluster.id"], props["node.id"]) == ("1", cid, "3")
        dir_ids.add(props["directory.id"])
        assert len(uuid_from_str(props["directory.id"]).bytes) == 16
    assert len(dir_ids) == 3
    # 4.0 (level 25) is past 4.0-IV2: transaction.version 2 (and group.version 1, from 4.0-IV0) are
    # finalized by default, as in Kafka.
    assert read_bootstrap(tmp_path / "m") == [FeatureLevelRecord("metadata.version", 25),
                                              FeatureLevelRecord("group.version", 1),
                                              FeatureLevelRecord("transaction.version", 2)]
    with pytest.raises(FormatError, match="already formatted"):
        format_storage(cfg, cid)
    assert format_storage(cfg, cid, ignore_formatted=True) == []
    with pytest.raises(FormatError, match="for cluster"):
        format_storage(cfg, random_uuid(), ignore_formatted=True)
    with pytest.raises(FormatError):
        format_storage(cfg, "not-a-uuid!")


ELR, GV, TV = "eligible.leader.replicas.version", "group.version", "transaction.version"


@pytest.mark.parametrize(("release", "features", "expected"), [
    ("3.9", None, [FeatureLevelRecord("metadata.version", 21)]),   # before KIP-890's feature
    ("4.0", None, [FeatureLevelRecord("metadata.version", 25), FeatureLevelRecord(GV, 1),
                   FeatureLevelRecord(TV, 2)]),
    # Kafka 4.3.1's defaults at 4.3-IV0, less streams.version (strom has no streams groups).
    (None, None, [FeatureLevelRecord("metadata.version", 30), FeatureLevelRecord(ELR, 1), FeatureLevelRecord(GV, 1),
                  FeatureLevelRecord("share.version", 1), FeatureLevelRecord(TV, 2)]),
    ("4.3-IV0", {TV: 1, ELR: 0}, [FeatureLevelRecord("metadata.version", 30), FeatureLevelRecord(GV, 1),
                                  FeatureLevelRecord("share.version", 1), FeatureLevelRecord(TV, 1)]),
    ("4.0-IV1", {ELR: 1}, [FeatureLevelRecord("metadata.version", 23), FeatureLevelRecord(ELR, 1),
                           FeatureLevelRecord(GV, 1)]),
    ("4.1.1", {TV: 0, "kraft.version": 0}, [FeatureLevelRecord("metadata.version", 27), FeatureLevelRecord(ELR, 1),
                                           FeatureLevelRecord(GV, 1)]),  # 0: not finalized
])
def test_format_storage_feature_levels(tmp_path: Path, release: str | None, features: dict[str, int] | None,
                                       expected: list[FeatureLevelRecord]) -> None:
    cfg = BrokerConfig.from_mapping({"node.id": 1, "log.dirs": str(tmp_path / "a"),
                                     "metadata.log.dir": str(tmp_path / "m")})
    format_storage(cfg, random_uuid(), release_version=release, features=features)
    assert read_bootstrap(tmp_path / "m") == expected


def test_feature_levels_are_checked() -> None:
    assert parse_feature_levels(["transaction.version=1"]) == {"transaction.version": 1}
    assert parse_feature_levels(["group.version=1", "eligible.leader.replicas.version=0"]) == {GV: 1, ELR: 0}
    for bad, why in [("transaction.version=3", "outside the supported levels 0..2"),
                     ("share.version=2", r"outside the supported levels 0..1"),
                     ("streams.version=1", "outside the supported levels 0..0"),
                     ("kraft.version=1", "outside the supported levels 0..0"),
                     ("no.such.version=1", "unknown feature 'no.such.version'"),
                     ("transaction.version", "is not NAME=LEVEL")]:
        with pytest.raises(FeatureError, match=why):
            parse_feature_levels([bad])


def test_feature_level_needing_a_newer_metadata_version_is_refused(tmp_path: Path) -> None:
    cfg = BrokerConfig.from_mapping({"node.id": 1, "log.dirs": str(tmp_path / "a"),
                                     "metadata.log.dir": str(tmp_path / "m")})
    with pytest.raises(FeatureError, match=r"eligible.leader.replicas.version level 1 requires metadata.version "
                                           r"23 \(4.0-IV1\) or above, but metadata.version is 22"):
        format_storage(cfg, random_uuid(), release_version="4.0-IV0", features={ELR: 1})
    assert not (tmp_path / "m").exists()  # nothing half-formatted


def test_random_uuid_form() -> None:
    for _ in range(2000):
        u = random_uuid()
        assert len(u) == 22 and not u.startswith("-") and "=" not in u


def test_unformatted_dir_is_refused(tmp_path: Path) -> None:
    cfg = BrokerConfig.from_mapping({"node.id": 1, "log.dirs": str(tmp_path / "x")})
    with pytest.raises(FormatError, match="not formatted"):
        MetadataSystem.open(cfg)
    system = MetadataSystem.open(cfg, auto_format=True)
    assert system.cluster_id and read_meta_properties(tmp_path / "x") is not None
    system.raft.close()


def test_file_raft_log_recovers_torn_tail(tmp_path: Path) -> None:
    from strom.core.raft.log import FileRaftLog
    from strom.core.records.builder import SimpleRecord, build_batch

    log = FileRaftLog.open(tmp_path)
    for i in range(3):
        log.append(build_batch([SimpleRecord(None, b"v%d" % i)] * 2, base_offset=log.end_offset,
                               partition_leader_epoch=1), 1)
    log.close()
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(path.read_bytes()[:-5])
    again = FileRaftLog.open(tmp_path)
    assert again.end_offset == 4 and [b for b, _ in again.read(0)] == [0, 2]
    again.truncate_fully_and_start_at(10)
    assert (again.start_offset, again.end_offset) == (10, 10)
    again.close()
    assert FileRaftLog.open(tmp_path).end_offset == 10
