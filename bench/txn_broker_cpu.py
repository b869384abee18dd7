"""Broker CPU per transaction: the lever behind issue 3's transactional/idempotent ratio.

The end-to-end benchmark (``bench/txn_java.py``) shares two cores between the client and the
broker, so its ratio moves with the host. This script takes the client and the sockets away and
measures the broker alone: a real in-process :class:`~strom.core.server.broker.Broker` (controller,
logs, replica manager, coordinators) is handed whole request frames through ``Broker.dispatch``,
the way the listener hands them over, so request decoding, the handlers, the implicit add of
KIP-890, the two-phase commit, the markers and the response encoding are all counted. Only the
socket reads and writes are not.

Two workloads of the same records (100-byte values, 3 partitions, one batch per partition per
Produce request, as the Java client sends them at its default ``batch.size=16384``):

* **idempotent**: Produce v13 requests of 3 x 148-record batches, an idempotent producer id;
* **transactional**: per transaction of 1,000 records, 3 Produce v13 requests of 3 x 111-record
  transactional batches (the first one adds the partitions to the transaction), EndTxn v5
  (commit, transaction version 2), then the markers the coordinator writes after answering.
  CompleteCommit lingers and is written in one batch with the next transaction's Ongoing, so it
  is counted in the next first Produce.

It prints the broker's CPU per 1,000 records for both, their ratio (the broker-bound limit of
the throughput ratio), and where a transaction's CPU goes. Every response is checked, and at
the end each partition's log must hold every record, one COMMIT marker per transaction, and a
last stable offset equal to its log end.

    python bench/txn_broker_cpu.py [--transactions 300] [--repeat 5] [--json out.json] [--profile txn.prof]
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
import statistics
import struct
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import crc32c
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.produce.v13.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i64

from strom.core.controller.quorum_controller import CreatableTopic
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
TXN_BATCH = 111      # 1,000 records over 3 partitions at batch.size 16384: 3 batches of ~111 each
IDEMPOTENT_BATCH = 148  # a full 16 KiB batch of 100-byte records
TOPIC = "bench-txn-cpu"
TXN_ID = "bench-txn-cpu-producer"
_SIZE = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
_CRC = struct.Struct(">I")


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
    """A request payload (header v2 + body, no size prefix), as the listener passes it on."""
    body = io.BytesIO()
    entity_writer(type(entity))(body, entity)
    client = b"bench"
    header = struct.pack(">hhih", int(entity.__api_key__), int(entity.__version__), correlation_id, len(client))
    return header + client + b"\x00" + body.getvalue()


class InProcessClient:
    """Sends request frames to a broker through ``dispatch`` and decodes the answers."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.correlation = 0

    async def send(self, payload: bytes) -> bytes:
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


def decode_response(api_key: int, version: int, raw: bytes) -> Any:
    """The body of a whole response frame (size, correlation id, empty header tags, body)."""
    body, _size = entity_reader(codec.response_class(api_key, version))(raw, 4 + 4 + 1)
    return body


def produce_request(topic_id: uuid.UUID, batches: list[bytes], transactional_id: str | None) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id, acks=i16(-1), timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(topic_id=topic_id, partition_data=tuple(
            PartitionProduceData(index=i32(p), records=b) for p, b in enumerate(batches))),))


def check_produce(raw: bytes) -> None:
    """Every partition of a Produce response answered without error (header-level parse)."""
    resp = decode_response(0, 13, raw)
    for topic in resp.responses:
        for part in topic.partition_responses:
            if part.error_code != 0:
                raise RuntimeError(f"Produce answered {part.error_code!r} for partition {part.index}")


async def start_broker(data_dir: Path) -> Broker:
    config = dev_config(data_dir, 0, {"transaction.state.log.num.partitions": "50",
                                      "offsets.topic.num.partitions": "1", "num.partitions": "1"})
    format_dirs(config, new_cluster_id(), ignore_formatted=True, features=["transaction.version=2"])
    broker = Broker(config)
    await broker.start()
    return broker


