"""Fetch (key 1): read whole record batches, long-polling through the fetch purgatory.

Consumers read up to the high watermark (read_committed: the last stable offset); followers
(replica id >= 0) up to the log end. Each partition gets at most ``partition_max_bytes`` and
the response at most ``max_bytes``, except that the first partition with data always returns
at least one whole batch (KIP-74) so a large batch can never stall a consumer. When fewer than
``min_bytes`` are available the request waits in the purgatory until appends bring enough or
``max_wait`` passes. Fetch sessions (KIP-227) are answered sessionless (session id 0), which
clients accept as "send full fetches".
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from strom.core.protocol.messages import ms, response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 1
VERSIONS = (4, 17)
ZERO_UUID = uuid.UUID(int=0)


class _Target:
    __slots__ = ("error", "fp", "name", "topic_id")

    def __init__(self, name: str, topic_id: uuid.UUID, fp: Any, error: int) -> None:
        self.name = name
        self.topic_id = topic_id
        self.fp = fp
        self.error = error


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    m = response_messages(API_KEY, version)
    image = broker.image
    replica_state = getattr(request, "replica_state", None)
    replica_id = replica_state.replica_id if replica_state is not None else getattr(request, "replica_id", -1)
    isolation = getattr(request, "isolation_level", 0)
    max_bytes = getattr(request, "max_bytes", 0x7FFFFFFF)

    targets: list[list[_Target]] = []
    names: list[str] = []
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
        targets.append([_Target(name, topic_id or ZERO_UUID, fp, error) for fp in ft.partitions])
    denied = authorize_topics(broker, ctx, "READ", [n for n in set(names) if n])
    for group in targets:
        for t in group:
            if t.error == 0 and t.name in denied:
                t.error = int(ErrorCode.topic_authorization_failed)

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
    by_topic: dict[tuple[str, uuid.UUID], list[Any]] = {}
    order: list[tuple[str, uuid.UUID]] = []
    for t, result, code, _message in rows:
        key = (t.name, t.topic_id)
        if key not in by_topic:
            by_topic[key] = []
            order.append(key)
        if result is None:
            pdata = m.make("PartitionData", partition_index=t.fp.partition, error_code=code,
                           high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                           aborted_transactions=None, records=b"")
        else:
            pdata = m.make("PartitionData", partition_index=t.fp.partition, error_code=0,
                           high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
                           log_start_offset=result.log_start_offset,
                           aborted_transactions=() if isolation == 1 else None, records=result.records)
        by_topic[key].append(pdata)
    responses = tuple(m.make("FetchableTopicResponse", topic=name, topic_id=tid, partitions=tuple(by_topic[(name, tid)]))
                      for name, tid in order)
    return m.make("FetchResponse", throttle_time=throttle_ms, error_code=0, session_id=0, responses=responses)
