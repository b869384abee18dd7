"""Request header parsing and kio round trips of the protocol layer."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.serial import entity_writer

from strom.core.protocol import codec
from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import response_messages


def _request_frame(api_key: int, version: int, correlation: int, client_id: str | None, body: bytes,
                   flexible: bool) -> bytes:
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    return struct.pack(">hhi", api_key, version, correlation) + cid + (b"\x00" if flexible else b"") + body


@given(st.integers(-(2**31), 2**31 - 1), st.one_of(st.none(), st.text(max_size=50)))
def test_header_round_trip(correlation: int, client_id: str | None) -> None:
    frame = _request_frame(18, 3, correlation, client_id, b"", flexible=False)
    header, pos = codec.parse_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 3, correlation)
    assert header.client_id == client_id
    assert pos == len(frame)


def test_metadata_request_decodes_with_kio() -> None:
    body = io.BytesIO()
    req = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName("orders")),),
                          allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    entity_writer(MetadataRequest)(body, req)
    frame = _request_frame(3, 12, 7, "c", body.getvalue(), flexible=True)
    header, pos = codec.parse_header(frame)
    decoded = codec.decode_request(header, frame, pos)
    assert decoded.topics[0].name == "orders"
    assert decoded.allow_auto_topic_creation is False


@pytest.mark.parametrize("frame", [b"", b"\x00\x03", b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x10abc"])
def test_short_or_truncated_header_is_malformed(frame: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        codec.parse_header(frame)


def test_trailing_bytes_after_body_are_ignored_like_kafka() -> None:
    body = io.BytesIO()
    entity_writer(MetadataRequest)(body, MetadataRequest(topics=None, allow_auto_topic_creation=True,
                                                         include_topic_authorized_operations=False))
    frame = _request_frame(3, 12, 1, None, body.getvalue() + b"junk", flexible=True)
    header, pos = codec.parse_header(frame)
    assert codec.decode_request(header, frame, pos).topics is None


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    m = response_messages(18, 3)
    resp = m.make("ApiVersionsResponse", error_code=0, api_keys=(), throttle_time=0)
    out = codec.encode_response(18, 3, 42, resp)
    size, correlation = struct.unpack_from(">ii", out)
    assert size == len(out) - 4 and correlation == 42
    # header v0: the error code follows the correlation id directly (no tag byte)
    assert out[8:10] == b"\x00\x00"


def test_messages_drop_fields_missing_in_old_versions() -> None:
    m = response_messages(0, 3)  # Produce v3 has no log_start_offset / record_errors
    p = m.make("PartitionProduceResponse", index=0, error_code=2, base_offset=-1, log_append_time=-1,
               log_start_offset=5, record_errors=(), error_message="x")
    assert int(p.error_code) == 2 and not hasattr(p, "log_start_offset")
