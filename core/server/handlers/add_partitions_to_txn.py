"""AddPartitionsToTxn (key 24): enlist partitions in a producer's ongoing transaction.

v0-3 carry one transaction (from a producer); v4+ carry a batch of transactions and are
broker-to-broker (CLUSTER_ACTION), with ``verify_only`` to ask whether partitions are already
part of the transaction. Partitions of unknown or unauthorized topics fail with
UNKNOWN_TOPIC_OR_PARTITION / TOPIC_AUTHORIZATION_FAILED and the others of that transaction with
OPERATION_NOT_ATTEMPTED, as in Kafka; the rest goes to the transaction coordinator.

A producer's response (v0-3) is encoded by hand (:class:`ProducerAnswer`): it comes once per
transaction, before the transaction's first Produce can go, and kio's generic writer took as long
as the coordinator's own work.
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.wire import client_code, coordinator, may_write_txn_id
from strom.core.errors import KafkaError
from strom.core.protocol.messages import Messages, response_messages
from strom.core.protocol.varint import encode_uvarint
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, authorize_topics, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import TxnDeps
    from strom.core.server.handlers._kio_types import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

API_KEY = 24
VERSIONS = (0, 5)
FENCED_SINCE = 2
BATCHED_SINCE = 4

FIRST_FLEXIBLE = 3

Codes = dict[tuple[str, int], int]

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PARTITION = struct.Struct(">ih")  # PartitionIndex, PartitionErrorCode


class ProducerAnswer:
    """A v0-3 response (one transaction, a producer's), encoded by hand; the bytes are kio's (a
    test checks every version). Topics in the order of their first partition in ``codes``."""

    __slots__ = ("codes", "throttle_time_ms")

    def __init__(self, throttle_time_ms: int, codes: Codes) -> None:
        self.throttle_time_ms = throttle_time_ms
        self.codes = codes

    def frame_parts(self, version: int, correlation_id: int) -> bytes:
        flexible = version >= FIRST_FLEXIBLE
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, index), code in self.codes.items():
            by_topic.setdefault(topic, []).append((index, code))
        out = bytearray(b"\x00\x00\x00\x00")
        out += _I32.pack(correlation_id)
        if flexible:
            out += b"\x00"  # response header tags
        out += _I32.pack(self.throttle_time_ms)
        out += encode_uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))
        for topic, parts in by_topic.items():
            name = topic.encode()
            out += encode_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            out += name
            out += encode_uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
            for index, code in parts:
                out += _PARTITION.pack(index, code)
                if flexible:
                    out += b"\x00"  # partition tags
            if flexible:
                out += b"\x00"  # topic tags
        if flexible:
            out += b"\x00"  # top-level tags
        _I32.pack_into(out, 0, len(out) - 4)
        return bytes(out)


async def _process(deps: TxnDeps, ctx: RequestContext, tid: str, pid: int, epoch: int, topics: Any,
                   verify_only: bool) -> Codes:
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    if not may_write_txn_id(deps, ctx, tid):
        return dict.fromkeys(wanted, int(ErrorCode.transactional_id_authorization_failed))
    names = sorted({t for t, _ in wanted})
    denied = authorize_topics(deps, ctx, "WRITE", names)
    image_topics = deps.image.topics
    errors: Codes = {}
    for tp in wanted:
        topic = image_topics.get(tp[0])
        if tp[0] in denied:
            errors[tp] = int(ErrorCode.topic_authorization_failed)
        elif topic is None or tp[1] not in topic.partitions:
            errors[tp] = int(ErrorCode.unknown_topic_or_partition)
    if errors:
        return {tp: errors.get(tp, int(ErrorCode.operation_not_attempted)) for tp in wanted}
    try:
        coord = coordinator(deps)
        if verify_only:
            return {tp: int(c) for tp, c in coord.verify_partitions(tid, pid, epoch, wanted).items()}
        # Kafka: an add in a broker-to-broker request is on behalf of a TV2 producer.
        await coord.add_partitions(tid, pid, epoch, wanted, 2 if ctx.api_version >= BATCHED_SINCE else 0)
    except KafkaError as e:
        return dict.fromkeys(wanted, client_code(e.code, ctx.api_version, FENCED_SINCE))
    return dict.fromkeys(wanted, 0)


def _topic_results(m: Messages, codes: Codes) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append(
            m.make("AddPartitionsToTxnPartitionResult", partition_index=index, partition_error_code=code))
    return [m.make("AddPartitionsToTxnTopicResult", name=t, results_by_partition=tuple(r))
            for t, r in by_topic.items()]


async def handle(deps: TxnDeps, ctx: RequestContext,
                 request: AddPartitionsToTxnRequest) -> ProducerAnswer | AddPartitionsToTxnResponse:
    if ctx.api_version < BATCHED_SINCE:
        v3: Any = request  # mypy cannot narrow the Union by ctx.api_version
        codes = await _process(deps, ctx, v3.v3_and_below_transactional_id,
                               v3.v3_and_below_producer_id, v3.v3_and_below_producer_epoch,
                               v3.v3_and_below_topics, False)
        return ProducerAnswer(response_throttle(deps, ctx), codes)

    m = response_messages(API_KEY, ctx.api_version)

    def answer(code: int, results: list[Any]) -> Any:
        return m.make("AddPartitionsToTxnResponse", throttle_time=response_throttle(deps, ctx), error_code=code,
                      results_by_transaction=tuple(results))

    if not authorize_cluster(deps, ctx, "CLUSTER_ACTION"):
        return answer(int(ErrorCode.cluster_authorization_failed), [])
    batched: Any = request  # mypy cannot narrow the Union by ctx.api_version
    txns = batched.transactions
    all_codes = await asyncio.gather(*(
        _process(deps, ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only)
        for t in txns))
    return answer(0, [m.make("AddPartitionsToTxnResult", transactional_id=t.transactional_id,
                             topic_results=tuple(_topic_results(m, codes)))
                      for t, codes in zip(txns, all_codes, strict=True)])
