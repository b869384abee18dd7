"""``__transaction_state`` records: Kafka's TransactionLogKey / TransactionLogValue.

Schemas from Kafka's ``transaction-coordinator/src/main/resources/common/message/`` JSON:

* key: ``TransactionLogKey`` v0 (not flexible): ``TransactionalId`` string;
* value: ``TransactionLogValue`` v0 (not flexible) and v1 (flexible, tagged PreviousProducerId,
  NextProducerId, ClientTransactionVersion).

Both are written as Kafka does: an int16 version, then the struct, by the generic codec of
:mod:`strom.core.metadata.codec`. strom writes value v1; v0 values (written by Kafka before
transaction version 2) decode too. A ``None`` value is a tombstone (the transactional id expired).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar

from strom.core.exceptions import CorruptMessageError
from strom.core.metadata.codec import ALL, NEVER, F, Message

KEY_VERSION = 0
VALUE_VERSION = 1
_I16 = struct.Struct(">h")


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


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + TransactionLogKey(transactional_id).encode(KEY_VERSION)


def decode_key(data: bytes) -> str:
    """The transactional id of a record key; raise ``CorruptMessageError`` on anything else."""
    return TransactionLogKey.decode(data[2:], _version(data, "TransactionLogKey")).transactional_id


def encode_value(value: TransactionLogValue) -> bytes:
    return _I16.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


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
