"""KIP-966's unclean-shutdown registration path, as Kafka 4.3.1's controller runs it.

A broker registering a new incarnation sends PreviousBrokerEpoch (the epoch in its
clean-shutdown marker, -1 without one). ClusterControlManager.registerBroker calls
ReplicationControlManager.handleBrokerShutdown(brokerId, isClean = stored epoch == previous
epoch) in the registration batch, before the RegisterBrokerRecord (read from the
kafka-metadata-4.3.1 jar): with ELR on and an unclean shutdown, the broker leaves the ISR and
the ELR of its partitions (``handleBrokerUncleanShutdown``); otherwise it leaves the ISR. Its
unfencing then elects it again - from the ISR, or as the last known leader (unclean, leader
recovery state RECOVERING).

In-process MetadataSystem on a formatted directory, crashed with ``close(controlled_shutdown=
False)`` (no controlled shutdown records, as after kill -9); the records are read back from the
metadata log itself.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from strom.core.config import BrokerConfig
from strom.core.controller.metadata_system import MetadataSystem
from strom.core.controller.quorum_controller import SAFE_DOWNGRADE, CreatableTopic
from strom.core.metadata.bootstrap import format_storage, random_uuid
from strom.core.metadata.image import PartitionRegistration
from strom.core.metadata.records import (
    BrokerRegistrationChangeRecord,
    Message,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    decode_record,
)
from strom.core.raft.client import METADATA_PARTITION_DIR
from strom.core.records.builder import decode_records

LISTENERS = [("PLAINTEXT", "127.0.0.1", 9092, 0)]
ELR = "eligible.leader.replicas.version"
RECOVERING = 1


def _config(tmp_path: Path) -> BrokerConfig:
    cfg = BrokerConfig.from_mapping({"node.id": 1, "log.dirs": str(tmp_path / "logs"),
                                     "metadata.log.dir": str(tmp_path / "meta")})
    format_storage(cfg, random_uuid())
    return cfg


def _since(config: BrokerConfig, offset: int) -> list[Message]:
    out = []
    for path in sorted((Path(config.metadata_dir) / METADATA_PARTITION_DIR).glob("*.log")):
        for rec in decode_records(path.read_bytes()):
            if rec.value is not None and not rec.header.is_control and rec.offset >= offset:
                out.append(decode_record(rec.value))
    return out


def _state(reg: PartitionRegistration | None) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...], int]:
    assert reg is not None
    return reg.leader, reg.isr, reg.elr, reg.last_known_elr, reg.leader_recovery_state


async def _first_life(config: BrokerConfig, *, elr: bool, clean: bool) -> tuple[uuid.UUID, int]:
    """Register, create t (2 partitions, RF 1), then stop (cleanly or as a crash)."""
    system = MetadataSystem.open(config)
    await system.start()
    epoch = await system.controller.register_broker(1, LISTENERS, None, uuid.uuid4())
    if not elr:
        assert await system.controller.update_features([(ELR, 0, SAFE_DOWNGRADE)]) is None
    await system.controller.create_topics([CreatableTopic("t", 2, 1)])
    topic = system.image.topic("t")
    assert topic is not None
    await system.close(controlled_shutdown=clean)
    return topic.topic_id, epoch


async def _restart(config: BrokerConfig, previous: int | None,
                   ) -> tuple[list[Message], list[Message], list[PartitionRegistration | None], int]:
    """Re-register a new incarnation; (records before the RegisterBrokerRecord, partition changes
    after it, the partitions, the new epoch)."""
    again = MetadataSystem.open(config)
    await again.start()
    try:
        end = again.raft.end_offset
        epoch = await again.controller.register_broker(1, LISTENERS, None, uuid.uuid4(), previous_broker_epoch=previous)
        records = _since(config, end)
        at = next(i for i, r in enumerate(records) if isinstance(r, RegisterBrokerRecord))
        register = records[at]
        assert isinstance(register, RegisterBrokerRecord) and register.broker_epoch == epoch
        after: list[Message] = [r for r in records[at + 1:] if isinstance(r, PartitionChangeRecord)]
        assert BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=-1) in records[at + 1:]
        parts = [again.image.partition("t", p) for p in (0, 1)]
        return records[:at], after, parts, epoch
    finally:
        await again.close()


def test_crash_with_elr_removes_the_broker_then_elects_it_as_last_known_leader(tmp_path: Path) -> None:
    config = _config(tmp_path)
    tid, first_epoch = asyncio.run(_first_life(config, elr=True, clean=False))
    before, after, parts, epoch = asyncio.run(_restart(config, -1))
    # handleBrokerUncleanShutdown: out of the ISR, not into the ELR; LastKnownElr keeps the leader.
    assert before[-2:] == [PartitionChangeRecord(partition_id=p, topic_id=tid, isr=[], leader=-1, last_known_elr=[1])
                           for p in (0, 1)]
    # the batch's first record is the epoch (Kafka's nextWriteOffset), the shutdown records included
    assert epoch > first_epoch
    # handleBrokerUnfenced: the last known leader, elected uncleanly
    assert after == [PartitionChangeRecord(partition_id=p, topic_id=tid, isr=[1], leader=1,
                                           leader_recovery_state=RECOVERING, last_known_elr=[]) for p in (0, 1)]
    assert [_state(p) for p in parts] == [(1, (1,), (), (), RECOVERING)] * 2  # online again


def test_crash_without_a_previous_epoch_keeps_the_old_path(tmp_path: Path) -> None:
    config = _config(tmp_path)
    asyncio.run(_first_life(config, elr=True, clean=False))
    before, after, parts, _ = asyncio.run(_restart(config, None))
    assert not [r for r in before if isinstance(r, PartitionChangeRecord)]
    assert after == []  # the old registration was never fenced: leader 1 stays
    assert [_state(p) for p in parts] == [(1, (1,), (), (), 0)] * 2


def test_clean_restart_with_the_marker_epoch_elects_from_the_elr(tmp_path: Path) -> None:
    config = _config(tmp_path)
    tid, first_epoch = asyncio.run(_first_life(config, elr=True, clean=True))
    before, after, parts, _ = asyncio.run(_restart(config, first_epoch))
    assert not [r for r in before if isinstance(r, PartitionChangeRecord)]
    assert after == [PartitionChangeRecord(partition_id=p, topic_id=tid, isr=[1], leader=1,
                                           eligible_leader_replicas=[], last_known_elr=[]) for p in (0, 1)]
    assert [_state(p) for p in parts] == [(1, (1,), (), (), 0)] * 2


def test_marker_with_another_epoch_is_unclean_and_empties_the_elr(tmp_path: Path) -> None:
    config = _config(tmp_path)
    tid, first_epoch = asyncio.run(_first_life(config, elr=True, clean=True))
    before, after, parts, _ = asyncio.run(_restart(config, first_epoch + 1))
    # the ELR pass of handleBrokerUncleanShutdown: the leaderless partitions lose their ELR
    assert before[-2:] == [PartitionChangeRecord(partition_id=p, topic_id=tid, eligible_leader_replicas=[])
                           for p in (0, 1)]
    assert after == [PartitionChangeRecord(partition_id=p, topic_id=tid, isr=[1], leader=1,
                                           leader_recovery_state=RECOVERING, last_known_elr=[]) for p in (0, 1)]
    assert [_state(p) for p in parts] == [(1, (1,), (), (), RECOVERING)] * 2


def test_crash_with_elr_off_leaves_the_last_isr_member_then_elects_it(tmp_path: Path) -> None:
    config = _config(tmp_path)
    tid, _ = asyncio.run(_first_life(config, elr=False, clean=False))
    before, after, parts, _ = asyncio.run(_restart(config, -1))
    # handleBrokerShutdown: the ISR is not emptied with ELR off; the broker just stops leading
    assert before[-2:] == [PartitionChangeRecord(partition_id=p, topic_id=tid, leader=-1) for p in (0, 1)]
    assert after == [PartitionChangeRecord(partition_id=p, topic_id=tid, leader=1) for p in (0, 1)]
    assert [_state(p) for p in parts] == [(1, (1,), (), (), 0)] * 2
