"""The socket side of the broker: accept connections, read frames, write responses.

Each connection is served by one coroutine that reads a request, has it handled and writes
the response before reading the next one. This is Kafka's per-connection ordering (the
channel is muted while a request is in flight); clients that pipeline requests simply find
them waiting in the socket buffer. A frame that cannot be parsed closes only its own
connection; every other connection goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from strom.core.protocol import codec
from strom.core.protocol.exceptions import MalformedRequestError, UnsupportedVersionRequestError
from strom.core.server.context import RequestContext

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

# (ctx, header, frame, body position) -> encoded response frame (bytes or a list of buffers),
# or None for no response (acks=0)
Dispatcher = Callable[[RequestContext, codec.RequestHeader, bytes, int],
                      Awaitable[bytes | list[bytes | memoryview] | None]]


class Listener:
    """One listening socket (a Kafka listener such as ``PLAINTEXT://127.0.0.1:9092``)."""

    def __init__(self, name: str, host: str, port: int, dispatcher: Dispatcher, *,
                 max_request_bytes: int, security_protocol: str = "PLAINTEXT") -> None:
        self.name = name
        self.host = host
        self.port = port
        self.dispatcher = dispatcher
        self.max_request_bytes = max_request_bytes
        self.security_protocol = security_protocol
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=1 << 20,
                                                  reuse_address=True)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername")
        address = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        try:
            await self._loop(reader, writer, address)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        except asyncio.CancelledError:
            pass
        except MalformedRequestError as e:
            log.warning("closing connection from %s on %s: %s", address, self.name, e)
        except UnsupportedVersionRequestError as e:
            log.warning("closing connection from %s on %s: %s", address, self.name, e)
        except Exception:
            log.exception("closing connection from %s on %s after an unexpected error", address, self.name)
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str) -> None:
        while True:
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            if size <= 0 or size > self.max_request_bytes:
                raise MalformedRequestError(
                    f"request size {size} is outside 1..{self.max_request_bytes} "
                    "(socket.request.max.bytes); not a Kafka client?")
            frame = await reader.readexactly(size)
            header, body_pos = codec.parse_header(frame)
            ctx = RequestContext(header.api_key, header.api_version, header.correlation_id,
                                 header.client_id or "", address, self.name, self.security_protocol)
            response = await self.dispatcher(ctx, header, frame, body_pos)
            if response is not None:
                if isinstance(response, list):
                    writer.writelines(response)  # record buffers go to the transport uncopied
                else:
                    writer.write(response)
                await writer.drain()
            if ctx.throttle_ms > 0:
                # A quota was exceeded: the channel stays muted for the throttle time (KIP-219).
                await asyncio.sleep(ctx.throttle_ms / 1000)
