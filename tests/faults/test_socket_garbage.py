"""Malformed input on raw sockets: the bad connection is closed (or answered with Kafka's error
code), the broker stays up, and a real client on another connection is unaffected.

Kafka's behaviour being checked:
- a frame it cannot parse (size out of range, unknown API key, truncated body) closes that
  connection without an answer;
- ApiVersions with a version it does not know is answered with a v0 response carrying
  UNSUPPORTED_VERSION (35) and the supported api keys, so the client can downgrade;
- a Produce batch with a bad CRC gets CORRUPT_MESSAGE (2) for its partition and is not appended;
- a Produce v3+ batch whose magic is not 2 gets INVALID_RECORD (87): Kafka's
  ``ProduceRequest.validateRecords`` throws ``InvalidRecordException`` ("Produce requests with
  version N are only allowed to contain record batches with magic version 2") before any
  CRC or format conversion, and ``Errors.forException`` maps it to INVALID_RECORD.
"""

from __future__ import annotations

import datetime
import random
import socket
import struct
from collections.abc import Iterator

import pytest
from ck_helpers import create_topic, make_producer, produce_all, read_partition
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka_wire import connect, encode_request, frame, read_frame, request_header, roundtrip, wait_closed
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.primitive import Records, i16, i32, i32Timedelta

from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.testing import BrokerProcess

CORRUPT_MESSAGE = 2
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87
MAGIC_OFFSET = 16  # base_offset int64, batch_length int32, partition_leader_epoch int32, magic int8


@pytest.fixture
def sock(broker: BrokerProcess) -> Iterator[socket.socket]:
    s = connect(broker.bootstrap)
    try:
        yield s
    finally:
        s.close()


def _client_still_works(broker: BrokerProcess, topic: str) -> None:
    """A confluent-kafka producer and consumer, on their own connections, still round-trip."""
    producer = make_producer(broker.bootstrap)
    recs = produce_all(producer, topic, [{"value": f"ok-{i}".encode()} for i in range(3)])
    first = recs[0].offset
    got = read_partition(broker.bootstrap, topic, 0, 3, first)
    assert [m.value() for m in got] == [b"ok-0", b"ok-1", b"ok-2"]


def _api_versions_ok(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap) as s:
        resp = roundtrip(s, ApiVersionsRequest(client_software_name="strom-tests", client_software_version="1"))
        assert resp.error_code == 0
    assert broker.alive


def _produce_request(topic: str, records: bytes, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        topic_data=(TopicProduceData(name=TopicName(topic), partition_data=(
            PartitionProduceData(index=i32(0), records=Records(records)),)),))


def _latest(broker: BrokerProcess, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)
    return int(admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30).offset)


def test_random_garbage_closes_only_that_connection(broker: BrokerProcess, sock: socket.socket,
                                                    topic_name: str) -> None:
    _client_still_works(broker, topic_name)
    rng = random.Random(1234)
    # A negative size prefix followed by noise.
    sock.sendall(b"\xde\xad\xbe\xef" + rng.randbytes(256))
    assert wait_closed(sock), "broker kept a connection that sent a negative frame size"
    # A well-framed payload of noise whose api key (0xFFxx) is no API.
    with connect(broker.bootstrap) as s2:
        s2.sendall(frame(b"\xff" + rng.randbytes(63)))
        assert wait_closed(s2), "broker kept a connection that sent a garbage frame"
    _client_still_works(broker, topic_name)
    _api_versions_ok(broker)


@pytest.mark.parametrize("size", [0x7FFFFFFF, 0x80000000], ids=["2GiB-1", "2GiB(negative int32)"])
def test_huge_size_prefix_closes(broker: BrokerProcess, sock: socket.socket, size: int) -> None:
    # Only the size is sent: the broker must not wait for (or allocate) 2 GiB.
    sock.sendall(struct.pack(">I", size))
    assert wait_closed(sock), f"broker kept a connection announcing a {size}-byte frame"
    _api_versions_ok(broker)


