"""Broker CPU per transaction: the lever behind issue 3's transactional/idempotent ratio.

The end-to-end benchmark (``bench/txn_java.py``) shares two cores between the client and the
broker, so its ratio moves with the host. This script takes the client and the sockets away and
measures the broker alone: a real in-process :class:`~strom.core.server.broker.Broker` (controller,
logs, replica manager, coordinators) is handed whole request frames through ``Broker.dispatch``,
the way the listener hands them over, so request decoding, the handlers, the implicit add of
KIP-890, the two-phase commit, the markers and the response encoding are all counted. Only the
socket reads and writes are not.

Two workloads of the same records (100-byte values, 3 partitions), in the request shapes of one
client (``--client``, ``SHAPES``):

* ``java`` (default; the Java client at its default ``batch.size=16384``, transaction version 2):
  **idempotent**, Produce v13 requests of 3 x 148-record batches, one per partition;
  **transactional**, per transaction of 999 records, 3 Produce v13 requests of 3 x 111-record
  transactional batches (the first one adds the partitions to the transaction) and EndTxn v5;
* ``librdkafka`` (confluent-kafka at ``groups_txn.py``'s settings, transaction version 1):
  **idempotent**, Produce v10 requests of one 333-record batch, the partitions in turn;
  **transactional**, per transaction of 999 records, AddPartitionsToTxn v0 for the 3 partitions,
  3 Produce v10 requests of one 333-record transactional batch (the leader verifies each
  partition is in the transaction) and EndTxn v1.

Each transaction ends with the markers the coordinator writes after answering EndTxn.
CompleteCommit lingers and is written in one batch with the next transaction's Ongoing, so it
is counted in the next transaction's first request. ``--gap-us`` makes the broker idle before
each request, as it does between a real client's requests.

It prints the broker's CPU per 1,000 records for both, their ratio (the broker-bound limit of
the throughput ratio), and where a transaction's CPU goes. Every response is checked, and at
the end each partition's log must hold every record, one COMMIT marker per transaction, and a
last stable offset equal to its log end.

``--transport socket`` sends the same frames to a broker *process* over one TCP connection, one
request in flight, and reads the broker's CPU (all its threads, in nanoseconds) from its process
CPU clock: the socket layer and the event loop are counted too, and the client is a Python loop
with no per-record work of its own. One broker process serves every round (the unmeasured first
one warms it), each round on its own topics and transactional id. The logs are then checked with
ListOffsets (log end and last stable offset per partition); the split of a transaction's CPU by
step is in-process only.

    python bench/txn_broker_cpu.py [--transactions 300] [--repeat 5] [--transport in-process|socket]
                                   [--client java|librdkafka] [--gap-us 0] [--json out.json]
                                   [--profile txn.prof]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import functools
import io
import json
import os
import platform
import socket
import statistics
import struct
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import crc32c
from kio.schema.add_partitions_to_txn.v0.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.end_txn.v1.request import EndTxnRequest as EndTxnRequestV1
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.list_offsets.v8.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v10.request import PartitionProduceData as PartitionProduceDataV10
from kio.schema.produce.v10.request import ProduceRequest as ProduceRequestV10
from kio.schema.produce.v10.request import TopicProduceData as TopicProduceDataV10
from kio.schema.produce.v13.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import BrokerId, ProducerId, TopicName, TransactionalId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from strom.core.controller.quorum_controller import CreatableTopic
from strom.core.coordinator.txn.coordinator import TransactionCoordinator
from strom.core.protocol import codec
from strom.core.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, PRODUCER_ID_OFFSET
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.server.broker import Broker
from strom.core.server.context import RequestContext
from strom.core.tools.run import dev_config
from strom.core.tools.storage import format_dirs, new_cluster_id

PARTITIONS = 3
VALUE = b"v" * 100
TXN_RECORDS = 1000
TOPIC = "bench-txn-cpu"
TXN_ID = "bench-txn-cpu-producer"
_SIZE = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
_CRC = struct.Struct(">I")
BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "50", "offsets.topic.num.partitions": "1",
                    "num.partitions": "1"}


@dataclass(frozen=True)
class Shape:
    """How one client turns issue 3's workload into requests, as it was seen sending it."""

    name: str
    produce_version: int
    partitions_per_request: int  # batches per Produce request, one per partition
    idempotent_batch: int        # records per batch, idempotent
    txn_batch: int               # records per batch in a transaction
    add_partitions: bool         # AddPartitionsToTxn v0 first (TV1); else the first Produce adds them (TV2)
    end_txn_version: int         # 5: TV2, the epoch is bumped and sequences restart; 1: TV1

    def __post_init__(self) -> None:
        # The request plans give every partition the same batches in turn: one batch per
        # partition per request (all partitions, or one), whole rounds of the partitions.
        if self.partitions_per_request not in (1, PARTITIONS):
            raise ValueError(f"{self.name}: a request holds one partition or all {PARTITIONS}")
        if self.produces_per_txn * self.partitions_per_request % PARTITIONS:
            raise ValueError(f"{self.name}: a transaction must give every partition as many batches")

    @property
    def produces_per_txn(self) -> int:
        return TXN_RECORDS // (self.partitions_per_request * self.txn_batch)

    @property
    def records_per_txn(self) -> int:
        return self.produces_per_txn * self.partitions_per_request * self.txn_batch

    @property
    def parts(self) -> tuple[str, ...]:
        """The steps a transaction's broker CPU is split into (in-process)."""
        if self.add_partitions:
            return ("AddPartitionsToTxn", "Produces", "EndTxn", "markers")
        return ("first Produce (adds the partitions)", "other Produces", "EndTxn", "markers")

    def describe(self) -> str:
        add = "AddPartitionsToTxn v0, " if self.add_partitions else ""
        return (f"{add}Produce v{self.produce_version} of {self.partitions_per_request} batch(es), "
                f"EndTxn v{self.end_txn_version}")


