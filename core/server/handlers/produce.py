"""Produce (key 0): append record batches to partition leaders.

Each partition's records go through ``ReplicaManager.append_records`` (validation, offset
assignment by patching batch headers, append). acks=0 gets no response; as in Kafka, an error
on an acks=0 request closes the connection so the producer notices. acks=-1 waits (through
the produce purgatory) until the high watermark covers the appended batches.

A transactional batch that would open a transaction on a partition first goes to the transaction
coordinator (:mod:`strom.core.server.txn_verification`): from v12 (KIP-890 transaction version 2)
the partition is added to the transaction, before that it is verified to be in it.

Records are validated as Kafka's LogValidator does (:mod:`strom.core.records.validate`); a batch
refused for some of its records is answered with v8+ ``record_errors``. A compressed batch that
expands past ``INLINE_VALIDATION_BYTES`` is validated in a worker thread (decompression bombs
are bounded by ``strom.decompression.max.bytes``), so other connections keep being served.

From v13 (KIP-516) topics are named by topic id in the request and the response. Each id is
resolved to its name once per topic (never per record or partition), as Fetch v13+ does; an id
the broker does not know (the zero id included) answers UNKNOWN_TOPIC_ID for its partitions,
like Kafka. Everything after the lookup (authorization, transactions, the append) works on names.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn.wire import may_write_txn_id
from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import ms, response_messages
from strom.core.protocol.produce_response import PartitionResult, TopicResults, encode_produce_response
from strom.core.records.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_OVERHEAD,
    COMPRESSION_MASK,
    COMPRESSION_ZSTD,
    CURRENT_MAGIC,
    MAGIC_OFFSET,
    TRANSACTIONAL_MASK,
    read_header,
)
from strom.core.records.validate import ValidateOffLoop, record_errors_of, refused_before_append
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, throttle
from strom.core.server.txn_verification import (
    TxnBatch,
    add_or_verify,
    bad_first_sequence,
    needs_coordinator,
    produce_code,
    still_in_transaction,
    verify,
)

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import PartitionTxnDeps
    from strom.core.server.handlers._kio_types import ProduceRequest, ProduceResponse

API_KEY = 0
VERSIONS = (3, 13)
TOPIC_IDS_SINCE = 13  # KIP-516: topics named by id instead of by name
ADDS_PARTITIONS_SINCE = 12  # KIP-890 part 2: the leader adds the partition to the transaction
ABORTABLE_SINCE = 11  # TRANSACTION_ABORTABLE; older producers get INVALID_TXN_STATE
ZSTD_SINCE = 7  # KIP-110: zstd batches need Produce v7+
# Decompressed bytes a compressed batch may expand to and still be validated on the event loop
# (about a millisecond of work); past it the request's validation moves to a worker thread.
INLINE_VALIDATION_BYTES = 1 << 20
_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1  # attributes are a big-endian int16
# Errors Kafka answers without the partition's log start offset (ReplicaManager.appendToLocalLog
# lists them apart: UNKNOWN_LOG_APPEND_INFO); every other failed append reports it.
_NO_LOG_START_CODES = frozenset(int(c) for c in (
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower, ErrorCode.message_too_large,
    ErrorCode.record_list_too_large, ErrorCode.corrupt_message, ErrorCode.kafka_storage_error))
_partition_result = PartitionResult._make  # a row holds every field: no namedtuple __new__ per partition


async def handle(deps: PartitionTxnDeps, ctx: RequestContext,
                 request: ProduceRequest) -> ProduceResults | ProduceResponse | None:
    version = ctx.api_version
    m = response_messages(API_KEY, version)
    acks = request.acks
    rm = deps.replica_manager
    if acks not in (0, 1, -1):
        bad = f"acks={acks} is not 0, 1 or -1"
        if acks == 0:
            return None
        return _all_failed(m, request, _topic_names(deps, request, version)[1], int(ErrorCode.invalid_required_acks),
                           bad)

    names, ids = _topic_names(deps, request, version)
    denied = authorize_topics(deps, ctx, "WRITE", [n for n in names if n is not None])
    batches = _transactional_batches(request, names)
    txn_codes: dict[tuple[str, int], int] = {}
    guarded: set[tuple[str, int]] = set()
    if batches:
        tid = request.transactional_id
        if tid is None or not may_write_txn_id(deps, ctx, tid):
            # Kafka refuses the whole request: transactional records need an authorized id.
            if acks == 0:
                raise MalformedRequestError("transactional records without an authorized transactional id")
            return _all_failed(m, request, ids, int(ErrorCode.transactional_id_authorization_failed), None)
        image_topics = deps.image.topics  # once, not per partition
        known = {tp: b for tp, b in batches.items() if tp[0] not in denied and tp[0] in image_topics}
        txn_codes, guarded = await _enlist_partitions(deps, tid, known, version, ms(request.timeout))
    total_bytes = 0
    waits: list[tuple[Any, int]] = []
    topics_out: list[tuple[str | None, uuid.UUID | None, list[list[Any]]]] = []
    any_error = False
    image_topics = deps.image.topics
    # Indexed: zip() and enumerate() join the per-version tuple types of topic_data to object for mypy.
    topic_data = request.topic_data
    for i in range(len(topic_data)):
        topic, name, topic_id = topic_data[i], names[i], ids[i]
        parts_out = []
        topic_image = image_topics.get(name) if name is not None else None
        for pd in topic.partition_data:
            records = pd.records or b""
            total_bytes += len(records)
            base_offset, log_append_time, log_start, code = -1, -1, -1, 0
            message: str | None = None
            record_errors: tuple[tuple[int, str], ...] = ()
            if name is None:
                code = int(ErrorCode.unknown_topic_id)  # v13+: an id the broker does not know
            elif name in denied:
                code = int(ErrorCode.topic_authorization_failed)
            elif topic_image is None or pd.index not in topic_image.partitions:
                # Kafka checks its metadata before appending: no error message.
                code = int(ErrorCode.unknown_topic_or_partition)
            elif version < ZSTD_SINCE and _zstd_batch(records):
                # Kafka's ProduceRequest.validateRecords, before the append (no log start offset).
                code = int(ErrorCode.unsupported_compression_type)
                message = f"Produce requests with version {version} are not allowed to use ZStandard compression"
            elif txn_codes and (name, pd.index) in txn_codes:
                code = txn_codes[(name, pd.index)]
            elif guarded and (name, pd.index) in guarded and (
                    refused := _refuse_guarded(deps, request.transactional_id or "", batches[(name, pd.index)],
                                               (name, pd.index), version)):
                code, message = refused
            else:
                part = None
                try:
                    part = rm.get_partition(name, pd.index)
                    try:
                        result = rm.append_to_partition(part, records, acks, inline_bytes=INLINE_VALIDATION_BYTES)
                    except ValidateOffLoop:
                        # A compressed batch that expands past the inline budget (or a large one
                        # the Python walk must read): validated in a worker thread so the other
                        # connections are not held up behind it, then appended here.
                        validated = await asyncio.to_thread(part.validate_records, records)
                        result = rm.append_validated(part, validated, acks)
                    if part.needs_flush():
                        # flush.messages / flush.ms: durable before the ack, fsync off the loop.
                        await asyncio.to_thread(part.flush)
                    base_offset, log_append_time = result.first_offset, result.log_append_time_ms
                    log_start = result.log_start_offset
                    if acks == -1:
                        waits.append((part, result.last_offset + 1))
                except Exception as e:
                    code, message = error_of(e)
                    record_errors = record_errors_of(e)
                    if part is not None and code not in _NO_LOG_START_CODES and not refused_before_append(e):
                        # Kafka's ReplicaManager answers the partition's log start offset for
                        # every failed append but the few errors it lists (processFailedRecord);
                        # records its KafkaApis refuses before the append get none either.
                        log_start = part.log_start_offset
            any_error = any_error or code != 0
            parts_out.append([pd.index, code, base_offset, log_append_time, log_start, message, record_errors])
        topics_out.append((name, topic_id, parts_out))

    throttle_ms = throttle(deps, ctx, "PRODUCE", total_bytes)
    if acks == 0:
        if any_error:
            raise MalformedRequestError("closing the connection of an acks=0 producer after a failed append")
        return None

    if waits and not all(p.high_watermark >= end for p, end in waits):  # alone in the ISR: already there
        timeout_s = ms(request.timeout) / 1000
        ok = await rm.produce_purgatory.wait_until(
            [p.key for p, _ in waits], lambda: all(p.high_watermark >= end for p, end in waits), timeout_s)
        if not ok:
            late = {p.key for p, end in waits if p.high_watermark < end}
            for name, _tid, parts in topics_out:
                for row in parts:
                    if (name, row[0]) in late and row[1] == 0:
                        row[1], row[5] = int(ErrorCode.request_timed_out), "acks=all timed out waiting for the ISR"

    return ProduceResults(throttle_ms, [
        TopicResults(name or "", [_partition_result(row) for row in parts], tid) for name, tid, parts in topics_out])


def _zstd_batch(records: bytes) -> bool:
    """The first batch is a magic 2 batch compressed with zstd (what Kafka checks; anything
    malformed is left to the append's validation)."""
    return (len(records) >= BATCH_OVERHEAD and records[MAGIC_OFFSET] == CURRENT_MAGIC
            and records[_ATTRIBUTES_LOW_BYTE] & COMPRESSION_MASK == COMPRESSION_ZSTD)


def _topic_names(deps: PartitionTxnDeps, request: Any, version: int) -> tuple[list[str | None], list[uuid.UUID | None]]:
    """The name of each request topic (None for a topic id the broker does not know) and, from
    v13, its topic id as the request gave it (None for the zero id), which the response echoes.
    One dictionary lookup per topic, as Fetch v13+ resolves its topic ids."""
    if version < TOPIC_IDS_SINCE:
        return [t.name for t in request.topic_data], [None] * len(request.topic_data)
    image = deps.image
    return [image.topic_name(t.topic_id) for t in request.topic_data], [t.topic_id for t in request.topic_data]


def _transactional_batches(request: Any, names: list[str | None]) -> dict[tuple[str, int], TxnBatch]:
    """The producer of each partition whose records are transactional (first batch's header);
    topics whose id is unknown (no name) are left out: they are not appended."""
    batches: dict[tuple[str, int], TxnBatch] = {}
    for topic, name in zip(request.topic_data, names, strict=True):
        if name is None:
            continue
        for pd in topic.partition_data:
            records = pd.records or b""
            # The transactional bit (in the low byte of the int16 attributes) first: only a
            # transactional batch needs its header parsed. Fewer than a header's bytes: the
            # append reports the malformed records.
            if len(records) < BATCH_OVERHEAD or not records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_MASK:
                continue
            header = read_header(records, 0)
            batches[(name, pd.index)] = TxnBatch(header.producer_id, header.producer_epoch, header.base_sequence)
    return batches


async def _enlist_partitions(deps: PartitionTxnDeps, transactional_id: str, batches: dict[tuple[str, int], TxnBatch],
                             version: int, timeout_ms: int) -> tuple[dict[tuple[str, int], int], set[tuple[str, int]]]:
    """Add (v12+) or verify the partitions where the transactional batches would open the
    producer's transaction. Returns an error code per partition that must not be appended, and
    the partitions to re-check right before appending."""
    if not batches:
        return {}, set()
    if len({b.producer_id for b in batches.values()}) > 1:
        code = int(ErrorCode.invalid_producer_id_mapping)  # Kafka: one producer per request
        return dict.fromkeys(batches, code), set()
    add = version >= ADDS_PARTITIONS_SINCE
    if not add and not deps.config.transaction_partition_verification_enable:
        return {}, set()
    txn = next(iter(batches.values()))
    codes: dict[tuple[str, int], int] = {}
    ask: list[tuple[str, int]] = []
    for tp in batches:
        try:
            need = needs_coordinator(deps, tp, txn)
        except Exception:
            continue  # not the leader, and so on: the append reports it
        if need:
            codes[tp] = need
        elif need == 0:
            ask.append(tp)
    if ask:
        if add:
            retry_ms = min(deps.config.add_partitions_to_txn_retry_backoff_max_ms, timeout_ms)
            answers = await add_or_verify(deps, transactional_id, txn, ask, add=True,
                                          legacy=version < ABORTABLE_SINCE, retry_ms=retry_ms)
        else:
            answers = verify(deps, transactional_id, txn, ask, legacy=version < ABORTABLE_SINCE)
        codes.update({tp: produce_code(c, add) for tp, c in answers.items() if c != ErrorCode.none})
    return codes, {tp for tp in ask if tp not in codes}


def _refuse_guarded(deps: PartitionTxnDeps, transactional_id: str, batch: TxnBatch, tp: tuple[str, int],
                    version: int) -> tuple[int, str] | None:
    """Why a partition the coordinator just added or verified must not be appended after all."""
    if not still_in_transaction(deps, transactional_id, batch, tp):
        # The transaction ended (a timeout abort) while the partition was being added.
        return int(ErrorCode.invalid_txn_state), "the partition is no longer in the transaction"
    if version >= ADDS_PARTITIONS_SINCE and bad_first_sequence(deps, tp, batch):
        return (int(ErrorCode.out_of_order_sequence_number),
                f"producer {batch.producer_id} is new to {tp[0]}-{tp[1]}: its first sequence must be 0, "
                f"not {batch.base_sequence}")
    return None


class ProduceResults:
    """A Produce response encoded by the fast path (see strom.core.protocol.produce_response)."""

    __slots__ = ("throttle_ms", "topics")

    def __init__(self, throttle_ms: int, topics: list[TopicResults]) -> None:
        self.throttle_ms = throttle_ms
        self.topics = topics

    def frame_parts(self, version: int, correlation_id: int) -> bytes:
        return encode_produce_response(version, correlation_id, self.throttle_ms, self.topics)


def _all_failed(m: Any, request: Any, ids: list[uuid.UUID | None], code: int, message: str | None) -> Any:
    # v13 answers each topic by the id it was asked by; before v13 ``make`` drops topic_id.
    return m.make("ProduceResponse", throttle_time=0, responses=tuple(
        m.make("TopicProduceResponse", name=getattr(t, "name", ""), topic_id=tid, partition_responses=tuple(
            m.make("PartitionProduceResponse", index=p.index, error_code=code, base_offset=-1,
                   log_append_time=-1, log_start_offset=-1, record_errors=(), error_message=message)
            for p in t.partition_data))
        for t, tid in zip(request.topic_data, ids, strict=True)))
