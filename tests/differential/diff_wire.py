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

import io
import socket
import struct
import time
from datetime import timedelta
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
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
