"""Kafka's unsigned varints (``ByteUtils.writeUnsignedVarint``) for the protocol's own encoders.

The leaf every protocol module may import (it imports nothing of strom): the hand-written
response encoders (through :mod:`codec`), the request frame check, the generic message codec and
the fuzzer write compact lengths and tags with these, so none keeps a private copy.
"""

from __future__ import annotations


def write_uvarint(out: bytearray, value: int) -> None:
    """Append ``value`` (non-negative) to ``out`` as an unsigned varint."""
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_uvarint(value: int) -> bytes:
    """``value`` (non-negative) as an unsigned varint."""
    if value < 0x80:  # the usual case: a short count or string length
        return bytes((value,))
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)
