"""A Fetch waiting in the purgatory completes from offset snapshots, never re-reading its partitions.

The broker is the real one, in this process (controller, logs, replica manager, purgatory, the
listener and its socket); the Fetch arrives over a real TCP connection. A consumer's Fetch of
eight partitions waits for ``min_bytes``; appends to one partition wake it again and again.
The test counts the calls of ``UnifiedLog.read`` made on the event loop's thread (a profile
hook: it observes, it changes nothing): one read of each partition when the fetch arrives and
one when it is answered, however many wakes there were in between. Before, every wake read
all eight partitions again.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import kafka_wire
from kio.schema.fetch.v12.response import FetchResponse

from strom.core.controller.quorum_controller import CreatableTopic
from strom.core.log.log import Log
from strom.core.protocol.messages import request_messages
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.server.broker import Broker
from strom.core.server.purgatory import Purgatory
from strom.core.tools.run import dev_config
from strom.core.tools.storage import format_dirs, new_cluster_id

TOPIC = "waits"
PARTITIONS = 8
APPENDS = 25
DEADLINE_S = 20.0


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Yield to the event loop until ``condition()`` holds; fail after the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0)


def _fetch_request(min_bytes: int) -> object:
    m = request_messages(1, 12)
    parts = tuple(m.make("FetchPartition", partition=p, current_leader_epoch=-1, fetch_offset=0,
                         last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
                  for p in range(PARTITIONS))
    return m.make("FetchRequest", cluster_id=None, replica_id=-1, max_wait=30_000, min_bytes=min_bytes,
                  max_bytes=1 << 24, isolation_level=0, session_id=0, session_epoch=-1,
                  topics=(m.make("FetchTopic", topic=TOPIC, partitions=parts),),
                  forgotten_topics_data=(), rack_id="")


async def _scenario(broker: Broker) -> tuple[int, int, FetchResponse]:
    [result] = await broker.controller.create_topics([CreatableTopic(name=TOPIC, num_partitions=PARTITIONS)])
    assert result.error_code == 0, result
    rm = broker.replica_manager
    await _until(lambda: all((TOPIC, p) in rm.partitions for p in range(PARTITIONS)), "the partitions")
    purgatory = rm.fetch_purgatory
    assert isinstance(purgatory, Purgatory)
    batch = build_batch([SimpleRecord(b"k", b"v" * 100)])
    # Enough bytes only once every append is in: the fetch waits through APPENDS - 1 wakes.
    min_bytes = len(batch) * APPENDS

    reads = 0
    read_code = Log.read.__code__

    def profiler(frame: FrameType, event: str, arg: object) -> None:
        nonlocal reads
        if event == "call" and frame.f_code is read_code:
            reads += 1

    reader, writer = await asyncio.open_connection("127.0.0.1", broker.listeners[0].port)
    sys.setprofile(profiler)
    try:
        writer.write(kafka_wire.encode_request(_fetch_request(min_bytes), 7))
        await writer.drain()
        await _until(lambda: len(purgatory) == PARTITIONS, "the fetch to wait on its partitions")
        reads_at_wait = reads
        response = asyncio.ensure_future(reader.readexactly(4))
        for i in range(APPENDS):
            rm.append_records(TOPIC, 0, batch, 1)
            if i < APPENDS - 1:
                # Woken (its key popped), it checks and waits again on every partition.
                await _until(lambda: len(purgatory) == PARTITIONS, f"the fetch to wait again after append {i}")
                assert not response.done()
        size = int.from_bytes(await asyncio.wait_for(response, DEADLINE_S), "big")
        payload = await reader.readexactly(size)
    finally:
        sys.setprofile(None)
        writer.close()
    correlation_id, body = kafka_wire.decode_response(1, 12, payload)
    assert correlation_id == 7
    return reads_at_wait, reads, body


def test_a_waiting_fetch_is_woken_by_appends_without_re_reading(tmp_path: Path) -> None:
    async def main() -> tuple[int, int, FetchResponse]:
        config = dev_config(tmp_path / "data", 0, {"num.partitions": "1"})
        format_dirs(config, new_cluster_id(), ignore_formatted=True)
        broker = Broker(config)
        await broker.start()
        try:
            return await _scenario(broker)
        finally:
            await broker.stop()

    reads_at_wait, reads, body = asyncio.run(main())
    assert reads == 2 * PARTITIONS, f"{reads} reads of the log for {APPENDS} wakes"
    assert reads_at_wait == PARTITIONS  # the first read, before waiting
    [topic] = body.responses
    by_partition = {int(p.partition_index): p for p in topic.partitions}
    assert by_partition[0].error_code == 0 and by_partition[0].high_watermark == APPENDS
    assert by_partition[0].records is not None and len(by_partition[0].records) >= APPENDS * 60
    assert all(by_partition[p].records in (None, b"") for p in range(1, PARTITIONS))