SHAPES = {
    # The Java client at its defaults (batch.size=16384), transaction version 2: 1,000 records over
    # 3 partitions are 3 Produce requests of one ~111-record batch per partition; idempotent
    # requests carry a full 16 KiB batch (148 records) per partition.
    "java": Shape("java", 13, PARTITIONS, 148, 111, add_partitions=False, end_txn_version=5),
    # librdkafka (confluent-kafka) at groups_txn.py's settings, as its debug log shows it: one
    # partition per Produce request (v10), AddPartitionsToTxn v0 at the commit, EndTxn v1 (TV1:
    # the epoch stays, sequences go on); 1,000 records are 3 Produces of ~333 records.
    "librdkafka": Shape("librdkafka", 10, 1, 333, 333, add_partitions=True, end_txn_version=1),
}


@dataclass
class Round:
    mode: str
    records: int
    cpu_s: float
    wall_s: float
    requests: int
    parts_us: dict[str, float] = field(default_factory=dict)  # per transaction, by step

    @property
    def us_per_1000(self) -> float:
        return 1e6 * self.cpu_s / self.records * 1000


def request_frame(entity: Any, correlation_id: int) -> bytes:
    """A request payload (header v2, or v1 for a version that is not flexible, then the body; no
    size prefix), as the listener passes it on."""
    body = io.BytesIO()
    entity_writer(type(entity))(body, entity)
    client = b"bench"
    header = struct.pack(">hhih", int(entity.__api_key__), int(entity.__version__), correlation_id, len(client))
    tags = b"\x00" if type(entity).__flexible__ else b""
    return header + client + tags + body.getvalue()


# Sent after each transactional slice over a socket (see Transactional._run_over_socket).
_API_VERSIONS = request_frame(ApiVersionsRequest(client_software_name="bench", client_software_version="1"), 0)


class InProcessClient:
    """Sends request frames to a broker through ``dispatch`` and decodes the answers.

    ``gap_s``: this thread sleeps that long before each request, as the broker idles between a
    client's requests (a sleeping thread's CPU time does not advance: only what an idle gap does
    to the next request's cost is counted). Before, not after the answer: work the broker starts
    when it answers (EndTxn's markers) runs right after it, as in a broker process, and the
    next request meets the idle. The sleep blocks the event loop, so a timer (CompleteX's 5 ms
    linger) cannot fire inside a gap."""

    # The broker runs on this thread: its CPU is this thread's.
    cpu = staticmethod(time.thread_time)

    def __init__(self, broker: Broker, gap_s: float = 0.0) -> None:
        self.broker = broker
        self.correlation = 0
        self.gap_s = gap_s

    async def send(self, payload: bytes) -> bytes:
        if self.gap_s:
            time.sleep(self.gap_s)
        header, body_pos = codec.parse_header(payload)
        ctx = RequestContext(header.api_key, header.api_version, header.correlation_id, header.client_id or "",
                             "127.0.0.1:1", "PLAINTEXT", "PLAINTEXT")
        response = await self.broker.dispatch(ctx, header, payload, body_pos)
        assert response is not None
        return b"".join(response) if isinstance(response, list) else bytes(response)

    async def call(self, entity: Any) -> Any:
        self.correlation += 1
        raw = await self.send(request_frame(entity, self.correlation))
        return decode_response(int(entity.__api_key__), int(entity.__version__), raw)


