"""Produce (key 0): append record batches to partition leaders.

Each partition's records go through ``ReplicaManager.append_records`` (validation, offset
assignment by patching batch headers, append). acks=0 gets no response; as in Kafka, an error
on an acks=0 request closes the connection so the producer notices. acks=-1 waits (through
the produce purgatory) until the high watermark covers the appended batches.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import ms, response_messages
from strom.core.protocol.produce_response import PartitionResult, TopicResults, encode_produce_response
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_topics, error_of, throttle

if TYPE_CHECKING:
    from strom.core.server.broker import Broker

API_KEY = 0
VERSIONS = (3, 12)


async def handle(broker: Broker, ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    m = response_messages(API_KEY, version)
    acks = request.acks
    rm = broker.replica_manager
    if acks not in (0, 1, -1):
        bad = f"acks={acks} is not 0, 1 or -1"
        return _all_failed(m, request, int(ErrorCode.invalid_required_acks), bad) if acks != 0 else None

    names = [t.name for t in request.topic_data]
    denied = authorize_topics(broker, ctx, "WRITE", names)
    total_bytes = 0
    waits: list[tuple[Any, int]] = []
    topics_out: list[tuple[str, list[list[Any]]]] = []
    any_error = False
    for topic in request.topic_data:
        parts_out = []
        for pd in topic.partition_data:
            records = pd.records or b""
            total_bytes += len(records)
            base_offset, log_append_time, log_start, code = -1, -1, -1, 0
            message: str | None = None
            if topic.name in denied:
                code = int(ErrorCode.topic_authorization_failed)
            elif topic.name not in broker.image.topics:
                code = int(ErrorCode.unknown_topic_or_partition)
            else:
                try:
                    result = rm.append_records(topic.name, pd.index, records, acks)
                    part = rm.get_partition(topic.name, pd.index)
                    if part.log.needs_flush():
                        # flush.messages / flush.ms: durable before the ack, fsync off the loop.
                        await asyncio.to_thread(part.log.flush)
                    base_offset, log_append_time = result.first_offset, result.log_append_time_ms
                    log_start = result.log_start_offset
                    if acks == -1:
                        waits.append((rm.get_partition(topic.name, pd.index), result.last_offset + 1))
                except Exception as e:
                    code, message = error_of(e)
            any_error = any_error or code != 0
            parts_out.append([pd.index, code, base_offset, log_append_time, log_start, message])
        topics_out.append((topic.name, parts_out))

    throttle_ms = throttle(broker, ctx, "PRODUCE", total_bytes)
    if acks == 0:
        if any_error:
            raise MalformedRequestError("closing the connection of an acks=0 producer after a failed append")
        return None

    if waits:
        timeout_s = ms(request.timeout) / 1000
        ok = await rm.produce_purgatory.wait_until(
            [p.key for p, _ in waits], lambda: all(p.high_watermark >= end for p, end in waits), timeout_s)
        if not ok:
            late = {p.key for p, end in waits if p.high_watermark < end}
            for name, parts in topics_out:
                for row in parts:
                    if (name, row[0]) in late and row[1] == 0:
                        row[1], row[5] = int(ErrorCode.request_timed_out), "acks=all timed out waiting for the ISR"

    return ProduceResults(throttle_ms, [
        TopicResults(name, [PartitionResult(*row) for row in parts]) for name, parts in topics_out])


class ProduceResults:
    """A Produce response encoded by the fast path (see strom.core.protocol.produce_response)."""

    __slots__ = ("throttle_ms", "topics")

    def __init__(self, throttle_ms: int, topics: list[TopicResults]) -> None:
        self.throttle_ms = throttle_ms
        self.topics = topics

    def frame_parts(self, version: int, correlation_id: int) -> bytes:
        return encode_produce_response(version, correlation_id, self.throttle_ms, self.topics)


def _all_failed(m: Any, request: Any, code: int, message: str) -> Any:
    return m.make("ProduceResponse", throttle_time=0, responses=tuple(
        m.make("TopicProduceResponse", name=t.name, partition_responses=tuple(
            m.make("PartitionProduceResponse", index=p.index, error_code=code, base_offset=-1,
                   log_append_time=-1, log_start_offset=-1, record_errors=(), error_message=message)
            for p in t.partition_data))
        for t in request.topic_data))
