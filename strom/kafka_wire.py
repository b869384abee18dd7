"""One Kafka request over a plain socket, for the few calls confluent-kafka's AdminClient cannot
make (ListOffsets -4 for `strom topics describe`, the cluster-default DescribeConfigs of
`strom configs --entity-default`, DescribeLogDirs for the web console).

Only flexible request versions (request header v2, response header v1) and PLAINTEXT listeners:
callers check :func:`plaintext` on their client config and leave the figure out otherwise.
Not thread-safe per socket; each call of :func:`call` opens its own connection.
"""

from __future__ import annotations

import io
import socket
import struct
from collections.abc import Mapping
from typing import Any, TypeVar

from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity

T = TypeVar("T", bound=Entity)
_FRAME_SIZE = struct.Struct(">i")
# Request header v2 before the client id: api key, api version, correlation id, client id length.
_REQUEST_HEADER = struct.Struct(">hhih")
# A response larger than this is not one of the small answers these calls expect.
MAX_RESPONSE_BYTES = 64 << 20


def plaintext(config: Mapping[str, Any]) -> bool:
    """Whether a client config talks PLAINTEXT (the only protocol these raw calls speak)."""
    return str(config.get("security.protocol", "plaintext")).lower() == "plaintext"


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("the broker closed the connection")
        data += chunk
    return bytes(data)


def send(sock: socket.socket, api_key: int, version: int, request: Entity, response_type: type[T],
         client_id: str = "strom") -> T:
    """One request on an open connection; its decoded response. Raises OSError on a short read
    or a response frame of an impossible size."""
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    cid = client_id.encode()
    frame = _REQUEST_HEADER.pack(api_key, version, 1, len(cid)) + cid + b"\x00" + body.getvalue()
    sock.sendall(_FRAME_SIZE.pack(len(frame)) + frame)
    (size,) = _FRAME_SIZE.unpack(recv_exact(sock, 4))
    if not 5 <= size <= MAX_RESPONSE_BYTES:
        raise OSError(f"the broker answered a frame of {size} bytes")
    payload = recv_exact(sock, size)
    # Response header v1: correlation id (4 bytes), then an empty tagged-field section.
    response, _ = entity_reader(response_type)(payload, 5)
    return response


def call(host: str, port: int, api_key: int, version: int, request: Entity, response_type: type[T], *,
         client_id: str = "strom", timeout: float = 10.0) -> T:
    """Connect to ``host:port``, send one request, return its decoded response."""
    with socket.create_connection((host.strip("[]"), port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        return send(sock, api_key, version, request, response_type, client_id)