def process_cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid`` so far: all its threads, ended ones included, in nanoseconds.

    Linux's CPU clock of another process (``clock_getcpuclockid``'s id, which Python does not wrap:
    ``~pid << 3 | CPUCLOCK_SCHED``), brought up to date when read. ``/proc/<pid>/stat`` counts in
    10 ms ticks, too coarse for slices of a few tens of milliseconds.
    """
    return time.clock_gettime(((~pid) << 3) | 2)


class SocketClient:
    """Sends the same request frames to a broker process over one TCP connection, one at a time."""

    def __init__(self, bootstrap: str, broker_pid: int, gap_s: float = 0.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.broker_pid = broker_pid
        self.correlation = 0
        self.gap_s = gap_s  # as InProcessClient's: the broker idles this long before each request

    def cpu(self) -> float:
        return process_cpu_s(self.broker_pid)

    async def send(self, payload: bytes) -> bytes:
        """One request frame out, its whole response frame (size prefix included) back."""
        if self.gap_s:
            time.sleep(self.gap_s)
        self.sock.sendall(_SIZE.pack(len(payload)) + payload)
        head = self._read(4)
        return head + self._read(_SIZE.unpack(head)[0])

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"the broker closed the connection {len(buf)} bytes into a {n}-byte read")
            buf += chunk
        return bytes(buf)

    async def call(self, entity: Any) -> Any:
        self.correlation += 1
        raw = await self.send(request_frame(entity, self.correlation))
        return decode_response(int(entity.__api_key__), int(entity.__version__), raw)

    def close(self) -> None:
        self.sock.close()


Client = InProcessClient | SocketClient


def decode_response(api_key: int, version: int, raw: bytes) -> Any:
    """The body of a whole response frame (size, correlation id, the header's empty tags if any, body)."""
    cls = codec.response_class(api_key, version)
    # size, correlation id, then the header's tag section for a flexible version (not ApiVersions')
    header_end = 4 + 4 + (1 if cls.__flexible__ and api_key != codec.API_VERSIONS_KEY else 0)
    body, _size = entity_reader(cls)(raw, header_end)
    return body


def _txn_id(name: str | None) -> TransactionalId | None:
    return None if name is None else TransactionalId(name)


class Topic(NamedTuple):
    """A topic as Produce names it: by id from v13, by name before."""

    name: str
    topic_id: uuid.UUID


_TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))


def produce_request(topic: Topic, batches: dict[int, bytes], transactional_id: str | None,
                    version: int = 13) -> ProduceRequest | ProduceRequestV10:
    """acks=all; ``batches``: partition -> its one batch."""
    if version == 13:
        return ProduceRequest(transactional_id=_txn_id(transactional_id), acks=i16(-1), timeout=_TIMEOUT,
                              topic_data=(TopicProduceData(topic_id=topic.topic_id, partition_data=tuple(
                                  PartitionProduceData(index=i32(p), records=Records(b)) for p, b in batches.items())),))
    if version == 10:
        return ProduceRequestV10(transactional_id=_txn_id(transactional_id), acks=i16(-1), timeout=_TIMEOUT,
                                 topic_data=(TopicProduceDataV10(name=TopicName(topic.name), partition_data=tuple(
                                     PartitionProduceDataV10(index=i32(p), records=Records(b))
                                     for p, b in batches.items())),))
    raise ValueError(f"Produce v{version}: the workloads send v10 or v13")


def check_produce(raw: bytes, version: int = 13) -> None:
    """Every partition of a Produce response answered without error."""
    resp = decode_response(0, version, raw)
    for topic in resp.responses:
        for part in topic.partition_responses:
            if part.error_code != 0:
                raise RuntimeError(f"Produce answered {part.error_code!r} for partition {part.index}")


