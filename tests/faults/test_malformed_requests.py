"""Requests that decoded badly, or decoded into values a handler did not expect, on a real broker.

Issue 20, item 1: a frame's announced lengths are checked before kio's native reader sees them
(strom.core.protocol.frame_check), so the 20-byte requests that aborted the process close only
their own connection; null in a non-nullable array closes the connection with one line naming
the API, version and field instead of a traceback per frame; unknown tagged fields are skipped
as Kafka skips them. And what the fuzzer found in handlers: CreateTopics/CreatePartitions asking
for 2^24 partitions (Kafka: POLICY_VIOLATION past 10,000 records per request) and Metadata
v10-11 naming a topic by id only (Kafka: INVALID_REQUEST).
"""

from __future__ import annotations

import datetime
import socket
import struct
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_wire import connect, decode_response, frame, read_frame, request_header, roundtrip, wait_closed
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.metadata.v11.request import MetadataRequest as MetadataRequestV11
from kio.schema.metadata.v11.request import MetadataRequestTopic as MetadataRequestTopicV11
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

from strom.core.protocol import fuzz
from strom.core.testing import BrokerProcess

POLICY_VIOLATION = 44
INVALID_REQUEST = 42
TOPIC = "malformed"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker of this module's own: its log is read for the lines these frames cause."""
    with BrokerProcess(tmp_path_factory.mktemp("malformed")) as proc:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        yield proc


def _api_versions(sock: socket.socket, correlation_id: int) -> None:
    resp = roundtrip(sock, ApiVersionsRequest(client_software_name="strom-tests", client_software_version="1"),
                     correlation_id=correlation_id)
    assert int(resp.error_code) == 0


@pytest.mark.parametrize("name", sorted(fuzz.KILLERS))
def test_killer_closes_only_its_connection(broker: BrokerProcess, name: str) -> None:
    api_key, version = fuzz.KILLERS[name]
    with connect(broker.bootstrap) as bystander, connect(broker.bootstrap) as attacker:
        _api_versions(bystander, 1)
        attacker.sendall(fuzz.killer_frame(api_key, version))
        assert wait_closed(attacker), f"broker kept the connection that sent the {name} killer"
        assert broker.alive, f"the 20-byte {name} request killed the broker:\n{broker.log_text()[-3000:]}"
        _api_versions(bystander, 2)  # the other connection is served as before
    assert broker.wait_for_log(f"{name} request"), "no log line names the API and version of the bad frame"


def test_null_in_non_nullable_array_closes_with_one_line(broker: BrokerProcess) -> None:
    # DescribeGroups v5 whose groups array is null (compact length 0): kio decoded it as None
    # and the handler raised, logging a traceback per frame.
    with connect(broker.bootstrap) as sock:
        sock.sendall(frame(request_header(15, 5, 3, "strom-tests", flexible=True) + b"\x00\x00\x00"))
        assert wait_closed(sock)
    assert broker.wait_for_log("non-nullable field groups was serialized as null")
    assert "Traceback" not in broker.log_text()
    assert broker.alive


def test_unknown_tagged_fields_are_skipped(broker: BrokerProcess) -> None:
    # Metadata v12 with unknown tagged fields in the header, the body and the topic struct: a
    # valid request (KIP-482) that kio's reader refused, closing the connection.
    unknown = b"\x01\x2a\x03abc"  # one tagged field, tag 42, three bytes
    name = TOPIC.encode()
    body = (b"\x02" + uuid.UUID(int=0).bytes + bytes([len(name) + 1]) + name + unknown
            + b"\x00\x00" + unknown)
    header = request_header(3, 12, 4, "strom-tests", flexible=False) + b"\x01\x63\x00"
    with connect(broker.bootstrap) as sock:
        sock.sendall(frame(header + body))
        payload = read_frame(sock)
        assert payload is not None, "broker closed the connection on unknown tagged fields"
        correlation_id, resp = decode_response(3, 12, payload)
    assert correlation_id == 4
    assert [(t.name, int(t.error_code), len(t.partitions)) for t in resp.topics] == [(TOPIC, 0, 1)]


def _create_topics(partitions: int, name: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(CreatableTopic(name=TopicName(name), num_partitions=i32(partitions), replication_factor=i16(1),
                               assignments=(), configs=()),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)), validate_only=True)


def test_create_topics_past_kafkas_record_limit_is_policy_violation(broker: BrokerProcess) -> None:
    # 2^24 partitions kept the controller busy for a minute (validate-only!) with every other
    # request waiting; Kafka refuses more than 10,000 metadata records per request.
    with connect(broker.bootstrap) as sock:
        resp = roundtrip(sock, _create_topics(1 << 24, "too-many-partitions"), correlation_id=5)
        [result] = resp.topics
        assert (int(result.error_code), result.error_message) == (
            POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
        resp = roundtrip(sock, _create_topics(9000, "many-partitions"), correlation_id=6)
        assert int(resp.topics[0].error_code) == 0  # under the limit: validated as before


def test_create_partitions_past_kafkas_record_limit_is_policy_violation(broker: BrokerProcess) -> None:
    request = CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=TopicName(TOPIC), count=i32(1 << 24), assignments=None),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)), validate_only=True)
    with connect(broker.bootstrap) as sock:
        resp = roundtrip(sock, request, correlation_id=7)
    [result] = resp.results
    assert (int(result.error_code), result.error_message) == (
        POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


def test_metadata_v11_by_topic_id_is_invalid_request(broker: BrokerProcess) -> None:
    # Topic ids in Metadata requests exist from v12; a v11 request with a null name crashed the
    # response writer (names are not nullable in v11 responses). Kafka answers INVALID_REQUEST.
    request = MetadataRequestV11(
        topics=(MetadataRequestTopicV11(topic_id=uuid.UUID(int=9), name=None),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with connect(broker.bootstrap) as sock:
        resp = roundtrip(sock, request, correlation_id=8)
        assert [(t.name, int(t.error_code)) for t in resp.topics] == [("", INVALID_REQUEST)]
        _api_versions(sock, 9)  # and the connection stays open
    assert broker.alive


def test_classic_lengths_past_the_frame_close(broker: BrokerProcess) -> None:
    # DescribeGroups v0 announcing 0x7fffffff groups, and a group name of -2 bytes.
    for body in (struct.pack(">i", 0x7FFFFFFF), struct.pack(">ih", 1, -2)):
        with connect(broker.bootstrap) as sock:
            sock.sendall(frame(request_header(15, 0, 10, "strom-tests", flexible=False) + body))
            assert wait_closed(sock)
    assert broker.alive


def test_no_traceback_in_the_log(broker: BrokerProcess) -> None:
    # Last in this module: none of the frames above logged a traceback or an ERROR.
    assert broker.alive
    text = broker.log_text()
    assert "Traceback" not in text and " ERROR " not in text, text[-5000:]
