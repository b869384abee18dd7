"""Records strom does not know in a metadata log (issue 27 item 1): a control record (Kafka's
KRaftVersionRecord / VotersRecord, or a type nobody knows) is skipped with one WARNING, as
Kafka's ControlRecordType.UNKNOWN; a metadata record of an unknown type is refused with a
message naming it and its offset, as Kafka's MetadataRecordSerde refuses it, and nothing of the
log is lost."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from strom.core.config import BrokerConfig
from strom.core.controller.metadata_system import MetadataSystem
from strom.core.controller.quorum_controller import CreatableTopic
from strom.core.metadata.records import UnknownMetadataRecordError
from strom.core.raft.control_records import CONTROL_KRAFT_VOTERS, control_key
from strom.core.records.builder import SimpleRecord, build_batch, now_ms


async def test_unknown_control_records_are_skipped_with_a_warning(config: BrokerConfig, open_system: Any,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    system = await open_system(config)
    await system.controller.create_topics([CreatableTopic("t", 1, 1)])
    raft = system.raft
    for ctype in (CONTROL_KRAFT_VOTERS, 77, 77):
        batch = build_batch([SimpleRecord(control_key(ctype), b"\x00\x00", (), now_ms())],
                            base_offset=raft.log.end_offset, control=True, partition_leader_epoch=raft.epoch)
        raft.log.append(batch, raft.epoch)
    raft.log.flush()
    raft.high_watermark = raft.log.end_offset
    await system.close(controlled_shutdown=False)
    with caplog.at_level(logging.WARNING, logger="strom.core.raft.control_records"):
        again = MetadataSystem.open(config)
        await again.start()
    try:
        assert again.image.topic("t") is not None
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("skipping control record type 6" in w and "VotersRecord" in w for w in warnings), warnings
        assert sum("skipping control record type 77" in w and "an unknown type" in w for w in warnings) == 1
    finally:
        await again.close()


async def test_unknown_metadata_record_type_is_refused_naming_it(config: BrokerConfig, open_system: Any) -> None:
    system = await open_system(config)
    end = system.raft.end_offset
    with pytest.raises(UnknownMetadataRecordError):
        await system.raft.append([b"\x01\x63\x00abc"])  # a record of api key 99 from "a newer Kafka"
    await system.close(controlled_shutdown=False)
    again = MetadataSystem.open(config)
    with pytest.raises(UnknownMetadataRecordError,
                       match=rf"record at offset {end}: metadata record type 99 \(version 0\) is unknown"):
        await again.start()
    again.raft.close()