def check_add_partitions(raw: bytes) -> None:
    """Every partition of an AddPartitionsToTxn v0 response was added."""
    for topic in decode_response(24, 0, raw).results_by_topic_v3_and_below:
        for part in topic.results_by_partition:
            if part.partition_error_code != 0:
                raise RuntimeError(f"AddPartitionsToTxn answered {part.partition_error_code!r} for "
                                   f"partition {part.partition_index}")


async def start_broker(data_dir: Path) -> Broker:
    config = dev_config(data_dir, 0, BROKER_OVERRIDES)
    format_dirs(config, new_cluster_id(), ignore_formatted=True, features=["transaction.version=2"])
    broker = Broker(config)
    await broker.start()
    return broker


async def create_topic(broker: Broker, name: str) -> Topic:
    [result] = await broker.metadata.controller.create_topics([CreatableTopic(name=name, num_partitions=PARTITIONS)])
    if result.error_code != 0:
        raise RuntimeError(f"cannot create {name}: {result}")
    for _ in range(1000):
        if all((name, p) in broker.replica_manager.partitions for p in range(PARTITIONS)):
            topic_id = broker.image.topic_id(name)
            assert topic_id is not None
            return Topic(name, topic_id)
        await asyncio.sleep(0.01)
    raise RuntimeError(f"{name}'s partitions never appeared")


@functools.cache
def _template(count: int, transactional: bool) -> bytes:
    return build_batch([SimpleRecord(None, VALUE) for _ in range(count)], producer_id=0, producer_epoch=0,
                       base_sequence=0, transactional=transactional)


