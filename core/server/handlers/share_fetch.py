"""ShareFetch (key 78, KIP-932): a share consumer's fetch, with acknowledgements piggybacked.

As Kafka's ``KafkaApis.handleShareFetchRequest``: READ on the group (else
GROUP_AUTHORIZATION_FAILED for the whole request), an empty member id is INVALID_REQUEST; the
share session is opened (epoch 0), advanced (the next epoch; partitions added by ``topics`` and
removed by ``forgotten_topics_data``) or closed (epoch -1) by
:class:`~strom.core.share.share_session.ShareSessionCache`, whose errors answer the whole request.
Acknowledgements are applied first (their errors go to ``acknowledge_error_code``), then records
of every partition of the session are acquired by the
:class:`~strom.core.share.share_partition_manager.SharePartitionManager`, waiting up to
``max_wait`` in the purgatory when there are none. A closing fetch (epoch -1) fetches nothing and
releases the member's acquired records; so does a renewing one (v2 ``is_renew_ack``, KIP-1222),
whose MaxBytes, MinBytes, MaxRecords and MaxWaitMs must be 0. Acknowledgement batches are checked
as KafkaApis does (ascending, disjoint, known types: RENEW only from v2), else the partition's
``acknowledge_error_code`` is INVALID_REQUEST. A partition of an unknown topic id is UNKNOWN_TOPIC_ID,
one of a topic the principal may not READ TOPIC_AUTHORIZATION_FAILED.

The response lists only the partitions with records, an error or an acknowledgement result, the
opening fetch's too (as Kafka 4.3.1 answers).
``acquisition_lock_timeout`` is the group's ``share.record.lock.duration.ms``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from strom.core.coordinator.share.share_partition import AcknowledgementBatch, AcknowledgeType
from strom.core.errors import InvalidRecordStateError, InvalidRequestError, KafkaError
from strom.core.protocol.messages import Messages, ms, response_messages
from strom.core.server.handlers._common import authorize_topics
from strom.core.share.share_partition_manager import BATCH_OPTIMIZED, FetchedPartition, FetchTarget
from strom.core.share.share_session import FINAL_EPOCH

if TYPE_CHECKING:
    from strom.core.server.context import RequestContext
    from strom.core.server.handlers._deps import ShareFetchDeps
    from strom.core.server.handlers._kio_types import ShareFetchRequest, ShareFetchResponse

API_KEY = 78
VERSIONS = (1, 2)
ZERO_UUID = uuid.UUID(int=0)


class AckBatchFields(Protocol):
    """The fields of an AcknowledgementBatch (ShareFetch's and ShareAcknowledge's alike)."""

    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def acknowledge_types(self) -> Sequence[int]: ...


def ack_batches(batches: Iterable[AckBatchFields], version: int, *, is_renew_ack: bool = False,
                renew_enabled: bool = True) -> list[AcknowledgementBatch]:
    """The wire's acknowledgement batches as SharePartition takes them, checked as Kafka's KafkaApis
    does (INVALID_REQUEST): offsets in order, batches ascending and disjoint, a known type (RENEW
    from v2, KIP-1222, and only in a request that sets IsRenewAck), one type for the batch or one
    per offset. RENEW in a group with ``share.renew.acknowledge.enable=false`` is
    INVALID_RECORD_STATE, as Kafka 4.3.1 answers."""
    out: list[AcknowledgementBatch] = []
    highest = max(AcknowledgeType) if version >= 2 else AcknowledgeType.REJECT
    for b in batches:
        first, last = int(b.first_offset), int(b.last_offset)
        if first < 0 or first > last:
            raise InvalidRequestError(f"acknowledgement batch {first}-{last}: bad offsets")
        if out and first <= out[-1].last_offset:
            raise InvalidRequestError(f"acknowledgement batch {first}-{last} is not after {out[-1].first_offset}-"
                                      f"{out[-1].last_offset}")
        raw = [int(t) for t in b.acknowledge_types]
        if not raw or len(raw) not in (1, last - first + 1):
            raise InvalidRequestError(f"acknowledgement batch {first}-{last} has {len(raw)} types")
        if any(t < 0 or t > highest for t in raw):
            raise InvalidRequestError(f"unknown acknowledge type in {raw} (version {version})")
        if AcknowledgeType.RENEW in raw:
            if not is_renew_ack:
                raise InvalidRequestError("RENEW acknowledgements in a request without IsRenewAck")
            if not renew_enabled:
                raise InvalidRecordStateError("Renewing acquisition locks is not enabled for the group.")
        out.append(AcknowledgementBatch(first, last, tuple(AcknowledgeType(t) for t in raw)))
    return out


def connection_id(ctx: RequestContext) -> str:
    """The connection a request came on, as the listener names it when it closes."""
    return f"{ctx.listener_name}/{ctx.client_address}"


def no_leader(m: Messages) -> object:
    # Kafka fills CurrentLeader only for NOT_LEADER / FENCED_LEADER_EPOCH; -1/-1 otherwise.
    return m.make("LeaderIdAndEpoch", leader_id=-1, leader_epoch=-1)


def error_response(m: Messages, code: int, message: str | None) -> ShareFetchResponse:
    response: ShareFetchResponse = m.make("ShareFetchResponse", throttle_time=0, error_code=code,
                                          error_message=message, acquisition_lock_timeout=0, responses=(),
                                          node_endpoints=())
    return response


async def handle(deps: ShareFetchDeps, ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    m = response_messages(API_KEY, ctx.api_version)
    group_id = request.group_id or ""
    member_id = request.member_id or ""
    epoch = int(request.share_session_epoch)
    if not deps.authorize(ctx, "READ", "GROUP", [group_id])[0]:
        return error_response(m, int(ErrorCode.group_authorization_failed), None)
    if not member_id:
        return error_response(m, int(ErrorCode.invalid_request), "The member id must not be empty")
    image = deps.image
    manager = deps.share_partition_manager

    names: dict[uuid.UUID, str | None] = {}

    def name_of(topic_id: uuid.UUID | None) -> str | None:
        tid = topic_id or ZERO_UUID
        if tid not in names:
            names[tid] = image.topic_name(tid)
        return names[tid]

    added = [(t.topic_id or ZERO_UUID, int(p.partition_index)) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id or ZERO_UUID, int(p)) for t in request.forgotten_topics_data for p in t.partitions]
    acks: dict[tuple[uuid.UUID, int], Sequence[AckBatchFields]] = {
        (t.topic_id or ZERO_UUID, int(p.partition_index)): p.acknowledgement_batches
        for t in request.topics for p in t.partitions if p.acknowledgement_batches}
    renew_only = bool(getattr(request, "is_renew_ack", False))
    if renew_only and (int(request.max_bytes) or int(request.min_bytes) or int(request.max_records)
                       or ms(request.max_wait)):
        # KIP-1222: a renewing ShareFetch fetches nothing, and says so with zeros.
        return error_response(m, int(ErrorCode.invalid_request),
                              "MaxBytes, MinBytes, MaxRecords and MaxWaitMs must be 0 when IsRenewAck is set")
    try:
        session, replaced = deps.share_sessions.fetch_session(
            group_id, member_id, epoch, added=added, forgotten=forgotten, has_acknowledgements=bool(acks),
            connection_id=connection_id(ctx))
    except KafkaError as e:
        return error_response(m, int(e.code), e.message or None)
    # A replaced session's or a forgotten partition's records stay acquired (Kafka's newContext):
    # the member may still acknowledge them, else their locks expire.
    del replaced
    topic_names = [n for tid in {tp[0] for tp in (*added, *session.partitions)}
                   if (n := name_of(tid))]
    denied = authorize_topics(deps, ctx, "READ", sorted(set(topic_names)))

    rows: dict[tuple[uuid.UUID, int], dict[str, object]] = {}

    def row(tp: tuple[uuid.UUID, int]) -> dict[str, object]:
        r = rows.get(tp)
        if r is None:
            r = rows[tp] = {"error_code": 0, "error_message": None, "acknowledge_error_code": 0,
                            "acknowledge_error_message": None, "records": b"", "acquired_records": ()}
        return r

    def refusal(tp: tuple[uuid.UUID, int]) -> tuple[int, str | None] | None:
        name = name_of(tp[0])
        if name is None:
            return int(ErrorCode.unknown_topic_id), None
        if name in denied:
            return int(ErrorCode.topic_authorization_failed), None
        topic = image.topics.get(name)
        if topic is None or tp[1] not in topic.partitions:
            return int(ErrorCode.unknown_topic_or_partition), None
        return None

    # Acknowledgements first (Kafka acknowledges before it fetches).
    to_ack: dict[FetchTarget, list[AcknowledgementBatch]] = {}
    for tp, batches in acks.items():
        refused = refusal(tp)
        if refused is not None:
            r = row(tp)
            r["acknowledge_error_code"], r["acknowledge_error_message"] = refused
            continue
        try:
            to_ack[FetchTarget(tp[0], name_of(tp[0]) or "", tp[1])] = ack_batches(
                batches, ctx.api_version, is_renew_ack=renew_only,
                renew_enabled=manager.renew_acknowledge_enabled(group_id))
        except KafkaError as e:
            r = row(tp)
            r["acknowledge_error_code"], r["acknowledge_error_message"] = int(e.code), e.message or None
    if to_ack:
        for t, (code, message) in (await manager.acknowledge(group_id, member_id, to_ack)).items():
            r = row((t.topic_id, t.partition))
            r["acknowledge_error_code"], r["acknowledge_error_message"] = code, message

    if epoch == FINAL_EPOCH:
        deps.share_sessions.remove(group_id, member_id)
        manager.release(group_id, member_id, list(session.partitions))
    elif not renew_only:
        targets: list[FetchTarget] = []
        for tp in session.fetch_order():
            refused = refusal(tp)
            if refused is not None:
                r = row(tp)
                r["error_code"], r["error_message"] = refused
                continue
            targets.append(FetchTarget(tp[0], name_of(tp[0]) or "", tp[1]))
        if targets:
            fetched = await manager.fetch(
                group_id, member_id, targets, max_records=int(request.max_records), max_bytes=int(request.max_bytes),
                max_wait_ms=ms(request.max_wait),
                acquire_mode=int(getattr(request, "share_acquire_mode", BATCH_OPTIMIZED)))
            for t, f in fetched.items():
                _fill(row((t.topic_id, t.partition)), f, m)
            if deps.share_sessions.get(group_id, member_id) is None:
                # The session ended while this fetch waited (its connection closed): what it just
                # acquired goes back now rather than when its locks expire.
                manager.release(group_id, member_id, [(t.topic_id, t.partition) for t in targets])
    by_topic: dict[uuid.UUID, list[object]] = {}
    for (tid, partition), r in rows.items():
        by_topic.setdefault(tid, []).append(m.make(
            "PartitionData", partition_index=partition, current_leader=no_leader(m), **r))
    responses = tuple(m.make("ShareFetchableTopicResponse", topic_id=tid, partitions=tuple(parts))
                      for tid, parts in by_topic.items())
    response: ShareFetchResponse = m.make(
        "ShareFetchResponse", throttle_time=0, error_code=0, error_message=None,
        acquisition_lock_timeout=manager.record_lock_duration_ms(group_id), responses=responses, node_endpoints=())
    return response


def _fill(r: dict[str, object], f: FetchedPartition, m: Messages) -> None:
    if f.error_code:
        r["error_code"], r["error_message"] = f.error_code, f.error_message
        return
    r["records"] = f.records
    r["acquired_records"] = tuple(m.make("AcquiredRecords", first_offset=a.first_offset, last_offset=a.last_offset,
                                         delivery_count=a.delivery_count) for a in f.acquired)
