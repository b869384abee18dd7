"""Request/response framing on top of kio.

A request frame (after the 4-byte size) is a request header — v1, or v2 for flexible API
versions — followed by the request body. Each body is checked against its schema
first (``frame_check``: no announced length is trusted), then kio's native reader decodes it;
kio's writer encodes response bodies. Readers and writers are built once per (api key, version) and cached.
ApiVersions responses always use response header v0, so that a client that spoke a version
we do not know can still read the error.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.frame_check import check_request, skip_tagged_fields

API_VERSIONS_KEY = 18

_HEADER = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Parse the fixed part of a request header (v1 layout); returns the header and the body position.

    Tagged fields of a v2 header are skipped by :func:`skip_header_tags` once the caller knows
    the API version is flexible.
    """
    if len(frame) < 10:
        raise MalformedRequestError(f"request frame of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
    (n,) = _I16.unpack_from(frame, 8)
    pos = 10
    client_id: str | None = None
    if n >= 0:
        if pos + n > len(frame):
            raise MalformedRequestError("client id runs past the end of the frame")
        try:
            client_id = bytes(frame[pos:pos + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedRequestError("client id is not valid UTF-8") from None
        pos += n
    elif n != -1:
        raise MalformedRequestError(f"negative client id length {n}")
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def skip_header_tags(frame: bytes | memoryview, pos: int) -> int:
    """Skip a v2 request header's tagged fields (strom reads none of them)."""
    return skip_tagged_fields(frame, pos, "request header")


@cache
def request_class(api_key: int, version: int) -> type[Any]:
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type[Any]:
    return load_response_schema(api_key, version)


@cache
def _reader(api_key: int, version: int) -> Any:
    return entity_reader(request_class(api_key, version))


@cache
def _writer(api_key: int, version: int) -> Any:
    return entity_writer(response_class(api_key, version))


def is_flexible(api_key: int, version: int) -> bool:
    return bool(request_class(api_key, version).__flexible__)


def decode_request(header: RequestHeader, frame: bytes | memoryview, body_pos: int) -> Any:
    """Decode the body of a request whose version we support.

    The frame is checked against the request's schema first (``frame_check``): kio's native
    reader trusts announced lengths, and a compact array of 0xffffffff elements aborts the
    process before any exception can be raised.
    """
    frame, pos = check_request(header.api_key, header.api_version, frame, body_pos)
    try:
        body, _size = _reader(header.api_key, header.api_version)(frame, pos)
    except BaseException as e:
        # kio raises assorted errors on malformed input, and a panic in its Rust code surfaces
        # as pyo3's PanicException, which derives from BaseException.
        if not isinstance(e, Exception) and type(e).__name__ != "PanicException":
            raise
        raise MalformedRequestError(
            f"cannot read {request_class(header.api_key, header.api_version).__name__.removesuffix('Request')} "
            f"v{header.api_version} request (api key {header.api_key}): {type(e).__name__}: {e}") from None
    # Like Kafka, bytes after the body are ignored (librdkafka's Metadata v12 carries some).
    return body


def response_header_bytes(api_key: int, version: int, correlation_id: int) -> bytes:
    flexible = api_key != API_VERSIONS_KEY and response_class(api_key, version).__flexible__
    return _SIZE.pack(correlation_id) + (b"\x00" if flexible else b"")


def encode_response(api_key: int, version: int, correlation_id: int, response: Any) -> bytes:
    """A whole response frame: size, response header, body."""
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x00")
    buf.write(response_header_bytes(api_key, version, correlation_id))
    _writer(api_key, version)(buf, response)
    data = buf.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    out = bytes(data)
    data.release()
    return out


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
