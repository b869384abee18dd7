# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, i32Timedelta - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""A minimal blocking Kafka wire client for differential tests, independent of strom's code.

It sends one kio request at a time over a socket and decodes the response, so a test sees the
exact error codes and version ranges a broker answers with, with no client library deciding
things on its own (librdkafka, for one, refuses negative partition counts locally). Record
batches for Produce are built with kafka-python's record builder, another independent
implementation of the format.
"""

from __future__ import annotations

import importlib
import io
import socket
import struct
import time
from datetime import timedelta
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kio.index import load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.serial import entity_reader, entity_writer

API_VERSIONS = 18
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


class WireClient:
    """One connection to one broker; ``request()`` is a blocking round trip."""

    def __init__(self, bootstrap: str, client_id: str = "strom-diff", timeout: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks += chunk
        return bytes(chunks)

    def send_raw(self, api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
        """Send a header + body, return the response frame after the correlation id."""
        self.correlation_id += 1
        cid = self.correlation_id
        client = self.client_id.encode()
        header = _HEADER.pack(api_key, version, cid) + struct.pack(">h", len(client)) + client
        if flexible:
            header += b"\x00"  # no tagged fields in request header v2
        payload = header + body
        self.sock.sendall(_I32.pack(len(payload)) + payload)
        (size,) = _I32.unpack(self._recv_exact(4))
        frame = self._recv_exact(size)
        (got,) = _I32.unpack_from(frame, 0)
        if got != cid:
            raise ConnectionError(f"correlation id {got} != {cid}")
        return frame[4:]

    def request(self, req: Any) -> Any:
        """Encode a kio request entity, send it, decode the matching response entity."""
        api_key, version, flexible = req.__api_key__, req.__version__, req.__flexible__
        buf = io.BytesIO()
        entity_writer(type(req))(buf, req)
        frame = self.send_raw(api_key, version, buf.getvalue(), flexible)
        response_type = load_response_schema(api_key, version)
        pos = 0
        # ApiVersions responses always use response header v0 (no tagged fields).
        if response_type.__flexible__ and api_key != API_VERSIONS:
            count, pos = _read_uvarint(frame, pos)
            for _ in range(count):
                _, pos = _read_uvarint(frame, pos)
                size, pos = _read_uvarint(frame, pos)
                pos += size
        value, _ = entity_reader(response_type)(frame, pos)
        return value

    # -- conveniences ---------------------------------------------------------------------------

    def api_versions(self) -> dict[int, tuple[int, int]]:
        resp = self.request(ApiVersionsRequest(client_software_name="strom-diff",
                                               client_software_version="1"))
        if resp.error_code != 0:
            raise RuntimeError(f"ApiVersions error {resp.error_code}")
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}

    def metadata(self, topics: list[str] | None) -> Any:
        req = MetadataRequest(
            topics=None if topics is None else tuple(MetadataRequestTopic(topic_id=None, name=t) for t in topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        return self.request(req)

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 20.0) -> None:
        """Until Metadata shows a leader for every partition (Kafka's broker learns of a new
        topic from the metadata log shortly after CreateTopics returns)."""
        deadline = time.monotonic() + timeout
        while True:
            meta = self.metadata([topic])
            t = meta.topics[0]
            if t.error_code == 0 and len(t.partitions) == partitions and all(
                    p.error_code == 0 and p.leader_id >= 0 for p in t.partitions):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no leaders for {topic}: {t}")
            time.sleep(0.1)

    def create_topic(self, name: str, partitions: int) -> None:
        """A topic with replication factor 1, once every partition has a leader."""
        resp = self.request(CreateTopicsRequest(topics=(CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()),),
            timeout=seconds(30), validate_only=False))
        assert resp.topics[0].error_code == 0, resp
        self.wait_for_leaders(name, partitions)

    def wait_for_coordinator(self, key: str, key_type: int = 0, timeout: float = 60.0) -> None:
        """Until ``key`` (0 group, 1 transactional id) has a coordinator: Kafka creates its
        internal topic on the first lookup and answers COORDINATOR_NOT_AVAILABLE meanwhile
        (clients retry); strom may still be loading the partition."""
        deadline = time.monotonic() + timeout
        while True:
            resp = self.request(FindCoordinatorRequest(key_type=key_type, coordinator_keys=(key,)))
            if resp.coordinators[0].error_code == 0:
                return
            assert time.monotonic() < deadline, resp
            time.sleep(0.2)

    # -- transactions (KIP-890 differential tests) -------------------------------------------

    def init_producer_id(self, tid: str, timeout_ms: int = 60000, version: int = 5, wait: float = 60.0,
                         producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int, int]:
        """(error, producer id, epoch); retried while the coordinator loads or a previous
        transaction of the id is still completing. ``producer_id``/``producer_epoch`` are the
        ids a producer expects to hold (KIP-360 re-initialisation; -1 for a fresh start)."""
        m = kio_schema("init_producer_id", version)
        deadline = time.monotonic() + wait
        while True:
            resp = self.request(m.InitProducerIdRequest(
                transactional_id=tid, transaction_timeout=timedelta(milliseconds=timeout_ms),
                producer_id=producer_id, producer_epoch=producer_epoch))
            code = int(resp.error_code)
            if code in (*_RETRIABLE_COORDINATOR, CONCURRENT_TRANSACTIONS) and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            return code, int(resp.producer_id), int(resp.producer_epoch)

    def produce_batches(self, batches: dict[tuple[str, int], bytes], version: int = 12,
                        transactional_id: str | None = None, acks: int = -1) -> dict[tuple[str, int], int]:
        """One Produce request; the error code per (topic, partition)."""
        m = kio_schema("produce", version)
        by_topic: dict[str, list[Any]] = {}
        for (topic, p), records in batches.items():
            by_topic.setdefault(topic, []).append(m.PartitionProduceData(index=p, records=records))
        resp = self.request(m.ProduceRequest(
            transactional_id=transactional_id, acks=acks, timeout=timedelta(seconds=30),
            topic_data=tuple(m.TopicProduceData(name=t, partition_data=tuple(ps)) for t, ps in by_topic.items())))
        return {(t.name, int(p.index)): int(p.error_code) for t in resp.responses for p in t.partition_responses}

    def end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool,
                version: int = 5, retry_concurrent: bool = False) -> tuple[int, int, int]:
        """(error, producer id, epoch) of EndTxn; v<5 answers carry no ids (-1, -1)."""
        m = kio_schema("end_txn", version)
        deadline = time.monotonic() + 30
        while True:
            resp = self.request(m.EndTxnRequest(transactional_id=tid, producer_id=producer_id,
                                                producer_epoch=producer_epoch, committed=commit))
            code = int(resp.error_code)
            if retry_concurrent and code == CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            return code, int(getattr(resp, "producer_id", -1)), int(getattr(resp, "producer_epoch", -1))

    def add_partitions_v3(self, tid: str, producer_id: int, producer_epoch: int,
                          parts: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        """Client-side AddPartitionsToTxn v3 (the TV1 way); the error per partition."""
        m = kio_schema("add_partitions_to_txn", 3)
        resp = self.request(m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=producer_epoch,
            v3_and_below_topics=tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                                      for t, ps in parts.items())))
        return {(r.name, int(p.partition_index)): int(p.partition_error_code)
                for r in resp.results_by_topic_v3_and_below for p in r.results_by_partition}

    def add_partitions_v5(self, transactions: list[tuple[str, int, int, bool, dict[str, list[int]]]]
                          ) -> tuple[int, dict[str, dict[tuple[str, int], int]]]:
        """The broker-to-coordinator AddPartitionsToTxn v5 (batched; VerifyOnly per transaction):
        ``(transactional id, producer id, epoch, verify only, {topic: partitions})`` each. The
        top-level error and the error per transaction and partition."""
        m = kio_schema("add_partitions_to_txn", 5)
        resp = self.request(m.AddPartitionsToTxnRequest(transactions=tuple(
            m.AddPartitionsToTxnTransaction(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify_only,
                topics=tuple(m.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in parts.items()))
            for tid, pid, epoch, verify_only, parts in transactions)))
        return int(resp.error_code), {
            r.transactional_id: {(t.name, int(p.partition_index)): int(p.partition_error_code)
                                 for t in r.topic_results for p in t.results_by_partition}
            for r in resp.results_by_transaction}

    def describe_transactions(self, ids: tuple[str, ...]) -> list[dict[str, Any]]:
        """DescribeTransactions v0, decoded by hand, as dicts named like the schema's fields."""
        body = _uvarint(len(ids) + 1) + b"".join(_uvarint(len(t.encode()) + 1) + t.encode() for t in ids) + b"\x00"
        r = _RawReader(self.send_raw(65, 0, body, flexible=True))
        r.skip_tags()  # response header v1
        r.fixed(">i")  # throttle
        out = []
        for _ in range(r.uvarint() - 1):
            s: dict[str, Any] = {"error_code": r.fixed(">h"), "transactional_id": r.string(),
                                 "transaction_state": r.string(), "transaction_timeout_ms": r.fixed(">i"),
                                 "transaction_start_time_ms": r.fixed(">q"), "producer_id": r.fixed(">q"),
                                 "producer_epoch": r.fixed(">h"), "topics": []}
            for _ in range(r.uvarint() - 1):
                topic = r.string()
                s["topics"].append((topic, sorted(r.fixed(">i") for _ in range(r.uvarint() - 1))))
                r.skip_tags()
            r.skip_tags()
            out.append(s)
        return out

    def wait_txn_state(self, tid: str, states: tuple[str, ...],
                       timeout: float = 30.0) -> dict[str, Any]:
        """DescribeTransactions until the id is in one of ``states``; that description."""
        deadline = time.monotonic() + timeout
        while True:
            d = self.describe_transactions((tid,))[0]
            if d["transaction_state"] in states:
                return d
            if time.monotonic() > deadline:
                raise TimeoutError(f"{tid} never reached {states}: {d}")
            time.sleep(0.1)

    def list_offset(self, topic: str, partition: int, isolation: int, timestamp: int = -1) -> int:
        """ListOffsets v9 (latest by default): the high watermark (isolation 0) or the last
        stable offset (isolation 1)."""
        m = kio_schema("list_offsets", 9)
        resp = self.request(m.ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(
            m.ListOffsetsTopic(name=topic, partitions=(m.ListOffsetsPartition(
                partition_index=partition, timestamp=timestamp),)),)))
        p = resp.topics[0].partitions[0]
        if p.error_code != 0:
            raise RuntimeError(f"ListOffsets {topic}-{partition}: error {p.error_code}")
        return int(p.offset)

    def fetch_log(self, topic: str, partition: int, isolation: int) -> dict[str, Any]:
        """Fetch v12 from offset 0: the partition's error, high watermark, last stable offset,
        aborted transactions and batches (base offset, control, transactional, producer id,
        epoch, base sequence, record values - a control record's value is its raw bytes)."""
        m = kio_schema("fetch", 12)
        resp = self.request(m.FetchRequest(
            max_wait=timedelta(milliseconds=0), min_bytes=0, isolation_level=isolation,
            topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
                partition=partition, fetch_offset=0, partition_max_bytes=1 << 20),)),),
            forgotten_topics_data=()))
        p = resp.responses[0].partitions[0]
        batches = []
        records = MemoryRecords(bytes(p.records or b""))
        while (batch := records.next_batch()) is not None:
            batches.append({"base_offset": batch.base_offset, "control": batch.is_control_batch,
                            "transactional": batch.is_transactional, "producer_id": batch.producer_id,
                            "producer_epoch": batch.producer_epoch, "base_sequence": batch.base_sequence,
                            "values": [r.key if batch.is_control_batch else r.value for r in batch]})
        return {"error_code": int(p.error_code), "high_watermark": int(p.high_watermark),
                "last_stable_offset": int(p.last_stable_offset),
                "aborted": sorted((int(a.producer_id), int(a.first_offset)) for a in p.aborted_transactions or ()),
                "batches": batches}