async def create_topic(broker: Broker, name: str) -> uuid.UUID:
    [result] = await broker.metadata.controller.create_topics([CreatableTopic(name=name, num_partitions=PARTITIONS)])
    if result.error_code != 0:
        raise RuntimeError(f"cannot create {name}: {result}")
    for _ in range(1000):
        if all((name, p) in broker.replica_manager.partitions for p in range(PARTITIONS)):
            topic_id = broker.image.topic_id(name)
            assert topic_id is not None
            return topic_id
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


async def init_producer(client: InProcessClient, transactional_id: str | None) -> tuple[int, int]:
    init = await client.call(InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=i64(-1), producer_epoch=i16(-1)))
    if init.error_code != 0:
        raise RuntimeError(f"InitProducerId answered {init.error_code!r}")
    return int(init.producer_id), int(init.producer_epoch)


class Idempotent:
    """Produce requests of an idempotent producer, sent in slices."""

    def __init__(self, client: InProcessClient, topic_id: uuid.UUID, records: int, producer: tuple[int, int]) -> None:
        pid, epoch = producer
        self.client = client
        requests = records // (PARTITIONS * IDEMPOTENT_BATCH)
        self.frames = [request_frame(produce_request(
            topic_id, [batch(IDEMPOTENT_BATCH, pid, epoch, r * IDEMPOTENT_BATCH, False)] * PARTITIONS, None), r + 1)
            for r in range(requests)]
        self.sent = 0
        self.round = Round("idempotent", 0, 0.0, 0.0, 0)

    async def run(self, requests: int) -> None:
        frames = self.frames[self.sent:self.sent + requests]
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        answers = [await self.client.send(f) for f in frames]
        self.round.cpu_s += time.thread_time() - cpu0
        self.round.wall_s += time.perf_counter() - wall0
        for raw in answers:
            check_produce(raw)
        self.sent += len(frames)
        self.round.requests += len(frames)
        self.round.records += len(frames) * PARTITIONS * IDEMPOTENT_BATCH


class Transactional:
    """Transactions of a TV2 transactional producer (3 Produce requests and EndTxn each), in slices."""

    PARTS = ("first Produce (adds the partitions)", "other Produces", "EndTxn", "markers")

    def __init__(self, broker: Broker, client: InProcessClient, topic_id: uuid.UUID, transactions: int,
                 producer: tuple[int, int]) -> None:
        pid, epoch0 = producer
        self.client = client
        self.coordinator = broker.txn_coordinator
        per_partition = TXN_RECORDS // PARTITIONS // TXN_BATCH   # 3 requests per transaction
        # Under transaction version 2 every EndTxn bumps the epoch, and sequences restart at 0.
        self.plan = []
        for t in range(transactions):
            epoch = epoch0 + t
            produces = [request_frame(produce_request(
                topic_id, [batch(TXN_BATCH, pid, epoch, r * TXN_BATCH, True)] * PARTITIONS, TXN_ID), 1)
                for r in range(per_partition)]
            end = request_frame(EndTxnRequest(transactional_id=TXN_ID, producer_id=i64(pid),
                                              producer_epoch=i16(epoch), committed=True), 2)
            self.plan.append((produces, end))
        self.done = 0
        self.round = Round("transactional", 0, 0.0, 0.0, 0, dict.fromkeys(self.PARTS, 0.0))

    async def run(self, transactions: int, profiler: cProfile.Profile | None = None) -> None:
        clock = time.thread_time
        parts = self.round.parts_us
        answers: list[bytes] = []
        ends: list[bytes] = []
        plan = self.plan[self.done:self.done + transactions]
        if profiler:
            profiler.enable()
        cpu0, wall0 = clock(), time.perf_counter()
        for produces, end in plan:
            t0 = clock()
            answers.append(await self.client.send(produces[0]))
            t1 = clock()
            for f in produces[1:]:
                answers.append(await self.client.send(f))
            t2 = clock()
            ends.append(await self.client.send(end))
            t3 = clock()
            # The coordinator writes the markers after answering: let that task run to the end.
            while self.coordinator.txns[TXN_ID].state.name != "COMPLETE_COMMIT":
                await asyncio.sleep(0)
            t4 = clock()
            parts[self.PARTS[0]] += t1 - t0
            parts[self.PARTS[1]] += t2 - t1
            parts[self.PARTS[2]] += t3 - t2
            parts[self.PARTS[3]] += t4 - t3
        self.round.cpu_s += clock() - cpu0
        self.round.wall_s += time.perf_counter() - wall0
        if profiler:
            profiler.disable()
        for raw in answers:
            check_produce(raw)
        for raw in ends:
            if (code := decode_response(26, 5, raw).error_code) != 0:
                raise RuntimeError(f"EndTxn answered {code!r}")
        self.done += len(plan)
        self.round.requests += len(answers) + len(ends)
        self.round.records += len(answers) * PARTITIONS * TXN_BATCH

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


