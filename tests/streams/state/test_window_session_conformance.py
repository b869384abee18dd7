"""Window and session store conformance against both backends: fetch order, ranges with
byte-edge keys, negative timestamps, expiry, session queries, persistence of stream time."""

from __future__ import annotations

from typing import Any

import pytest

from strom.streams.exceptions import StateStoreError
from strom.streams.state import SessionStore, Windowed, WindowStore

Factory = Any  # conftest.Factory (conftest is not importable under --import-mode=importlib)


def test_window_fetch_order_and_bounds(stores: Factory) -> None:
    w = stores.window(retention=10_000, size=100)
    assert isinstance(w, WindowStore)
    for t in (300, 100, -200, 0, 200):
        w.put(b"k", f"v{t}".encode(), t)
    w.put(b"k\x00", b"other", 100)  # a key that extends "k" must not leak into fetch(b"k")
    w.put(b"", b"empty", 100)
    assert list(w.fetch(b"k", 0, 200)) == [(0, b"v0"), (100, b"v100"), (200, b"v200")]
    assert list(w.fetch(b"k", 0, 200, reverse=True)) == [(200, b"v200"), (100, b"v100"), (0, b"v0")]
    assert [t for t, _ in w.fetch(b"k", -1000, 1000)] == [-200, 0, 100, 200, 300]
    assert list(w.fetch(b"k", 201, 299)) == []
    assert list(w.fetch(b"k", 300, 100)) == []
    assert w.fetch_one(b"k", 100) == b"v100" and w.fetch_one(b"k", 101) is None
    assert list(w.fetch(b"", 0, 1000)) == [(100, b"empty")]
    w.put(b"k", None, 100)  # delete one window
    assert w.fetch_one(b"k", 100) is None


@pytest.mark.parametrize("committed", [False, True], ids=["pending", "committed"])
def test_window_fetch_range_and_all(stores: Factory, committed: bool) -> None:
    w = stores.window(retention=10_000, size=50)
    keys = [b"\xff", b"a", b"", b"a\x00", b"ab", b"\x00"]
    for k in keys:
        for t in (0, 100):
            w.put(k, k + t.to_bytes(1, "big"), t)
    if committed:
        w.commit({})
    got = list(w.fetch_range(b"a", b"ab", 0, 100))
    assert [x for x, _ in got] == [
        Windowed(b"a", 0, 50), Windowed(b"a", 100, 150),
        Windowed(b"a\x00", 0, 50), Windowed(b"a\x00", 100, 150),
        Windowed(b"ab", 0, 50), Windowed(b"ab", 100, 150),
    ]
    assert got[0][1] == b"a\x00"
    assert [x for x, _ in w.fetch_range(b"a", b"ab", 0, 100, reverse=True)] == [x for x, _ in got][::-1]
    assert [x.key for x, _ in w.fetch_all(50, 150)] == sorted(keys)
    assert [x.key for x, _ in w.fetch_range(None, b"\x00", 0, 0)] == [b"", b"\x00"]
    assert [x.key for x, _ in w.fetch_range(b"b", None, 0, 0)] == [b"\xff"]
    assert list(w.fetch_range(b"b", b"a", 0, 100)) == []
    assert len(list(w.all())) == 12


def test_window_expiry(stores: Factory) -> None:
    w = stores.window(retention=1000, size=100)
    w.put(b"k", b"a", 0)
    w.put(b"k", b"b", 500)
    assert [t for t, _ in w.fetch(b"k", 0, 10_000)] == [0, 500]
    w.put(b"j", b"c", 1000)  # stream time 1000: window 0 is expired (0 <= 1000 - 1000)
    assert w.observed_stream_time == 1000
    assert [t for t, _ in w.fetch(b"k", 0, 10_000)] == [500]
    assert w.fetch_one(b"k", 0) is None
    w.put(b"k", b"late", 0)  # writes of expired windows are dropped
    assert list(w.fetch(b"k", -5, 5)) == []
    w.put(b"k", b"x", 70_000)  # far ahead: the sweep at commit deletes expired entries physically
    w.commit({})
    assert [(x.key, x.start) for x, _ in w.all()] == [(b"k", 70_000)]


def test_window_retain_duplicates(stores: Factory) -> None:
    w = stores.window(retention=10_000, size=100, dups=True)
    w.put(b"k", b"1", 10)
    w.put(b"k", b"2", 10)
    w.put(b"k", None, 10)  # ignored with duplicates, as in Kafka
    assert list(w.fetch(b"k", 0, 100)) == [(10, b"1"), (10, b"2")]


def test_window_arguments_checked(stores: Factory) -> None:
    with pytest.raises(StateStoreError):
        stores.window(name="bad", retention=10, size=100)


def test_window_stream_time_survives_reopen(rocks: Factory) -> None:
    w = rocks.window(retention=1000, size=10)
    w.put(b"k", b"v", 5000)
    w.commit({("cl", 0): 1})
    w.close()
    w2 = rocks.window(retention=1000, size=10)
    assert w2.observed_stream_time == 5000
    w2.put(b"k", b"old", 3000)  # still expired after the restart
    assert list(w2.fetch(b"k", 0, 10_000)) == [(5000, b"v")]
    assert w2.committed_offsets() == {("cl", 0): 1}


def test_session_find_sessions(stores: Factory) -> None:
    s = stores.session(retention=100_000)
    assert isinstance(s, SessionStore)
    s.put(b"u", 0, 10, b"s1")
    s.put(b"u", 20, 30, b"s2")
    s.put(b"u", 50, 50, b"s3")
    s.put(b"u\x00", 0, 100, b"other")
    s.put(b"t", 0, 100, b"t")
    # a record at time 25 with inactivity gap 5 merges with sessions overlapping [20, 30]
    got = list(s.find_sessions(b"u", 25 - 5, 25 + 5))
    assert got == [(Windowed(b"u", 20, 30), b"s2")]
    # sessions ordered by end time
    assert [w for w, _ in s.find_sessions(b"u", 0, 1000)] == [Windowed(b"u", 0, 10), Windowed(b"u", 20, 30), Windowed(b"u", 50, 50)]
    assert [w.start for w, _ in s.find_sessions(b"u", 10, 20)] == [0, 20]  # touching both ends counts
    assert [w.start for w, _ in s.fetch(b"u")] == [0, 20, 50]
    assert s.fetch_session(b"u", 20, 30) == b"s2" and s.fetch_session(b"u", 20, 31) is None
    s.remove(b"u", 20, 30)
    assert [w.start for w, _ in s.fetch(b"u")] == [0, 50]
    assert [w.key for w, _ in s.find_sessions_range(b"t", b"u\x00", 0, 1000)] == [b"t", b"u", b"u", b"u\x00"]
    assert [w.key for w, _ in s.find_sessions_range(b"u", None, 60, 1000)] == [b"u\x00"]
    with pytest.raises(StateStoreError):
        s.put(b"u", 10, 5, b"bad")


def test_session_expiry(stores: Factory) -> None:
    s = stores.session(retention=100)
    s.put(b"k", 0, 10, b"a")
    s.put(b"k", 100, 110, b"b")  # stream time 110: session ending at 10 expired (10 <= 110 - 100)
    assert [w.end for w, _ in s.fetch(b"k")] == [110]
    s.put(b"k", 0, 5, b"late")
    assert s.fetch_session(b"k", 0, 5) is None
