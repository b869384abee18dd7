"""Fetch (key 1): read whole record batches, long-polling through the fetch purgatory.

Consumers read up to the high watermark (read_committed: the last stable offset); followers
(replica id >= 0) up to the log end. Each partition gets at most ``partition_max_bytes`` and
the response at most ``max_bytes``, except that the first partition with data always returns
at least one whole batch (KIP-74) so a large batch can never stall a consumer. When fewer than
``min_bytes`` are available the request waits in the purgatory until appends bring enough or
``max_wait`` passes. Fetch sessions (KIP-227) are answered sessionless (session id 0), which
clients accept as "send full fetches".

Fetch v18 adds ``high_watermark`` (a tagged field of each request partition: the high watermark
a replica fetcher already knows, KIP-1166) so a leader can answer a follower early when it moved.
strom's partitions have no remote followers, and a consumer never sets it, so it is decoded (kio)
and otherwise ignored; the v18 response is the v17 one.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.fetch_response import PartitionRow, TopicRows, encode_fetch_response
from strom.core.protocol.messages import ms
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 1
VERSIONS = (4, 18)
ZERO_UUID = uuid.UUID(int=0)


class _Target:
    __slots__ = ("error", "fp", "name", "topic_id")

    def __init__(self, name: str, topic_id: uuid.UUID, fp: Any, error: int) -> None:
        self.name = name
        self.topic_id = topic_id
        self.fp = fp
        self.error = error


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    image = broker.image
    replica_state = getattr(request, "replica_state", None)
    replica_id = replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1)
    isolation = getattr(request, "isolation_level", 0)
    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)

    targets: list[list[_Target]] = []
    names: list[str] = []
    partitions: list[Mapping[int, Any]] = []  # each request topic's partitions in the image
    for ft in request.topics:
        topic_id = getattr(ft, "topic_id", None)
        name = getattr(ft, "topic", None)
        error = 0
        if name is None:
            found = image.topics_by_id.get(topic_id) if topic_id else None
            if found is None:
                error, name = int(ErrorCode.unknown_topic_id), ""
            else:
                name = found.name
        else:
            found = image.topics.get(name)
            topic_id = found.topic_id if found is not None else ZERO_UUID
        names.append(name)
        partitions.append(found.partitions if found is not None else {})
        targets.append([_Target(name, topic_id or ZERO_UUID, fp, error) for fp in ft.partitions])
    denied = authorize_topics(broker, ctx, "READ", [n for n in set(names) if n])
    for group, known in zip(targets, partitions, strict=True):
        for t in group:
            if t.error:
                continue
            if t.name in denied:
                t.error = int(ErrorCode.topic_authorization_failed)
            elif t.fp.partition not in known:
                # Like Kafka (KafkaApis), after authorization and before reading: the same
                # answer as an unknown id or a denied topic (see the aborted list below).
                t.error = int(ErrorCode.unknown_topic_or_partition)

    def read_all() -> tuple[list[tuple[_Target, Any, int, str | None]], int, bool]:
        out = []
        total = 0
        errored = False
        for group in targets:
            for t in group:
                result, code, message = None, t.error, None
                if code == 0:
                    try:
                        part = broker.replica_manager.get_partition(t.name, t.fp.partition)
                        part.check_leader_epoch(getattr(t.fp, "current_leader_epoch", -1))
                        budget = min(t.fp.partition_max_bytes, max(max_bytes - total, 0))
                        result = part.read_records(t.fp.fetch_offset, budget, replica_id=replica_id,
                                                   min_one_message=total == 0, isolation_level=isolation)
                        total += len(result.records)
                    except Exception as e:
                        code, message = error_of(e)
                errored = errored or code != 0
                out.append((t, result, code, message))
        return out, total, errored

    rows, total, errored = read_all()
    min_bytes = max(request.min_bytes, 1)
    max_wait_s = ms(request.max_wait) / 1000
    if total < min_bytes and not errored and max_wait_s > 0 and rows:
        keys = [(t.name, t.fp.partition) for group in targets for t in group]
        state = {"rows": rows, "total": total}

        def enough() -> bool:
            r, tot, err = read_all()
            state["rows"], state["total"] = r, tot
            return tot >= min_bytes or err

        await broker.replica_manager.fetch_purgatory.wait_until(keys, enough, max_wait_s)
        rows = state["rows"]  # type: ignore[assignment]
        total = state["total"]  # type: ignore[assignment]

    throttle_ms = throttle(broker, ctx, "FETCH", total) if replica_id < 0 else 0
    by_topic: dict[tuple[str, uuid.UUID], list[PartitionRow]] = {}
    for t, result, code, _message in rows:
        key = (t.name, t.topic_id)
        if result is None:
            # A partition refused before reading (unknown id, topic or partition; not
            # authorized) carries an empty aborted list in Kafka's answer, a read error null.
            row = PartitionRow(t.fp.partition, code, -1, -1, -1, () if t.error else None, b"")
        else:
            row = PartitionRow(t.fp.partition, 0, result.high_watermark, result.last_stable_offset,
                               result.log_start_offset,
                               tuple(result.aborted_transactions or ()) if isolation == 1 else None, result.records)
        by_topic.setdefault(key, []).append(row)
    return FetchRows(throttle_ms, [TopicRows(name, tid, parts) for (name, tid), parts in by_topic.items()])


class FetchRows:
    """A Fetch response encoded by the fast path (see strom.core.protocol.fetch_response)."""

    __slots__ = ("throttle_ms", "topics")

    def __init__(self, throttle_ms: int, topics: list[TopicRows]) -> None:
        self.throttle_ms = throttle_ms
        self.topics = topics

    def frame_parts(self, version: int, correlation_id: int) -> list[bytes | memoryview]:
        return encode_fetch_response(version, correlation_id, self.throttle_ms, 0, 0, self.topics)
