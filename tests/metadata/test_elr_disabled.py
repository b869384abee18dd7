"""eligible.leader.replicas.version turned off, and min.insync.replicas changes, as Kafka 4.3.1's
controller handles them (read from its bytecode: ConfigurationControlManager.updateFeatures and
createClearElrRecordsAsNeeded, PartitionChangeBuilder.isValidNewLeader and maybeUpdateRecordElr):

* the downgrade to 0 writes only its FeatureLevelRecord: no ClearElrRecord, no partition change;
* with the feature off the builder stops maintaining the ELR but still elects from the ELR a
  partition holds when its ISR is empty, and every change it writes empties that ELR (the
  LastKnownElr stays: Kafka builds with useLastKnownLeaderInBalancedRecovery, which leaves it);
* with the feature on, a ConfigRecord of ``min.insync.replicas`` is followed by a ClearElrRecord:
  the topic's for a topic config, every topic's (no name) for a broker or cluster one.

In-process MetadataSystem on a formatted directory (as test_broker_lifecycle.py); the records
are read back from the metadata log itself.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from strom.core.config import BrokerConfig
from strom.core.controller.partition_change import elect_leader
from strom.core.controller.quorum_controller import (
    OP_SET,
    SAFE_DOWNGRADE,
    AlterConfigsResource,
    CreatableTopic,
)
from strom.core.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, PartitionRegistration
from strom.core.metadata.records import (
    ClearElrRecord,
    ConfigRecord,
    FeatureLevelRecord,
    Message,
    PartitionChangeRecord,
    decode_record,
)
from strom.core.raft.client import METADATA_PARTITION_DIR
from strom.core.records.builder import decode_records

TID = uuid.UUID(int=7)
ELR = "eligible.leader.replicas.version"
LISTENERS = [("PLAINTEXT", "127.0.0.1", 9092, 0)]  # as the open_system fixture registers


def since(config: BrokerConfig, offset: int) -> list[Message]:
    """The data records of the metadata log from ``offset`` on, decoded."""
    out = []
    for path in sorted((Path(config.metadata_dir) / METADATA_PARTITION_DIR).glob("*.log")):
        for rec in decode_records(path.read_bytes()):
            if rec.value is not None and not rec.header.is_control and rec.offset >= offset:
                out.append(decode_record(rec.value))
    return out


def state(reg: PartitionRegistration | None) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(leader, ISR, ELR, LastKnownElr)."""
    assert reg is not None
    return reg.leader, reg.isr, reg.elr, reg.last_known_elr


async def test_downgrade_writes_only_the_feature_record_and_the_left_elr_still_elects(
        config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    await system.controller.create_topics([CreatableTopic("t", 2, 1)])
    topic = system.image.topic("t")
    assert topic is not None and system.image.elr_enabled
    await system.close()  # controlled shutdown: leader -1, ISR [], ELR [1], LastKnownElr [1]

    again = await open_system(config, register=False)
    try:
        assert state(again.image.partition("t", 0)) == (-1, (), (1,), (1,))
        end = again.raft.end_offset
        assert await again.controller.update_features([(ELR, 0, SAFE_DOWNGRADE)]) is None
        assert since(config, end) == [FeatureLevelRecord(name=ELR, feature_level=0)]
        assert not again.image.elr_enabled
        end = again.raft.end_offset
        await again.controller.register_broker(1, LISTENERS, None, uuid.uuid4())
        changes = [r for r in since(config, end) if isinstance(r, PartitionChangeRecord)]
        assert changes == [PartitionChangeRecord(partition_id=p, topic_id=topic.topic_id, isr=[1], leader=1,
                                                 eligible_leader_replicas=[]) for p in (0, 1)]
        for p in (0, 1):
            assert state(again.image.partition("t", p)) == (1, (1,), (), (1,))
    finally:
        await again.close()


def test_with_the_feature_off_a_change_empties_the_elr_even_without_a_leader() -> None:
    # ISR empty, the ELR's replica 2 cannot lead, replica 1 is neither in the ISR nor the ELR.
    reg = PartitionRegistration((1, 2), (), -1, 3, 5, elr=(2,), last_known_elr=(2,))
    change = elect_leader(reg, TID, 0, acceptable=lambda b: b == 1, elr_enabled=False, unclean=False)
    assert change == PartitionChangeRecord(partition_id=0, topic_id=TID, eligible_leader_replicas=[])
    # With the feature on Kafka keeps the ELR: nothing to write.
    assert elect_leader(reg, TID, 0, acceptable=lambda b: b == 1, elr_enabled=True, unclean=False) is None
    # No ELR left: nothing to write either.
    bare = PartitionRegistration((1, 2), (), -1, 3, 5)
    assert elect_leader(bare, TID, 0, acceptable=lambda b: b == 1, elr_enabled=False, unclean=False) is None


async def test_min_insync_replicas_changes_clear_the_elr(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    try:
        await system.controller.create_topics([CreatableTopic("t", 1, 1), CreatableTopic("u", 1, 1)])
        controller = system.controller
        end = system.raft.end_offset
        await controller.incremental_alter_configs(
            [AlterConfigsResource(TOPIC_RESOURCE, "t", [("min.insync.replicas", OP_SET, "1")])])
        assert since(config, end) == [
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="t", name="min.insync.replicas", value="1"),
            ClearElrRecord(topic_name="t")]
        end = system.raft.end_offset
        await controller.incremental_alter_configs(
            [AlterConfigsResource(BROKER_RESOURCE, "", [("min.insync.replicas", OP_SET, "1")])])
        assert since(config, end)[-1] == ClearElrRecord(topic_name="")
        # Another key, or a validate-only request: no ClearElrRecord.
        end = system.raft.end_offset
        await controller.incremental_alter_configs(
            [AlterConfigsResource(TOPIC_RESOURCE, "u", [("retention.ms", OP_SET, "1000")])])
        await controller.incremental_alter_configs(
            [AlterConfigsResource(TOPIC_RESOURCE, "u", [("min.insync.replicas", OP_SET, "1")])], validate_only=True)
        assert not [r for r in since(config, end) if isinstance(r, ClearElrRecord)]
        # With the feature off Kafka writes none.
        assert await controller.update_features([(ELR, 0, SAFE_DOWNGRADE)]) is None
        end = system.raft.end_offset
        await controller.incremental_alter_configs(
            [AlterConfigsResource(TOPIC_RESOURCE, "u", [("min.insync.replicas", OP_SET, "1")])])
        assert [type(r) for r in since(config, end)] == [ConfigRecord]
    finally:
        await system.close()