async def one_round(transactions: int, slices: int, profile: Path | None = None) -> tuple[Round, Round]:
    """Both workloads on one fresh broker, alternating in ``slices`` so both meet the same noise."""
    with tempfile.TemporaryDirectory(prefix="strom-txn-cpu-") as tmp:
        broker = await start_broker(Path(tmp))
        try:
            client = InProcessClient(broker)
            idem_topic = await create_topic(broker, TOPIC + "-idem")
            txn_topic = await create_topic(broker, TOPIC + "-txn")
            idem = Idempotent(client, idem_topic, transactions * TXN_RECORDS, await init_producer(client, None))
            txn = Transactional(broker, client, txn_topic, transactions, await init_producer(client, TXN_ID))
            profiler = cProfile.Profile() if profile else None
            per_slice = -(-transactions // slices)
            while txn.done < transactions:
                await idem.run(-(-len(idem.frames) * per_slice // transactions))
                await txn.run(per_slice, profiler)
            await idem.run(len(idem.frames))  # whatever rounding left over
            if profiler and profile:
                profiler.dump_stats(str(profile))
            verify(broker, idem.round.records, txn.round.records, transactions)
            return idem.round, txn.finish()
        finally:
            await broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=300, help="transactions per round (default 300)")
    parser.add_argument("--repeat", type=int, default=5, help="measured rounds, after one unmeasured (default 5)")
    parser.add_argument("--slices", type=int, default=10,
                        help="the workloads alternate in this many slices per round (default 10)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--profile", type=Path,
                        help="cProfile the last round's transactional phase into this file (pstats format)")
    args = parser.parse_args()

    rounds: list[tuple[Round, Round]] = []
    for i in range(args.repeat + 1):
        label = "warm-up round" if i == 0 else f"round {i}/{args.repeat}"
        profile = args.profile if i == args.repeat else None
        idem, txn = asyncio.run(one_round(args.transactions, args.slices, profile))
        print(f"  [{label}] idempotent {idem.us_per_1000:,.0f} us, transactional {txn.us_per_1000:,.0f} us "
              f"of broker CPU per 1,000 records; verified", file=sys.stderr, flush=True)
        if i > 0:
            rounds.append((idem, txn))

    ratios = [i.us_per_1000 / t.us_per_1000 for i, t in rounds]
    idem_med = statistics.median(i.us_per_1000 for i, _ in rounds)
    txn_med = statistics.median(t.us_per_1000 for _, t in rounds)
    print(f"broker CPU per 1,000 records of 100 B, in process ({PARTITIONS} partitions, Produce v13, EndTxn v5, "
          f"{args.transactions} transactions of {TXN_RECORDS:,} per round; median of {args.repeat})")
    print(f"{'workload':>14}  {'us / 1,000 records':>18}  {'requests / 1,000':>16}")
    print(f"{'idempotent':>14}  {idem_med:>18,.0f}  {rounds[0][0].requests / rounds[0][0].records * 1000:>16.2f}")
    print(f"{'transactional':>14}  {txn_med:>18,.0f}  {rounds[0][1].requests / rounds[0][1].records * 1000:>16.2f}")
    print(f"idempotent / transactional broker CPU: {statistics.median(ratios):.2f} "
          f"(per round {', '.join(f'{r:.2f}' for r in ratios)}): the throughput ratio a broker-bound run could reach")
    print("where a transaction's broker CPU goes (us, median round):")
    mid = sorted(rounds, key=lambda r: r[1].us_per_1000)[len(rounds) // 2][1]
    for name, us in mid.parts_us.items():
        print(f"  {name:<38} {us:>8,.0f}")
    if args.json:
        args.json.write_text(json.dumps({
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "transactions": args.transactions,
            "rounds": [{"idempotent": asdict(i), "transactional": asdict(t)} for i, t in rounds],
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
