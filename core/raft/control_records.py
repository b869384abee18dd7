"""KRaft control records: the values of the control batches the raft layer writes itself.

Kafka keeps these in ``org.apache.kafka.common.message`` (``LeaderChangeMessage``,
``SnapshotHeaderRecord``, ``SnapshotFooterRecord``) with ``ControlRecordType`` /
``ControlRecordUtils`` in ``common.record``; they belong to the replicated log, not to the
metadata it carries, so the raft layer defines them here and never imports metadata record types.

A control record's key is ``ControlRecordType`` v0 (``int16`` version 0, ``int16`` type); its
value is the bare message (no ``ApiMessageAndVersion`` frame, Kafka's ``MessageUtil.toByteBuffer``),
encoded with the generic codec of :mod:`strom.core.protocol.message_codec`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar

from strom.core.protocol.message_codec import F, Message

# ControlRecordType values (0 ABORT and 1 COMMIT are transaction markers: core.records.builder).
CONTROL_LEADER_CHANGE = 2
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4
CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType key: version (0), type


def control_key(control_type: int) -> bytes:
    """The key of a control record of ``control_type`` (ControlRecordType v0)."""
    return CONTROL_KEY.pack(0, control_type)


@dataclass(frozen=True, slots=True)
class Voter(Message):
    voter_id: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("voter_id", "int32"),)


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage(Message):
    version: int = 0
    leader_id: int = -1
    voters: list[Voter] = field(default_factory=list)
    granting_voters: list[Voter] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("version", "int16"), F("leader_id", "int32"),
                                       F("voters", Voter, array=True), F("granting_voters", Voter, array=True))


@dataclass(frozen=True, slots=True)
class SnapshotHeaderRecord(Message):
    version: int = 0
    last_contained_log_timestamp: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("version", "int16"), F("last_contained_log_timestamp", "int64"))


@dataclass(frozen=True, slots=True)
class SnapshotFooterRecord(Message):
    version: int = 0
    SCHEMA: ClassVar[tuple[F, ...]] = (F("version", "int16"),)
