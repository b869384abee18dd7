"""Byte layouts of composite store keys and of Kafka's changelog keys.

Store keys (inside a backend) must sort as (key, time...) so range scans are exact:
the user key is escaped (``00`` -> ``00 ff``) and terminated by ``00 00``, then timestamps
follow as 8-byte big-endian with the sign bit flipped, so negative times sort first.
Changelog keys use Kafka's layouts so Java applications' changelogs read back:
window ``key + start(int64) + seqnum(int32)``, session ``key + end(int64) + start(int64)``.
"""

from __future__ import annotations

import struct

_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_WINDOW_CL = struct.Struct(">qi")
_SESSION_CL = struct.Struct(">qq")
_SIGN = 1 << 63
TERMINATOR = b"\x00\x00"


def escape_key(key: bytes) -> bytes:
    return key.replace(b"\x00", b"\x00\xff") + TERMINATOR


def unescape_key(escaped: bytes) -> bytes:
    """Inverse of :func:`escape_key`; ``escaped`` includes the terminator."""
    return escaped[:-2].replace(b"\x00\xff", b"\x00")


def encode_time(ts: int) -> bytes:
    return _U64.pack(ts + _SIGN)


def decode_time(b: bytes) -> int:
    return int(_U64.unpack(b)[0]) - _SIGN


def window_changelog_key(key: bytes, start: int, seq: int) -> bytes:
    return key + _WINDOW_CL.pack(start, seq)


def parse_window_changelog_key(b: bytes) -> tuple[bytes, int, int]:
    start, seq = _WINDOW_CL.unpack_from(b, len(b) - 12)
    return b[:-12], start, seq


def session_changelog_key(key: bytes, start: int, end: int) -> bytes:
    return key + _SESSION_CL.pack(end, start)


def parse_session_changelog_key(b: bytes) -> tuple[bytes, int, int]:
    end, start = _SESSION_CL.unpack_from(b, len(b) - 16)
    return b[:-16], start, end
