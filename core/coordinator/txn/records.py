"""``__transaction_state`` records: Kafka's TransactionLogKey / TransactionLogValue.

Schemas from Kafka's ``transaction-coordinator/src/main/resources/common/message/`` JSON:

* key: ``TransactionLogKey`` v0 (not flexible): ``TransactionalId`` string;
* value: ``TransactionLogValue`` v0 (not flexible) and v1 (flexible, tagged PreviousProducerId,
  NextProducerId, ClientTransactionVersion).

Both are written as Kafka does: an int16 version, then the struct. strom writes value v1 with the
generic flexible codec of :mod:`strom.core.metadata.records`; v0 values (written by Kafka before
transaction version 2) are decoded by a small hand-written reader because that codec only speaks
the flexible format. A ``None`` value is a tombstone (the transactional id expired).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar

from strom.core.exceptions import CorruptMessageError
from strom.core.metadata.records import ALL, F, Message, Reader

KEY_VERSION = 0
VALUE_VERSION = 1
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I8 = struct.Struct(">b")


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
    VERSIONS: ClassVar[tuple[int, int]] = (1, 1)   # flexible versions only; v0 is decode_value's job
    SCHEMA: ClassVar[tuple[F, ...]] = (
        F("producer_id", "int64"),
        F("previous_producer_id", "int64", tag=0),
        F("next_producer_id", "int64", tag=1),
        F("producer_epoch", "int16"),
        F("transaction_timeout_ms", "int32"),
        F("transaction_status", "int8"),
        F("transaction_partitions", TxnPartitions, array=True, nullable=ALL),
        F("transaction_last_update_timestamp_ms", "int64"),
        F("transaction_start_timestamp_ms", "int64"),
        F("client_transaction_version", "int16", tag=2),
    )


def encode_key(transactional_id: str) -> bytes:
    data = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(data)) + data


def decode_key(data: bytes) -> str:
    """The transactional id of a record key; raise ``CorruptMessageError`` on anything else."""
    r = Reader(data)
    version = r.unpack(_I16)
    if version != KEY_VERSION:
        raise CorruptMessageError(f"TransactionLogKey version {version} is unknown")
    n = r.unpack(_I16)
    if n < 0:
        raise CorruptMessageError("TransactionLogKey has a null transactional id")
    try:
        tid = r.take(n).decode()
    except UnicodeDecodeError:
        raise CorruptMessageError("TransactionLogKey is not valid UTF-8") from None
    if r.remaining:
        raise CorruptMessageError(f"{r.remaining} byte(s) of garbage after TransactionLogKey")
    return tid


def encode_value(value: TransactionLogValue) -> bytes:
    return _I16.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def decode_value(data: bytes) -> TransactionLogValue:
    """Decode a version-prefixed TransactionLogValue (v0 or v1)."""
    r = Reader(data)
    version = r.unpack(_I16)
    body = data[2:]
    if version == 1:
        msg = TransactionLogValue.decode(body, 1)
        assert isinstance(msg, TransactionLogValue)
        return msg
    if version == 0:
        return _decode_v0(Reader(body))
    raise CorruptMessageError(f"TransactionLogValue version {version} is unknown")


def _decode_v0(r: Reader) -> TransactionLogValue:
    def string() -> str:
        n = r.unpack(_I16)
        if n < 0:
            raise CorruptMessageError("null topic in TransactionLogValue")
        return r.take(n).decode(errors="strict")

    pid = r.unpack(_I64)
    epoch = r.unpack(_I16)
    timeout = r.unpack(_I32)
    status = r.unpack(_I8)
    count = r.unpack(_I32)
    parts: list[TxnPartitions] | None = None
    if count >= 0:
        if count > r.remaining:
            raise CorruptMessageError("TransactionLogValue partition count exceeds the record")
        parts = []
        for _ in range(count):
            try:
                topic = string()
            except UnicodeDecodeError:
                raise CorruptMessageError("topic name is not valid UTF-8") from None
            n = r.unpack(_I32)
            if n < 0 or 4 * n > r.remaining:
                raise CorruptMessageError("bad partition id array in TransactionLogValue")
            parts.append(TxnPartitions(topic, list(struct.unpack(f">{n}i", r.take(4 * n)))))
    last_update = r.unpack(_I64)
    start = r.unpack(_I64)
    if r.remaining:
        raise CorruptMessageError(f"{r.remaining} byte(s) of garbage after TransactionLogValue v0")
    return TransactionLogValue(producer_id=pid, producer_epoch=epoch, transaction_timeout_ms=timeout,
                               transaction_status=status, transaction_partitions=parts,
                               transaction_last_update_timestamp_ms=last_update,
                               transaction_start_timestamp_ms=start)


def encode_value_v0(value: TransactionLogValue) -> bytes:
    """Version-0 encoding (non-flexible), as Kafka writes without transaction version 2.

    strom writes v1; this exists so v0 input (a log written by Kafka) is testable.
    """
    out = bytearray(_I16.pack(0))
    out += _I64.pack(value.producer_id) + _I16.pack(value.producer_epoch)
    out += _I32.pack(value.transaction_timeout_ms) + _I8.pack(value.transaction_status)
    parts = value.transaction_partitions
    if parts is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(parts))
        for p in parts:
            name = p.topic.encode()
            out += _I16.pack(len(name)) + name + _I32.pack(len(p.partition_ids))
            out += struct.pack(f">{len(p.partition_ids)}i", *p.partition_ids)
    out += _I64.pack(value.transaction_last_update_timestamp_ms)
    out += _I64.pack(value.transaction_start_timestamp_ms)
    return bytes(out)