def build_batch(records: list[tuple[bytes | None, bytes | None]], timestamp_ms: int | None = None) -> bytes:
    """A RecordBatch v2 (uncompressed) with the given (key, value) records."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


def seconds(s: float) -> timedelta:
    return timedelta(seconds=s)


# -- transactions (KIP-890 differential tests) ---------------------------------------------------

_RETRIABLE_COORDINATOR = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
CONCURRENT_TRANSACTIONS = 51


def build_txn_batch(values: list[bytes], producer_id: int, producer_epoch: int, base_sequence: int,
                    transactional: bool = True) -> bytes:
    """A RecordBatch v2 from a transactional (or idempotent) producer, keyless records."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=1 << 20)
    ts = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=ts, key=None, value=value, headers=[])
    return bytes(builder.build())


def kio_schema(api: str, version: int, kind: str = "request") -> Any:
    """The kio module of one API version, e.g. ``kiokio_schema("produce", 11)``."""
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def incremental_alter_configs(bootstrap: str, resource_type: int, name: str,
                              ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 of one resource, (key, operation, value) each (operation: 0 SET,
    1 DELETE, 2 APPEND, 3 SUBTRACT): the broker's (error code, error message)."""
    m = kio_schema("incremental_alter_configs", 1)
    req = m.IncrementalAlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=tuple(m.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops)),),
        validate_only=False)
    with WireClient(bootstrap) as c:
        r = c.request(req).responses[0]
    return int(r.error_code), r.error_message


