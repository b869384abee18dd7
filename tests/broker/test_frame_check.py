"""The request frame check (strom.core.protocol.frame_check) in front of kio's native reader.

No broker here: these call ``codec.decode_request`` on frames, which is what the socket layer
does with every request. The broker-level behaviour (one connection closed, the rest served)
is in tests/faults/test_malformed_requests.py and test_fuzz_protocol.py.
"""

from __future__ import annotations

import io
import struct
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

from strom.core.protocol import codec, fuzz
from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.server.handlers import registry

VERSIONS = {key: handler.VERSIONS for key, handler in registry().items()}
SEEDS = fuzz.build_seeds(VERSIONS, fuzz.SeedContext(topic_id=uuid.UUID(int=7),
                                                    records=build_batch([SimpleRecord(b"k", b"v" * 40)])))


def _decode(payload: bytes) -> Any:
    header, pos = codec.parse_header(payload)
    return codec.decode_request(header, payload, pos)


def _payload(api_key: int, version: int, body: bytes, *, header_tags: bytes = b"\x00") -> bytes:
    flexible = bool(load_request_schema(api_key, version).__flexible__)
    return struct.pack(">hhih", api_key, version, 1, 4) + b"test" + (header_tags if flexible else b"") + body


def _body(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def test_every_advertised_version_has_seeds() -> None:
    assert {(s.api_key, s.version) for s in SEEDS} == {
        (key, v) for key, (lo, hi) in VERSIONS.items() for v in range(lo, hi + 1)}


@pytest.mark.parametrize("seed", SEEDS, ids=[f"{s.label}-{i % 2}" for i, s in enumerate(SEEDS)])
def test_valid_requests_pass_and_decode_as_kio_reads_them(seed: fuzz.Seed) -> None:
    expected, _ = entity_reader(load_request_schema(seed.api_key, seed.version))(seed.body, 0)
    assert _decode(_payload(seed.api_key, seed.version, seed.body)) == expected


@pytest.mark.parametrize("name", sorted(fuzz.KILLERS))
def test_issue_20_killers_are_malformed_not_fatal(name: str) -> None:
    # Before the check, kio reserved room for 4 billion elements and the process aborted.
    api_key, version = fuzz.KILLERS[name]
    frame = fuzz.killer_frame(api_key, version)
    assert len(frame) == 20
    with pytest.raises(MalformedRequestError, match=rf"{name} request .*4294967295"):
        _decode(frame[4:])


@pytest.mark.parametrize(("api_key", "version", "body", "needle"), [
    # DescribeGroups v5: a null (compact 0) groups array; kio handed None to the handler.
    (15, 5, b"\x00\x00\x00", "non-nullable field groups was serialized as null"),
    # DescribeGroups v0: a classic null (-1) groups array.
    (15, 0, b"\xff\xff\xff\xff", "non-nullable field groups was serialized as null"),
    # Metadata v4: 0x7fffffff topics in a 5-byte body.
    (3, 4, b"\x7f\xff\xff\xff\x01", "Tried to allocate a collection of size 2147483647"),
    # DescribeGroups v5: a group name of 0x8000 bytes (Kafka's generated readers refuse > 0x7fff).
    (15, 5, b"\x02\x81\x80\x02" + b"g" * 0x8000 + b"\x00\x00", "string field groups[] had invalid length 32768"),
    # DescribeGroups v5: a six-byte varint.
    (15, 5, b"\xff\xff\xff\xff\xff\x01\x00\x00", "Varint is too long"),
    # DescribeGroups v1: a classic string length of -2.
    (15, 1, b"\x00\x00\x00\x01\xff\xfe", "had negative length -2"),
    # Metadata v12: a tagged-field section announcing 2^28 fields in 3 bytes.
    (3, 12, b"\x01\x01\x00\xff\xff\xff\x7f", "Tried to allocate a collection of size 268435455"),
    # Metadata v12: an unknown tagged field whose size runs past the frame.
    (3, 12, b"\x01\x01\x00\x01\x09\xff\xff\x03", "past the end of the frame"),
])
def test_malformed_bodies_name_api_version_and_fault(api_key: int, version: int, body: bytes, needle: str) -> None:
    name = load_request_schema(api_key, version).__name__.removesuffix("Request")
    with pytest.raises(MalformedRequestError) as info:
        _decode(_payload(api_key, version, body))
    assert f"{name} v{version}" in str(info.value)
    assert needle in str(info.value)


def test_unknown_tagged_fields_are_skipped_as_kafka_does() -> None:
    # Metadata v12 with unknown tags in the request header, the body and a nested topic struct:
    # kio's reader raised KeyError on each; Kafka keeps them as unknown tagged fields.
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.types import TopicName

    topic = uuid.UUID(int=5)
    unknown = b"\x02" + b"\x07\x03abc" + b"\x2a\x00"  # two unknown tags: 7 (3 bytes) and 42 (empty)
    body = (b"\x02" + topic.bytes + b"\x07orders" + unknown  # one topic, its own unknown tags
            + b"\x01\x00" + unknown)  # allow_auto_topic_creation, include_topic_authorized_operations
    decoded = _decode(_payload(3, 12, body, header_tags=b"\x01\x63\x01\x00"))
    assert decoded == MetadataRequest(topics=(MetadataRequestTopic(topic_id=topic, name=TopicName("orders")),),
                                      allow_auto_topic_creation=True, include_topic_authorized_operations=False)


def test_unknown_tag_inside_a_known_tagged_field_resizes_it() -> None:
    # Fetch v15's replica_state is tagged field 1; an unknown tag inside it is cut out and the
    # field's size rewritten, so kio reads what the client meant.
    seed = next(s for s in SEEDS if (s.api_key, s.version) == (1, 15))
    assert seed.body.endswith(b"\x00")
    replica_state = struct.pack(">iq", 3, 9) + b"\x01\x55\x02zz"  # replica_id, epoch, unknown tag 85
    body = seed.body[:-1] + b"\x01" + b"\x01" + bytes([len(replica_state)]) + replica_state
    decoded = _decode(_payload(1, 15, body))
    assert (decoded.replica_state.replica_id, decoded.replica_state.replica_epoch) == (3, 9)


def test_known_tagged_field_must_fill_its_size() -> None:
    # kio reads a known tag's value and ignores the size; a size that lies would desynchronise it.
    seed = next(s for s in SEEDS if (s.api_key, s.version) == (1, 15))
    replica_state = struct.pack(">iq", 3, 9) + b"\x00"
    body = seed.body[:-1] + b"\x01" + b"\x01" + bytes([len(replica_state) + 2]) + replica_state + b"\x00\x00"
    with pytest.raises(MalformedRequestError, match=r"replica_state .*does not fill its 15 bytes"):
        _decode(_payload(1, 15, body))


def test_mutated_frames_raise_only_malformed_request_error() -> None:
    # The fuzzer's mutations through the decoder alone: a frame either decodes or raises
    # MalformedRequestError (no KeyError, no PanicException, no abort).
    mutator = fuzz.Mutator(SEEDS, 20, VERSIONS)
    outcomes = {"decoded": 0, "malformed": 0}
    for i in range(20_000):
        frame, _kind = mutator.frame(i)
        payload = frame[4:]
        try:
            header, pos = codec.parse_header(payload)
            lo, hi = VERSIONS.get(header.api_key, (1, 0))
            if not lo <= header.api_version <= hi:
                continue
            codec.decode_request(header, payload, pos)
            outcomes["decoded"] += 1
        except MalformedRequestError:
            outcomes["malformed"] += 1
    assert outcomes["decoded"] > 2000 and outcomes["malformed"] > 5000, outcomes