def test_unknown_api_key_closes(broker: BrokerProcess, sock: socket.socket) -> None:
    sock.sendall(frame(request_header(999, 0, 7, "strom-tests", flexible=False) + b"\x00" * 8))
    assert wait_closed(sock), "broker kept a connection that used api key 999"
    _api_versions_ok(broker)


def test_api_versions_unknown_version_answers_v0_error(broker: BrokerProcess, sock: socket.socket) -> None:
    # What a newer client sends: ApiVersions v99 with a flexible (v2) header and a v3-style body.
    body = b"\x0cstrom-tests\x021\x00"  # compact strings "strom-tests", "1", no tagged fields
    sock.sendall(frame(request_header(18, 99, 42, "strom-tests", flexible=True) + body))
    payload = read_frame(sock)
    assert payload is not None, "broker closed the connection instead of answering ApiVersions v99"
    (correlation_id,) = struct.unpack_from(">i", payload, 0)
    assert correlation_id == 42
    # Response header v0 (no tagged fields), body ApiVersionsResponse v0.
    resp, size = entity_reader(ApiVersionsResponseV0)(payload, 4)
    assert 4 + size == len(payload), "ApiVersions error response is not a v0 body"
    assert int(resp.error_code) == UNSUPPORTED_VERSION
    keys = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
    assert keys, "UNSUPPORTED_VERSION response must still list the supported api keys"
    assert 18 in keys and keys[18][1] >= 3
    assert 0 in keys and 1 in keys  # Produce, Fetch
    # The connection stays usable: the client retries with a version it now knows.
    again = roundtrip(sock, ApiVersionsRequest(client_software_name="strom-tests", client_software_version="1"),
                      correlation_id=43)
    assert int(again.error_code) == 0


def test_truncated_produce_body_closes(broker: BrokerProcess, sock: socket.socket, topic_name: str) -> None:
    batch = build_batch([SimpleRecord(b"k", b"v" * 200)])
    whole = encode_request(_produce_request(topic_name, batch), 5)[4:]
    cut = whole[: len(whole) // 2]
    sock.sendall(frame(cut))  # a consistent size prefix around a body that ends mid-field
    assert wait_closed(sock), "broker kept a connection that sent a truncated Produce body"
    _api_versions_ok(broker)


def test_bad_crc_is_corrupt_message_and_not_appended(broker: BrokerProcess, sock: socket.socket,
                                                     topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, topic_name)
    produce_all(make_producer(broker.bootstrap), topic_name, [{"value": b"before"}])
    assert _latest(broker, topic_name) == 1

    good = build_batch([SimpleRecord(b"key", b"value-" * 20, (("h", b"x"),)) for _ in range(3)])
    bad = bytearray(good)
    bad[-5] ^= 0x40  # inside the records area, which the CRC covers
    resp: ProduceResponse = roundtrip(sock, _produce_request(topic_name, bytes(bad)), correlation_id=11)
    part = resp.responses[0].partition_responses[0]
    assert int(part.error_code) == CORRUPT_MESSAGE, part
    assert _latest(broker, topic_name) == 1, "a batch with a bad CRC was appended"

    # The same connection stays usable and the intact batch lands at the next offset.
    resp = roundtrip(sock, _produce_request(topic_name, good), correlation_id=12)
    part = resp.responses[0].partition_responses[0]
    assert int(part.error_code) == 0 and int(part.base_offset) == 1, part
    got = read_partition(broker.bootstrap, topic_name, 0, 4, 0)
    assert [m.value() for m in got] == [b"before"] + [b"value-" * 20] * 3


def test_magic_1_batch_is_invalid_record(broker: BrokerProcess, sock: socket.socket, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(admin, topic_name)
    batch = bytearray(build_batch([SimpleRecord(b"k", b"v")]))
    batch[MAGIC_OFFSET] = 1
    resp: ProduceResponse = roundtrip(sock, _produce_request(topic_name, bytes(batch)), correlation_id=21)
    part = resp.responses[0].partition_responses[0]
    assert int(part.error_code) == INVALID_RECORD, part
    assert _latest(broker, topic_name) == 0