class _RawReader:
    """Decodes flexible responses by hand where kio's types refuse valid values (DescribeTransactions
    answers a start time of -1 for a transactional id with nothing in flight)."""

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        value, self.pos = _read_uvarint(self.buf, self.pos)
        return value

    def string(self) -> str:
        n = self.uvarint() - 1
        self.pos += n
        return self.buf[self.pos - n:self.pos].decode()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def assert_case_matches(case: str, ours: dict[str, Any], theirs: dict[str, Any],
                        kafka_expected: dict[str, Any]) -> None:
    """One observation of a recorded scenario: Kafka must have answered as documented (when
    ``kafka_expected`` has the case) and strom as Kafka. A scenario that stopped early names its
    crash (``seen["crashed"]``) instead of a bare KeyError."""
    assert case in theirs, f"Kafka's scenario did not get this far: {theirs.get('crashed')}"
    if case in kafka_expected:
        assert theirs[case] == kafka_expected[case], f"Kafka did not answer as documented: {theirs[case]}"
    assert case in ours, f"strom's scenario did not get this far: {ours.get('crashed')}"
    assert ours[case] == theirs[case], f"\nstrom: {ours[case]}\nKafka: {theirs[case]}"


def visible(fetched: dict[str, Any]) -> list[bytes]:
    """What a read_committed consumer keeps of ``WireClient.fetch_log``'s answer: data of producers not inside an aborted transaction."""
    aborted = sorted(fetched["aborted"], key=lambda a: a[1])
    aborting: set[int] = set()
    out: list[bytes] = []
    for b in fetched["batches"]:
        while aborted and aborted[0][1] <= b["base_offset"]:
            aborting.add(aborted.pop(0)[0])
        if b["control"]:
            aborting.discard(b["producer_id"])
        elif b["producer_id"] not in aborting:
            out.extend(b["values"])
    return out
