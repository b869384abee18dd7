"""Issue 27 item 2: broker registration, controlled shutdown and leader election, as Kafka 4.3's
controller writes them (the records were read from a Kafka 4.3.1 metadata log with
kafka-dump-log --cluster-metadata-decoder: RegisterController, a fenced RegisterBroker v4, an
unfencing BrokerRegistrationChange with the elections; at shutdown BrokerRegistrationChange(in
controlled shutdown) with PartitionChange(leader -1, ISR [], ELR [1], LastKnownElr [1]), then
BrokerRegistrationChange(fenced)). In-process MetadataSystem on a formatted directory; the
records are read back from the metadata log itself."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from strom.core.config import BrokerConfig
from strom.core.controller.metadata_system import MetadataSystem
from strom.core.controller.quorum_controller import CreatableTopic
from strom.core.log.checkpoint import read_meta_properties
from strom.core.metadata.bootstrap import format_storage, random_uuid, uuid_from_str
from strom.core.metadata.image import PartitionRegistration
from strom.core.metadata.records import (
    BrokerRegistrationChangeRecord,
    Message,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    decode_record,
)
from strom.core.raft.client import METADATA_PARTITION_DIR
from strom.core.raft.snapshot import read_snapshot_file
from strom.core.records.builder import decode_records

ELR = "eligible.leader.replicas.version"
LISTENERS = [("PLAINTEXT", "127.0.0.1", 9092, 0)]  # as the open_system fixture registers


def make_config(tmp_path: Path) -> BrokerConfig:
    return BrokerConfig.from_mapping({"node.id": 1, "log.dirs": str(tmp_path / "logs"),
                                      "metadata.log.dir": str(tmp_path / "meta")})


def log_records(config: BrokerConfig) -> list[tuple[int, Message]]:
    """(offset, record) of every data record in the metadata log, in order."""
    out = []
    for path in sorted((Path(config.metadata_dir) / METADATA_PARTITION_DIR).glob("*.log")):
        for rec in decode_records(path.read_bytes()):
            if rec.value is not None and not rec.header.is_control:
                out.append((rec.offset, decode_record(rec.value)))
    return out


def since(config: BrokerConfig, offset: int) -> list[Message]:
    return [r for o, r in log_records(config) if o >= offset]


def state(reg: PartitionRegistration | None) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    assert reg is not None
    return reg.leader, reg.isr, reg.elr, reg.last_known_elr


def log_dir_id(config: BrokerConfig) -> uuid.UUID:
    props = read_meta_properties(Path(config.log_dir_list[0]))
    assert props is not None
    return uuid_from_str(props["directory.id"])


async def test_registration_writes_controller_fenced_broker_then_unfence(config: BrokerConfig) -> None:
    system = MetadataSystem.open(config)
    await system.start()
    start = system.raft.end_offset
    try:
        inc = uuid.uuid4()
        epoch = await system.controller.register_broker(1, LISTENERS, None, inc)
        records = since(config, start)
        assert [type(r) for r in records] == [RegisterControllerRecord, RegisterBrokerRecord,
                                              BrokerRegistrationChangeRecord]
        ctrl, broker, unfence = records
        assert isinstance(ctrl, RegisterControllerRecord) and ctrl.controller_id == 1
        # No controller.quorum.voters port here: the controller is reached on the broker's listener.
        assert [(e.name, e.host, e.port) for e in ctrl.end_points] == [("CONTROLLER", "127.0.0.1", 9092)]
        assert isinstance(broker, RegisterBrokerRecord)
        assert (broker.broker_epoch, broker.fenced, broker.log_dirs) == (epoch, True, [log_dir_id(config)])
        assert ("metadata.version", 7, 30) in [(f.name, f.min_supported_version, f.max_supported_version)
                                               for f in broker.features]
        assert unfence == BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=-1)
        reg = system.image.broker(1)
        assert reg is not None and not reg.fenced and reg.log_dirs == (log_dir_id(config),)
        # Kafka's defaultDir: the only log dir of the broker is each new replica's directory.
        await system.controller.create_topics([CreatableTopic("t", 2, 1)])
        part = system.image.partition("t", 1)
        assert part is not None and part.directories == (log_dir_id(config),)
    finally:
        await system.close()


async def test_controlled_shutdown_then_election_from_the_elr(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    await system.controller.create_topics([CreatableTopic("t", 2, 1)])
    topic = system.image.topic("t")
    assert topic is not None
    epoch = system.image.broker(1).epoch
    end = system.raft.end_offset
    await system.close()  # a clean stop: controlled shutdown
    assert since(config, end) == [
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, in_controlled_shutdown=1),
        *(PartitionChangeRecord(partition_id=p, topic_id=topic.topic_id, isr=[], leader=-1,
                                eligible_leader_replicas=[1], last_known_elr=[1]) for p in (0, 1)),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=1),
    ]
    assert state(system.image.partition("t", 0)) == (-1, (), (1,), (1,))

    again = MetadataSystem.open(config)
    await again.start()
    try:
        # Replayed: fenced and leaderless; nothing can lead until the broker registers again.
        assert again.image.broker(1).fenced  # type: ignore[union-attr]
        assert state(again.image.partition("t", 1)) == (-1, (), (1,), (1,))
        end = again.raft.end_offset
        await again.controller.register_broker(1, LISTENERS, None, uuid.uuid4())
        changes = [r for r in since(config, end) if isinstance(r, PartitionChangeRecord)]
        assert changes == [PartitionChangeRecord(partition_id=p, topic_id=topic.topic_id, isr=[1], leader=1,
                                                 eligible_leader_replicas=[], last_known_elr=[]) for p in (0, 1)]
        for p in (0, 1):
            reg = again.image.partition("t", p)
            assert state(reg) == (1, (1,), (), ())
            assert reg is not None and reg.leader_epoch == 2  # -1 at shutdown, 1 again now
    finally:
        await again.close()


async def test_without_elr_the_isr_keeps_its_last_member(tmp_path: Path, open_system: Any) -> None:
    config = make_config(tmp_path)
    format_storage(config, random_uuid(), features={ELR: 0})
    system = await open_system(config)
    await system.controller.create_topics([CreatableTopic("t", 1, 1)])
    end = system.raft.end_offset
    await system.close()
    changes = [r for r in since(config, end) if isinstance(r, PartitionChangeRecord)]
    assert [(c.leader, c.isr, c.eligible_leader_replicas) for c in changes] == [(-1, None, None)]
    again = await open_system(config)  # registers: elected from the ISR
    try:
        assert state(again.image.partition("t", 0)) == (1, (1,), (), ())
    finally:
        await again.close()


async def test_start_up_elects_where_a_registered_replica_can_lead(config: BrokerConfig, open_system: Any) -> None:
    """A log whose broker is registered and unfenced but whose partition has no leader (the
    state a crash between the two shutdown batches leaves) gets its leader at start-up."""
    system = await open_system(config)
    await system.controller.create_topics([CreatableTopic("t", 1, 1)])
    topic = system.image.topic("t")
    assert topic is not None
    await system.controller._commit([PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, isr=[],
                                                           leader=-1, eligible_leader_replicas=[1],
                                                           last_known_elr=[1])])
    await system.close(controlled_shutdown=False)
    again = MetadataSystem.open(config)
    await again.start()
    try:
        assert state(again.image.partition("t", 0)) == (1, (1,), (), ())
    finally:
        await again.close()


async def test_records_are_written_in_the_versions_of_the_metadata_version(tmp_path: Path, open_system: Any) -> None:
    """At 4.1-IV1 (27) Kafka writes RegisterBrokerRecord v3 (v4 only from 4.3-IV0), in the log and
    in snapshots; an upgrade to 4.3-IV0 moves the next registration to v4."""
    config = make_config(tmp_path)
    format_storage(config, random_uuid(), release_version="4.1-IV1")
    system = await open_system(config)
    try:
        await system.controller.create_topics([CreatableTopic("t", 1, 1)])
        sid = await system.snapshot()
        assert sid is not None
        snapshot = read_snapshot_file(Path(config.metadata_dir) / METADATA_PARTITION_DIR / sid.file_name)
        logged = [raw for path in sorted((Path(config.metadata_dir) / METADATA_PARTITION_DIR).glob("*.log"))
                  for raw in (r.value for r in decode_records(path.read_bytes()) if not r.header.is_control)
                  if raw is not None]
        for values in (logged, snapshot):
            versions = {(raw[1], raw[2]) for raw in values}  # (api key, version) of each frame
            assert (0, 3) in versions and (0, 4) not in versions  # RegisterBrokerRecord
            assert (3, 2) in versions  # PartitionRecord v2 (ELR fields exist from 4.0-IV1)
        assert await system.controller.update_features([("metadata.version", 30, 1)]) is None
        end = system.raft.end_offset
        await system.controller.register_broker(1, LISTENERS, None, uuid.uuid4())
        again = [raw for path in sorted((Path(config.metadata_dir) / METADATA_PARTITION_DIR).glob("*.log"))
                 for rec in decode_records(path.read_bytes())
                 if rec.offset >= end and not rec.header.is_control and (raw := rec.value) is not None]
        assert (0, 4) in {(raw[1], raw[2]) for raw in again}
    finally:
        await system.close()


async def test_elr_needs_metadata_version_4_0_iv1(tmp_path: Path, open_system: Any) -> None:
    """eligible.leader.replicas.version=1 depends on metadata.version 23 (Kafka's
    EligibleLeaderReplicasVersion dependencies): refused below it, accepted with the upgrade."""
    config = make_config(tmp_path)
    format_storage(config, random_uuid(), release_version="4.0-IV0")
    system = await open_system(config)
    try:
        assert system.image.metadata_version == 22 and not system.image.elr_enabled
        error = await system.controller.update_features([(ELR, 1, 1)])
        assert error is not None and "requires metadata.version 23 (4.0-IV1) or above" in (error.message or "")
        assert await system.controller.update_features([(ELR, 1, 1), ("metadata.version", 23, 1)]) is None
        assert system.image.elr_enabled and system.image.metadata_version == 23
    finally:
        await system.close()


async def test_an_older_strom_log_gets_group_version_1(tmp_path: Path, open_system: Any) -> None:
    """A log an older strom wrote (metadata.version 4.0+, no group.version, no controller
    registration) served KIP-848 groups: it is given group.version 1 at start-up, once; a log with
    a controller registration keeps the level it has (0 here: the consumer protocol stays off)."""
    config = make_config(tmp_path)
    format_storage(config, random_uuid(), features={"group.version": 0})
    system = await open_system(config, register=False)  # as the older strom left it
    assert "group.version" not in system.image.features and not system.image.controllers
    await system.close(controlled_shutdown=False)
    again = await open_system(config)
    try:
        assert again.image.features.get("group.version") == 1
        await again.controller.update_features([("group.version", 0, 2)])
        assert "group.version" not in again.image.features
    finally:
        await again.close()
    third = await open_system(config)  # registered controller: no migration any more
    try:
        assert "group.version" not in third.image.features
    finally:
        await third.close()


async def test_unassigned_directories_are_assigned_on_registration(config: BrokerConfig, open_system: Any) -> None:
    """Replicas an older strom left with the zero (UNASSIGNED) directory get the broker's only
    log dir when it registers, as Kafka's broker asks with AssignReplicasToDirs."""
    system = await open_system(config)
    await system.controller.create_topics([CreatableTopic("t", 1, 1)])
    topic = system.image.topic("t")
    assert topic is not None
    await system.controller._commit([PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id,
                                                           directories=[uuid.UUID(int=0)])])
    assert system.image.partition("t", 0).directories == (uuid.UUID(int=0),)
    await system.controller.register_broker(1, LISTENERS, None, uuid.uuid4())
    try:
        assert system.image.partition("t", 0).directories == (log_dir_id(config),)
    finally:
        await system.close()
