"""``__transaction_state`` records: Kafka's TransactionLogKey / TransactionLogValue.

Schemas from Kafka's ``transaction-coordinator/src/main/resources/common/message/`` JSON:

* key: ``TransactionLogKey`` v0 (not flexible): ``TransactionalId`` string;
* value: ``TransactionLogValue`` v0 (not flexible) and v1 (flexible, tagged PreviousProducerId,
  NextProducerId, ClientTransactionVersion).

Both are written as Kafka does: an int16 version, then the struct. The generic codec of
:mod:`strom.core.protocol.message_codec` reads and writes every version; every state change of a
transaction (three per transaction) writes a v1 value, so :func:`encode_metadata_value` packs that
one straight from the coordinator's state with a few ``struct`` calls (a property test checks it
against the codec byte for byte). v0 values (written by Kafka before transaction version 2) decode
too. A ``None`` value is a tombstone (the transactional id expired).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from strom.core.errors import CorruptMessageError
from strom.core.protocol.message_codec import ALL, NEVER, F, Message
from strom.core.protocol.varint import encode_uvarint

KEY_VERSION = 0
VALUE_VERSION = 1
_I16 = struct.Struct(">h")
# v1 value up to the partitions: version, ProducerId, ProducerEpoch, TransactionTimeoutMs, TransactionStatus
_V1_HEAD = struct.Struct(">hqhib")
_V1_TIMES = struct.Struct(">qq")  # TransactionLastUpdateTimestampMs, TransactionStartTimestampMs
_TAG_I64 = struct.Struct(">BBq")  # tag, size 8, value: PreviousProducerId (0), NextProducerId (1)
_TAG_I16 = struct.Struct(">BBh")  # tag 2, size 2, ClientTransactionVersion


@dataclass(frozen=True, slots=True)
class TransactionLogKey(Message):
    transactional_id: str = ""
    FLEXIBLE: ClassVar[int] = NEVER
    SCHEMA: ClassVar[tuple[F, ...]] = (F("transactional_id", "string"),)


@dataclass(frozen=True, slots=True)
class TxnPartitions(Message):
    """``PartitionsSchema``: one topic of a transaction and its partition ids."""

    topic: str = ""
    partition_ids: list[int] = field(default_factory=list)
    SCHEMA: ClassVar[tuple[F, ...]] = (F("topic", "string"), F("partition_ids", "[]int32"))


@dataclass(frozen=True, slots=True)
class TransactionLogValue(Message):
    producer_id: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = 0
    transaction_status: int = 0
    transaction_partitions: list[TxnPartitions] | None = None
    transaction_last_update_timestamp_ms: int = -1
    transaction_start_timestamp_ms: int = -1
    client_transaction_version: int = 0
    VERSIONS: ClassVar[tuple[int, int]] = (0, 1)
    FLEXIBLE: ClassVar[int] = 1
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("producer_id", "int64"),
        F("previous_producer_id", "int64", versions=(1, NEVER), tag=0),
        F("next_producer_id", "int64", versions=(1, NEVER), tag=1),
        F("producer_epoch", "int16"),
        F("transaction_timeout_ms", "int32"),
        F("transaction_status", "int8"),
        F("transaction_partitions", TxnPartitions, array=True, nullable=ALL),
        F("transaction_last_update_timestamp_ms", "int64"),
        F("transaction_start_timestamp_ms", "int64"),
        F("client_transaction_version", "int16", versions=(1, NEVER), tag=2),
    )


@functools.lru_cache(maxsize=4096)  # a transactional id's key is written at every state change
def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + TransactionLogKey(transactional_id).encode(KEY_VERSION)


def decode_key(data: bytes) -> str:
    """The transactional id of a record key; raise ``CorruptMessageError`` on anything else."""
    return TransactionLogKey.decode(data[2:], _version(data, "TransactionLogKey")).transactional_id


def encode_value(value: TransactionLogValue) -> bytes:
    return _I16.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def encode_metadata_value(producer_id: int, previous_producer_id: int, next_producer_id: int,
                          producer_epoch: int, timeout_ms: int, status: int,
                          topics: Mapping[str, Sequence[int]], last_update_ms: int, start_ms: int,
                          client_transaction_version: int) -> bytes:
    """The bytes :func:`encode_value` writes for the same TransactionLogValue v1, packed directly.

    ``topics``: the partition ids of each topic, in the order they are written
    (:meth:`TransactionMetadata.topics`). Tagged fields at their defaults (-1, -1, 0) are left
    out, as the codec leaves them out.
    """
    parts = [_V1_HEAD.pack(VALUE_VERSION, producer_id, producer_epoch, timeout_ms, status)]
    parts.append(encode_uvarint(len(topics) + 1))
    for topic, ids in topics.items():
        name = topic.encode()
        parts.append(encode_uvarint(len(name) + 1))
        parts.append(name)
        parts.append(encode_uvarint(len(ids) + 1))
        parts.append(struct.pack(f">{len(ids)}i", *ids))
        parts.append(b"\x00")  # the partitions struct's empty tag section
    parts.append(_V1_TIMES.pack(last_update_ms, start_ms))
    tags = []
    if previous_producer_id != -1:
        tags.append(_TAG_I64.pack(0, 8, previous_producer_id))
    if next_producer_id != -1:
        tags.append(_TAG_I64.pack(1, 8, next_producer_id))
    if client_transaction_version != 0:
        tags.append(_TAG_I16.pack(2, 2, client_transaction_version))
    parts.append(bytes((len(tags),)))
    parts.extend(tags)
    return b"".join(parts)


def decode_value(data: bytes) -> TransactionLogValue:
    """Decode a version-prefixed TransactionLogValue (v0 or v1)."""
    return TransactionLogValue.decode(data[2:], _version(data, "TransactionLogValue"))


def _version(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise CorruptMessageError(f"{what} is shorter than its version")
    return int(_I16.unpack_from(data, 0)[0])


def encode_value_v0(value: TransactionLogValue) -> bytes:
    """Version-0 encoding (non-flexible), as Kafka writes without transaction version 2.

    strom writes v1; this exists so v0 input (a log written by Kafka) is testable.
    """
    return _I16.pack(0) + value.encode(0)
