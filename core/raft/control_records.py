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

import logging
import struct
from dataclasses import dataclass, field
from typing import ClassVar

from strom.core.protocol.message_codec import F, Message

# ControlRecordType values (0 ABORT and 1 COMMIT are transaction markers: core.records.builder).
CONTROL_LEADER_CHANGE = 2
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4
CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType key: version (0), type
# Kafka 4.3's other control types, which strom does not interpret: KRAFT_VERSION (KIP-853's
# kraft.version) and KRAFT_VOTERS (the dynamic voter set); strom runs static voters.
CONTROL_KRAFT_VERSION = 5
CONTROL_KRAFT_VOTERS = 6
# The types strom reads (0/1 are transaction markers, which a metadata log never holds).
UNDERSTOOD_CONTROL_TYPES = frozenset({CONTROL_LEADER_CHANGE, CONTROL_SNAPSHOT_HEADER, CONTROL_SNAPSHOT_FOOTER})

log = logging.getLogger(__name__)
_warned: set[int] = set()


def control_type(key: bytes | None) -> int:
    """The type of a control record from its key (-1 when the key is not ControlRecordType v0's)."""
    if key is None or len(key) < CONTROL_KEY.size:
        return -1
    return int(CONTROL_KEY.unpack_from(key)[1])


def skip_control_record(key: bytes | None, where: str) -> None:
    """A control record strom does not interpret: skipped, with a WARNING the first time a type
    is seen. A control record is skippable by construction, as Kafka's ``ControlRecordType.parse``
    turns an unknown type into UNKNOWN and its readers skip it (unlike a metadata record of an
    unknown type, which is refused)."""
    ctype = control_type(key)
    if ctype in UNDERSTOOD_CONTROL_TYPES or ctype in _warned:
        return
    _warned.add(ctype)
    known = {CONTROL_KRAFT_VERSION: "KRaftVersionRecord", CONTROL_KRAFT_VOTERS: "VotersRecord"}.get(ctype)
    what = f"Kafka's {known} (dynamic KRaft voters, which strom does not run)" if known else "an unknown type"
    log.warning("skipping control record type %d in %s: %s", ctype, where, what)


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