def batch(count: int, producer_id: int, epoch: int, sequence: int, transactional: bool) -> bytes:
    """``count`` records of VALUE from one producer: a built batch with its producer fields and CRC
    patched (building each of a run's thousands of batches record by record took longer than the run)."""
    buf = bytearray(_template(count, transactional))
    _PRODUCER.pack_into(buf, PRODUCER_ID_OFFSET, producer_id, epoch, sequence)
    _CRC.pack_into(buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


async def init_producer(client: Client, transactional_id: str | None) -> tuple[int, int]:
    init = await client.call(InitProducerIdRequest(
        transactional_id=_txn_id(transactional_id),
        transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        producer_id=ProducerId(-1), producer_epoch=i16(-1)))
    if init.error_code != 0:
        raise RuntimeError(f"InitProducerId answered {init.error_code!r}")
    return int(init.producer_id), int(init.producer_epoch)


class Idempotent:
    """Produce requests of an idempotent producer, sent in slices."""

    def __init__(self, client: Client, topic: Topic, records: int, producer: tuple[int, int],
                 shape: Shape = SHAPES["java"]) -> None:
        pid, epoch = producer
        self.client = client
        self.shape = shape
        size, per_request = shape.idempotent_batch, shape.partitions_per_request
        self.records_per_request = size * per_request
        self.frames = []
        sequences = [0] * PARTITIONS
        requests = records // self.records_per_request
        requests -= requests % (PARTITIONS // per_request)  # every partition gets as many batches
        for r in range(requests):
            # One batch per partition; a request of fewer partitions takes the next ones in turn.
            parts = [(r * per_request + k) % PARTITIONS for k in range(per_request)]
            batches = {}
            for part in sorted(parts):
                batches[part] = batch(size, pid, epoch, sequences[part], False)
                sequences[part] += size
            self.frames.append(request_frame(produce_request(topic, batches, None, shape.produce_version), r + 1))
        self.sent = 0
        self.round = Round("idempotent", 0, 0.0, 0.0, 0)

    async def run(self, requests: int) -> None:
        frames = self.frames[self.sent:self.sent + requests]
        cpu0, wall0 = self.client.cpu(), time.perf_counter()
        answers = [await self.client.send(f) for f in frames]
        self.round.cpu_s += self.client.cpu() - cpu0
        self.round.wall_s += time.perf_counter() - wall0
        for raw in answers:
            check_produce(raw, self.shape.produce_version)
        self.sent += len(frames)
        self.round.requests += len(frames)
        self.round.records += len(frames) * self.records_per_request


# A request of a transaction: what it is ("add", "produce" or "end"), the part of the split it is
# counted in, and its frame.
Step = tuple[str, str, bytes]


class Transactional:
    """Transactions of a transactional producer in the shape of one client (``Shape``), in slices:
    its requests, then the markers the coordinator writes after answering EndTxn."""

    def __init__(self, broker: Broker | None, client: Client, topic: Topic, transactions: int,
                 producer: tuple[int, int], txn_id: str = TXN_ID, shape: Shape = SHAPES["java"]) -> None:
        """``broker``: the in-process broker, whose coordinator is watched for the markers and
        whose CPU is split by step; None over a socket (totals only)."""
        pid, epoch0 = producer
        self.client = client
        self.txn_id = txn_id
        self.shape = shape
        self.coordinator: TransactionCoordinator | None = broker.txn_coordinator if broker else None
        self.plan: list[list[Step]] = [self._transaction(t, topic, pid, epoch0) for t in range(transactions)]
        self.done = 0
        self.round = Round("transactional", 0, 0.0, 0.0, 0,
                           dict.fromkeys(shape.parts, 0.0) if self.coordinator else {})

    def _transaction(self, t: int, topic: Topic, pid: int, epoch0: int) -> list[Step]:
        shape, tid = self.shape, self.txn_id
        size, per_request = shape.txn_batch, shape.partitions_per_request
        first, other, end_part = shape.parts[0], shape.parts[1], shape.parts[2]
        steps: list[Step] = []
        if shape.add_partitions:
            steps.append(("add", first, request_frame(AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TransactionalId(tid), v3_and_below_producer_id=ProducerId(pid),
                v3_and_below_producer_epoch=i16(epoch0), v3_and_below_topics=(AddPartitionsToTxnTopic(
                    name=TopicName(topic.name), partitions=tuple(i32(p) for p in range(PARTITIONS))),)), 1)))
        if shape.end_txn_version >= 5:
            # Transaction version 2: every EndTxn bumps the epoch, and sequences restart at 0.
            epoch, done_before = epoch0 + t, 0
        else:
            epoch, done_before = epoch0, t * shape.produces_per_txn * per_request // PARTITIONS
        for r in range(shape.produces_per_txn):
            parts = [(r * per_request + k) % PARTITIONS for k in range(per_request)]
            batches = {part: batch(size, pid, epoch, (done_before + r * per_request // PARTITIONS) * size, True)
                       for part in sorted(parts)}
            part_name = other if shape.add_partitions or r else first
            steps.append(("produce", part_name, request_frame(
                produce_request(topic, batches, tid, shape.produce_version), 1)))
        if shape.end_txn_version >= 5:
            end: Any = EndTxnRequest(transactional_id=TransactionalId(tid), producer_id=ProducerId(pid),
                                     producer_epoch=i16(epoch), committed=True)
        else:
            end = EndTxnRequestV1(transactional_id=TransactionalId(tid), producer_id=ProducerId(pid),
                                  producer_epoch=i16(epoch), committed=True)
        steps.append(("end", end_part, request_frame(end, 2)))
        return steps

    def first_produce(self, transaction: int) -> bytes:
        """The frame of a planned transaction's first Produce (the tests open a transaction with it)."""
        return next(frame for kind, _, frame in self.plan[transaction] if kind == "produce")

    async def run(self, transactions: int, profiler: cProfile.Profile | None = None) -> None:
        if self.coordinator is None:
            await self._run_over_socket(transactions)
            return
        clock = time.thread_time
        parts = self.round.parts_us
        answers: list[tuple[str, bytes]] = []
        plan = self.plan[self.done:self.done + transactions]
        markers = self.shape.parts[3]
        if profiler:
            profiler.enable()
        cpu0, wall0 = clock(), time.perf_counter()
        for steps in plan:
            for kind, part, frame in steps:
                t0 = clock()
                answers.append((kind, await self.client.send(frame)))
                parts[part] += clock() - t0
            t0 = clock()
            # The coordinator writes the markers after answering: let that task run to the end.
            while self.coordinator.txns[self.txn_id].state.name != "COMPLETE_COMMIT":
                await asyncio.sleep(0)
            parts[markers] += clock() - t0
        self.round.cpu_s += clock() - cpu0
        self.round.wall_s += time.perf_counter() - wall0
        if profiler:
            profiler.disable()
        self._account(answers)

    async def _run_over_socket(self, transactions: int) -> None:
        """The coordinator writes a transaction's markers in a task it starts when it answers
        EndTxn, so they may still be running when that answer arrives here. That task runs before
        the broker reads the connection's next request: one ApiVersions round trip after the
        slice puts the last transaction's markers into the slice's CPU (the next transaction's
        requests already wait for the previous one's markers the same way)."""
        answers: list[tuple[str, bytes]] = []
        send = self.client.send
        cpu0, wall0 = self.client.cpu(), time.perf_counter()
        for steps in self.plan[self.done:self.done + transactions]:
            for kind, _part, frame in steps:
                answers.append((kind, await send(frame)))
        await send(_API_VERSIONS)
        self.round.cpu_s += self.client.cpu() - cpu0
        self.round.wall_s += time.perf_counter() - wall0
        self._account(answers)

    def _account(self, answers: list[tuple[str, bytes]]) -> None:
        """Check every answer, then count the transactions, requests and records sent."""
        shape = self.shape
        for kind, raw in answers:
            if kind == "produce":
                check_produce(raw, shape.produce_version)
            elif kind == "add":
                check_add_partitions(raw)
            elif (code := decode_response(26, shape.end_txn_version, raw).error_code) != 0:
                raise RuntimeError(f"EndTxn answered {code!r}")
        self.done += sum(kind == "end" for kind, _ in answers)
        self.round.requests += len(answers)
        self.round.records += sum(kind == "produce" for kind, _ in answers) * shape.partitions_per_request * \
            shape.txn_batch

    def finish(self) -> Round:
        """The round, with the per-step CPU turned into microseconds per transaction."""
        self.round.parts_us = {k: 1e6 * v / self.done for k, v in self.round.parts_us.items()}
        return self.round


def verify(broker: Broker, idempotent: int, transactional: int, transactions: int) -> None:
    """Each partition holds every record, one marker per transaction, and nothing is unstable."""
    for p in range(PARTITIONS):
        for topic, records, markers in ((TOPIC + "-idem", idempotent, 0), (TOPIC + "-txn", transactional, transactions)):
            part = broker.replica_manager.get_partition(topic, p)
            want = records // PARTITIONS + markers
            if part.log.log_end_offset != want:
                raise RuntimeError(f"{topic}-{p}: log end {part.log.log_end_offset}, expected {want}")
            if part.last_stable_offset != part.log.log_end_offset:
                raise RuntimeError(f"{topic}-{p}: last stable offset {part.last_stable_offset} "
                                   f"< log end {part.log.log_end_offset}")


async def verify_over_socket(client: SocketClient, topics: tuple[str, str], idempotent: int, transactional: int,
                             transactions: int) -> None:
    """``verify`` through ListOffsets on the (idempotent, transactional) ``topics``: each partition's
    high watermark (its log end, on one replica) holds every record and marker, and its last
    stable offset (read_committed) has caught up."""
    for topic, records, markers in ((topics[0], idempotent, 0), (topics[1], transactional, transactions)):
        latest: dict[tuple[int, int], int] = {}
        for isolation in (0, 1):
            resp = await client.call(ListOffsetsRequest(
                replica_id=BrokerId(-1), isolation_level=i8(isolation), topics=(ListOffsetsTopic(
                    name=TopicName(topic), partitions=tuple(ListOffsetsPartition(
                        partition_index=i32(p), current_leader_epoch=i32(-1), timestamp=i64(-1))
                        for p in range(PARTITIONS))),)))
            for t in resp.topics:
                for part in t.partitions:
                    if part.error_code != 0:
                        raise RuntimeError(f"ListOffsets answered {part.error_code!r} for {topic}-{part.partition_index}")
                    latest[(isolation, int(part.partition_index))] = int(part.offset)
        want = records // PARTITIONS + markers
        for p in range(PARTITIONS):
            hw, lso = latest[(0, p)], latest[(1, p)]
            if hw != want:
                raise RuntimeError(f"{topic}-{p}: log end {hw}, expected {want}")
            if lso != hw:
                raise RuntimeError(f"{topic}-{p}: last stable offset {lso} < log end {hw}")


async def topic_id_over_socket(client: SocketClient, name: str) -> uuid.UUID:
    resp = await client.call(MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName(name)),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    (topic,) = resp.topics
    if topic.error_code != 0:
        raise RuntimeError(f"Metadata answered {topic.error_code!r} for {name}")
    return topic.topic_id


async def alternate(idem: Idempotent, txn: Transactional, transactions: int, slices: int,
                    profiler: cProfile.Profile | None = None) -> None:
    """Both workloads in ``slices`` turns each, so a change in the machine's speed meets both."""
    per_slice = -(-transactions // slices)
    while txn.done < transactions:
        await idem.run(-(-len(idem.frames) * per_slice // transactions))
        await txn.run(per_slice, profiler)
    await idem.run(len(idem.frames))  # whatever rounding left over


async def one_round(transactions: int, slices: int, profile: Path | None = None, shape: Shape = SHAPES["java"],
                    gap_s: float = 0.0) -> tuple[Round, Round]:
    """Both workloads on one fresh in-process broker."""
    with tempfile.TemporaryDirectory(prefix="strom-txn-cpu-") as tmp:
        broker = await start_broker(Path(tmp))
        try:
            client = InProcessClient(broker, gap_s)
            idem_topic = await create_topic(broker, TOPIC + "-idem")
            txn_topic = await create_topic(broker, TOPIC + "-txn")
            idem = Idempotent(client, idem_topic, transactions * TXN_RECORDS, await init_producer(client, None), shape)
            txn = Transactional(broker, client, txn_topic, transactions, await init_producer(client, TXN_ID),
                                shape=shape)
            profiler = cProfile.Profile() if profile else None
            await alternate(idem, txn, transactions, slices, profiler)
            if profiler and profile:
                profiler.dump_stats(str(profile))
            verify(broker, idem.round.records, txn.round.records, transactions)
            return idem.round, txn.finish()
        finally:
            await broker.stop()


class SocketRounds:
    """One broker process for every round of ``--transport socket``, so the unmeasured first round
    warms it as the in-process rounds warm this interpreter; each round gets its own topics and
    transactional id."""

    def __init__(self, shape: Shape = SHAPES["java"], gap_s: float = 0.0) -> None:
        from peers import StromBroker  # imported for this mode only: peers loads confluent-kafka

        self.broker = StromBroker(config=BROKER_OVERRIDES, features={"transaction.version": 2}).start()
        self.rounds = 0
        self.shape = shape
        self.gap_s = gap_s

    async def open_round(self, transactions: int) -> tuple[SocketClient, tuple[str, str], Idempotent, Transactional]:
        """A new connection, the round's (idempotent, transactional) topics, and both workloads on
        them; the caller closes the client."""
        from broker_throughput import create_topic as create_topic_with_admin

        self.rounds += 1
        tag = f"-{self.rounds}"
        names = (TOPIC + "-idem" + tag, TOPIC + "-txn" + tag)
        client = SocketClient(self.broker.bootstrap, self.broker.pid, self.gap_s)
        try:
            topics = []
            for name in names:
                create_topic_with_admin(self.broker.bootstrap, name, PARTITIONS)
                topics.append(Topic(name, await topic_id_over_socket(client, name)))
            idem = Idempotent(client, topics[0], transactions * TXN_RECORDS, await init_producer(client, None),
                              self.shape)
            txn = Transactional(None, client, topics[1], transactions, await init_producer(client, TXN_ID + tag),
                                txn_id=TXN_ID + tag, shape=self.shape)
        except BaseException:
            client.close()
            raise
        return client, names, idem, txn

    async def round(self, transactions: int, slices: int) -> tuple[Round, Round]:
        client, names, idem, txn = await self.open_round(transactions)
        try:
            await alternate(idem, txn, transactions, slices)
            await verify_over_socket(client, names, idem.round.records, txn.round.records, transactions)
            return idem.round, txn.finish()
        finally:
            client.close()

    def stop(self) -> None:
        self.broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=300, help="transactions per round (default 300)")
    parser.add_argument("--repeat", type=int, default=5, help="measured rounds, after one unmeasured (default 5)")
    parser.add_argument("--slices", type=int, default=10,
                        help="the workloads alternate in this many slices per round (default 10)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--profile", type=Path,
                        help="cProfile the last round's transactional phase into this file (pstats format; "
                             "in-process only)")
    parser.add_argument("--transport", choices=("in-process", "socket"), default="in-process",
                        help="in-process (default): frames through Broker.dispatch on this thread; socket: "
                             "to a broker process over TCP, its CPU from its process CPU clock")
    parser.add_argument("--client", choices=tuple(SHAPES), default="java",
                        help="whose request shape: java (default; TV2, Produce v13 of 3 batches) or librdkafka "
                             "(TV1: AddPartitionsToTxn, Produce v10 of one batch, EndTxn v1)")
    parser.add_argument("--gap-us", type=float, default=0.0,
                        help="the broker idles this long before each request (default 0), as it does between a "
                             "real client's requests")
    args = parser.parse_args()
    if args.profile and args.transport != "in-process":
        parser.error("--profile needs --transport in-process (the broker runs in another process)")
    if args.gap_us < 0:
        parser.error("--gap-us must be >= 0")
    args.shape = SHAPES[args.client]

    rounds: list[tuple[Round, Round]] = []
    over_socket = SocketRounds(args.shape, args.gap_us / 1e6) if args.transport == "socket" else None
    try:
        measure(args, rounds, over_socket)
    finally:
        if over_socket is not None:
            over_socket.stop()
    report(args, rounds)
    return 0


def measure(args: argparse.Namespace, rounds: list[tuple[Round, Round]], over_socket: SocketRounds | None) -> None:
    """The unmeasured first round, then ``--repeat`` measured ones, appended to ``rounds``."""
    for i in range(args.repeat + 1):
        label = "warm-up round" if i == 0 else f"round {i}/{args.repeat}"
        profile = args.profile if i == args.repeat else None
        if over_socket is not None:
            idem, txn = asyncio.run(over_socket.round(args.transactions, args.slices))
        else:
            idem, txn = asyncio.run(one_round(args.transactions, args.slices, profile, args.shape, args.gap_us / 1e6))
        print(f"  [{label}] idempotent {idem.us_per_1000:,.0f} us, transactional {txn.us_per_1000:,.0f} us "
              f"of broker CPU per 1,000 records; verified", file=sys.stderr, flush=True)
        if i > 0:
            rounds.append((idem, txn))


def report(args: argparse.Namespace, rounds: list[tuple[Round, Round]]) -> None:
    ratios = [i.us_per_1000 / t.us_per_1000 for i, t in rounds]
    idem_med = statistics.median(i.us_per_1000 for i, _ in rounds)
    txn_med = statistics.median(t.us_per_1000 for _, t in rounds)
    where = "in process" if args.transport == "in-process" else "broker process over one TCP connection"
    gap = f", {args.gap_us:,.0f} us idle before each request" if args.gap_us else ""
    print(f"broker CPU per 1,000 records of 100 B, {where} ({PARTITIONS} partitions, {args.client}'s requests: "
          f"{args.shape.describe()}{gap}; {args.transactions} transactions of {TXN_RECORDS:,} per round; "
          f"median of {args.repeat})")
    print(f"{'workload':>14}  {'us / 1,000 records':>18}  {'requests / 1,000':>16}")
    print(f"{'idempotent':>14}  {idem_med:>18,.0f}  {rounds[0][0].requests / rounds[0][0].records * 1000:>16.2f}")
    print(f"{'transactional':>14}  {txn_med:>18,.0f}  {rounds[0][1].requests / rounds[0][1].records * 1000:>16.2f}")
    print(f"idempotent / transactional broker CPU: {statistics.median(ratios):.2f} "
          f"(per round {', '.join(f'{r:.2f}' for r in ratios)}): the throughput ratio a broker-bound run could reach")
    mid = sorted(rounds, key=lambda r: r[1].us_per_1000)[len(rounds) // 2][1]
    if mid.parts_us:
        print("where a transaction's broker CPU goes (us, median round):")
        for name, us in mid.parts_us.items():
            print(f"  {name:<38} {us:>8,.0f}")
    if args.json:
        args.json.write_text(json.dumps({
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "transport": args.transport,
            "client": args.client,
            "gap_us": args.gap_us,
            "transactions": args.transactions,
            "rounds": [{"idempotent": asdict(i), "transactional": asdict(t)} for i, t in rounds],
        }, indent=2))


if __name__ == "__main__":
    sys.exit(main())
