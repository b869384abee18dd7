"""Key-value store conformance: the same tests against the in-memory and RocksDB backends."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.streams.exceptions import InvalidStateStoreError
from strom.streams.state import KeyValueStore

Factory = Any  # conftest.Factory (conftest is not importable under --import-mode=importlib)


def test_protocol_and_point_ops(stores: Factory) -> None:
    s = stores.kv()
    assert isinstance(s, KeyValueStore)
    assert s.name == "kv" and s.persistent == (stores.backend == "rocksdb")
    assert s.get(b"a") is None
    s.put(b"a", b"1")
    assert s.get(b"a") == b"1"
    assert s.put_if_absent(b"a", b"2") == b"1"
    assert s.get(b"a") == b"1"
    assert s.put_if_absent(b"b", b"2") is None and s.get(b"b") == b"2"
    assert s.delete(b"a") == b"1" and s.get(b"a") is None
    assert s.delete(b"a") is None
    s.put(b"b", None)  # None deletes
    assert s.get(b"b") is None
    s.put(b"", b"empty-key")
    assert s.get(b"") == b"empty-key"
    s.put(b"e", b"")  # an empty value is a value, not a delete
    assert s.get(b"e") == b""


EDGE_KEYS = [b"", b"\x00", b"\x00\x00", b"\x00\xff", b"\x01", b"a", b"a\x00", b"a\xff", b"ab", b"b", b"\x7f", b"\x80", b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\xff"]


@pytest.mark.parametrize("committed", [False, True], ids=["pending", "committed"])
def test_range_byte_order_edges(stores: Factory, committed: bool) -> None:
    s = stores.kv()
    for k in reversed(EDGE_KEYS):
        s.put(k, b"v" + k)
    if committed:
        s.commit({})
    expected = sorted(EDGE_KEYS)
    assert [k for k, _ in s.all()] == expected
    assert [k for k, _ in s.all(reverse=True)] == expected[::-1]
    assert all(v == b"v" + k for k, v in s.all())
    # inclusive bounds, open bounds, bounds that are not keys
    assert [k for k, _ in s.range(b"a", b"b")] == [b"a", b"a\x00", b"ab", b"a\xff", b"b"]
    assert [k for k, _ in s.range(b"a", b"b", reverse=True)] == [b"b", b"a\xff", b"ab", b"a\x00", b"a"]
    assert [k for k, _ in s.range(None, b"\x00")] == [b"", b"\x00"]
    assert [k for k, _ in s.range(b"\xff", None)] == [b"\xff", b"\xff\x00", b"\xff\xff", b"\xff\xff\xff"]
    assert [k for k, _ in s.range(b"\xff\x00", None, reverse=True)] == [b"\xff\xff\xff", b"\xff\xff", b"\xff\x00"]
    assert [k for k, _ in s.range(b"c", b"d")] == []
    assert list(s.range(b"b", b"a")) == []  # inverted range is empty, as in Kafka
    assert [k for k, _ in s.prefix_scan(b"a")] == [b"a", b"a\x00", b"ab", b"a\xff"]
    assert [k for k, _ in s.prefix_scan(b"\xff\xff")] == [b"\xff\xff", b"\xff\xff\xff"]
    assert [k for k, _ in s.prefix_scan(b"")] == expected


def test_pending_writes_shadow_committed(stores: Factory) -> None:
    s = stores.kv()
    for k in (b"a", b"b", b"c", b"d"):
        s.put(k, b"old")
    s.commit({("cl", 0): 4})
    s.put(b"b", None)
    s.put(b"c", b"new")
    s.put(b"bb", b"ins")
    assert list(s.all()) == [(b"a", b"old"), (b"bb", b"ins"), (b"c", b"new"), (b"d", b"old")]
    assert list(s.all(reverse=True)) == [(b"d", b"old"), (b"c", b"new"), (b"bb", b"ins"), (b"a", b"old")]
    assert list(s.range(b"b", b"c")) == [(b"bb", b"ins"), (b"c", b"new")]
    assert s.get(b"b") is None


def test_iteration_survives_concurrent_writes(stores: Factory) -> None:
    s = stores.kv()
    for i in range(10):
        s.put(bytes([i]), b"x")
    seen = []
    for k, _ in s.all():
        seen.append(k)
        s.put(k + b"\x00", b"y")  # writes while iterating must not break the iterator
    assert seen[0] == b"\x00" and len(seen) >= 10


def test_approximate_num_entries_and_offsets(stores: Factory) -> None:
    s = stores.kv()
    for i in range(100):
        s.put(i.to_bytes(2, "big"), b"v")
    s.commit({("app-kv-changelog", 3): 100, ("other", 0): 7})
    s.flush()
    assert 50 <= s.approximate_num_entries() <= 200
    assert s.committed_offsets() == {("app-kv-changelog", 3): 100, ("other", 0): 7}
    s.commit({("app-kv-changelog", 3): 150})
    assert s.committed_offsets() == {("app-kv-changelog", 3): 150, ("other", 0): 7}


def test_closed_store_raises(stores: Factory) -> None:
    s = stores.kv()
    s.close()
    assert not s.is_open
    with pytest.raises(InvalidStateStoreError, match="kv"):
        s.get(b"a")
    with pytest.raises(InvalidStateStoreError):
        s.put(b"a", b"b")
    s.close()  # idempotent


ops = st.lists(
    st.tuples(st.binary(max_size=3), st.none() | st.binary(max_size=2), st.booleans()), max_size=40
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, lo=st.none() | st.binary(max_size=3), hi=st.none() | st.binary(max_size=3))
def test_matches_a_dict_model(stores: Factory, ops: list[tuple[bytes, bytes | None, bool]], lo: bytes | None, hi: bytes | None) -> None:
    s = stores.kv(f"model{len(stores.opened)}")
    model: dict[bytes, bytes] = {}
    for k, v, commit in ops:
        s.put(k, v)
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
        if commit:
            s.commit({})
    exp = sorted((k, v) for k, v in model.items() if (lo is None or k >= lo) and (hi is None or k <= hi))
    if lo is not None and hi is not None and lo > hi:
        exp = []
    assert list(s.range(lo, hi)) == exp
    assert list(s.range(lo, hi, reverse=True)) == exp[::-1]
    s.close()
