"""Record batches held as consecutive buffers and sent as they are, never joined.

A remote read (KIP-405) finds its batches in the chunks of the chunk cache or of a GET's body;
joining them into one ``bytes`` costs a copy of every byte on the event loop. A
:class:`RecordPieces` keeps the views instead: its length is the bytes it holds, and the Fetch
encoder (:mod:`strom.core.protocol.fetch_response`) puts each view into the response's buffer
list, which the transport writes with one ``writev``. A view keeps its buffer alive (a memory
chunk cache hands a chunk's buffer back for reuse only when nothing else refers to it).
"""

from __future__ import annotations

from collections.abc import Iterable


class RecordPieces:
    """Whole record batches in ``pieces``, in order: one run of bytes in several buffers.

    Immutable after construction; safe to share between threads."""

    __slots__ = ("pieces", "size")

    def __init__(self, pieces: Iterable[bytes | memoryview]) -> None:
        self.pieces: tuple[bytes | memoryview, ...] = tuple(p for p in pieces if len(p))
        self.size = sum(memoryview(p).nbytes for p in self.pieces)

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __bytes__(self) -> bytes:
        return b"".join(self.pieces)

    def __repr__(self) -> str:
        return f"RecordPieces({self.size} bytes in {len(self.pieces)} pieces)"
