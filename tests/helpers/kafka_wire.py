"""Raw Kafka wire helpers for tests: frame requests with kio, read and decode responses.

Independent of strom's own codec on purpose: a test that encoded requests with the broker's
code could not catch the broker's framing mistakes. Request header v1 (api key, version,
correlation id, client id) is used for non-flexible versions and v2 (v1 + empty tagged
fields) for flexible ones; response header v0 (correlation id) or v1 (+ tagged fields), with
ApiVersions always answered with header v0, as Kafka does.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

API_VERSIONS_KEY = 18
_SIZE = struct.Struct(">i")


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    """A TCP connection to ``host:port``."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None = "strom-tests",
                   *, flexible: bool) -> bytes:
    """Request header v1, or v2 (one empty tagged-fields byte) when ``flexible``."""
    out = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        out += struct.pack(">h", len(raw)) + raw
    return out + (b"\x00" if flexible else b"")


def encode_request(entity: Any, correlation_id: int, client_id: str | None = "strom-tests") -> bytes:
    """A whole request frame (4-byte size + header + body) for a kio request entity."""
    body = io.BytesIO()
    entity_writer(type(entity))(body, entity)
    payload = request_header(int(entity.__api_key__), int(entity.__version__), correlation_id, client_id,
                             flexible=bool(entity.__flexible__)) + body.getvalue()
    return frame(payload)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """``n`` bytes, or None when the peer closes (or resets) the connection first."""
    chunks: list[bytes] = []
    while n:
        try:
            chunk = sock.recv(n)
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame's payload (without the size), or None on EOF."""
    head = recv_exact(sock, 4)
    if head is None:
        return None
    (size,) = _SIZE.unpack(head)
    return recv_exact(sock, size)


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation id, decoded response body) of one response frame payload."""
    cls = load_response_schema(api_key, version)
    (correlation_id,) = _SIZE.unpack_from(payload, 0)
    pos = 4
    if cls.__flexible__ and api_key != API_VERSIONS_KEY:
        if payload[pos] != 0:
            raise AssertionError("tests only expect empty response header tagged fields")
        pos += 1
    body, size = entity_reader(cls)(payload, pos)
    if pos + size != len(payload):
        raise AssertionError(f"{len(payload) - pos - size} trailing bytes after {cls.__name__}")
    return correlation_id, body


def roundtrip(sock: socket.socket, entity: Any, correlation_id: int = 1) -> Any:
    """Send one request and return its decoded response; fails if the connection closes."""
    sock.sendall(encode_request(entity, correlation_id))
    payload = read_frame(sock)
    if payload is None:
        raise AssertionError(f"broker closed the connection instead of answering {type(entity).__name__}")
    got_id, body = decode_response(int(entity.__api_key__), int(entity.__version__), payload)
    assert got_id == correlation_id, f"correlation id {got_id}, sent {correlation_id}"
    return body


def wait_closed(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True when the broker closes the connection within ``timeout`` without sending anything.

    Any bytes received first make this False: a connection the broker gave up on must get no
    answer (Kafka closes it silently).
    """
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        sock.settimeout(remaining)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        return not data
