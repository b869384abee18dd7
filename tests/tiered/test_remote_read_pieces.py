"""The remote reader's piece addressing (core/replica/remote_log.py ``_Pieces``): a run of bytes
held as the views of chunks, cut into the views of a range without copying (unit, no broker)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from strom.core.records.pieces import RecordPieces
from strom.core.replica.remote_log import _Pieces


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=8), data=st.data())
def test_views_are_the_joined_range(chunks: list[bytes], data: st.DataObject) -> None:
    joined = b"".join(chunks)
    lo = data.draw(st.integers(0, len(joined)))
    hi = data.draw(st.integers(lo, len(joined)))
    buf = _Pieces(iter(chunks))  # type: ignore[arg-type]  # a list iterator stands for the generator
    assert buf.fill(len(joined))
    views = buf.views(lo, hi)
    assert b"".join(views) == joined[lo:hi] == buf.slice(lo, hi) if lo < hi else views == []
    assert all(len(v) for v in views)  # no empty views sent
    pieces = RecordPieces(views)
    assert len(pieces) == hi - lo and bytes(pieces) == joined[lo:hi]


def test_views_share_the_chunk_buffers() -> None:
    chunk = bytearray(b"0123456789")
    buf = _Pieces(iter([chunk]))  # type: ignore[arg-type]
    assert buf.fill(10)
    (view,) = buf.views(2, 6)
    chunk[2:6] = b"abcd"  # the view shows the chunk's own bytes, not a copy
    assert bytes(view) == b"abcd"
