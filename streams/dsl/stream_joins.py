"""Windowed stream-stream joins: ``KStream.join/left_join/outer_join(other_stream, joiner, JoinWindows)``.

Each side keeps its records in a window store (duplicates retained, retention
``before + after + 1 + grace``) and, per record, looks up the other side's store: a left record
at ``t`` matches right records in ``[t - before, t + after]`` (a right record at ``t`` matches
left records in ``[t - after, t + before]``); a result has the larger of the two timestamps.
Stream time is shared by both sides (the larger of the two stores' observed times); a record
older than stream time minus the store retention is dropped as late.

Left/outer joins follow Kafka 3.1+: a record without a match is not emitted with None at once
but parked in a shared "outer" key-value store, and emitted (``joiner(v, None)`` or
``joiner(None, v)``, with its own timestamp) once its join window has closed, i.e. when stream
time passes ``t + after + grace`` (left records) or ``t + before + grace`` (right records) —
unless a match arrived in the meantime. A record whose window is already closed when it
arrives and has no match is emitted at once.

All three stores are state stores like any other: RocksDB in a task directory (window stores
with retained duplicates, and a key-value store for the unmatched records), change-logged to
``<application.id>-<store>-changelog`` and restored after a restart or a crash.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from strom.streams.dsl.graph import repartition_through
from strom.streams.dsl.windows import JoinWindows
from strom.streams.exceptions import TopologyError
from strom.streams.processor.api import Processor, Record
from strom.streams.processor.stores import WindowStoreFacade
from strom.streams.serdes import Serdes
from strom.streams.state.factory import DslStoreSupplier
from strom.streams.topology.topology import StoreSpec

if TYPE_CHECKING:
    # annotations only: the joined stream is made by the builder (see strom.streams.dsl.builder)
    from strom.streams.dsl.kstream import KStream

Fn = Callable[..., Any]
_TS = struct.Struct(">Q")
_LEN = struct.Struct(">I")
_OFFSET = 1 << 63  # timestamps are stored sign-flipped so that byte order is time order
_LEFT, _RIGHT = b"\x00", b"\x01"


class StreamJoined:
    """Serdes, processor name and store name prefix of a stream-stream join (Kafka's ``StreamJoined``)."""

    def __init__(self, key_serde: Any = None, value_serde: Any = None, other_value_serde: Any = None,
                 name: str | None = None, store_name: str | None = None) -> None:
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.other_value_serde = other_value_serde
        self.name = name
        self.store_name = store_name

    @classmethod
    def with_(cls, key_serde: Any = None, value_serde: Any = None, other_value_serde: Any = None) -> StreamJoined:
        return cls(key_serde, value_serde, other_value_serde)

    @classmethod
    def as_(cls, store_name: str) -> StreamJoined:
        return cls(store_name=store_name)

    def with_name(self, name: str) -> StreamJoined:
        return StreamJoined(self.key_serde, self.value_serde, self.other_value_serde, name, self.store_name)

    def with_store_name(self, store_name: str) -> StreamJoined:
        return StreamJoined(self.key_serde, self.value_serde, self.other_value_serde, self.name, store_name)


class StreamStreamJoinSide(Processor[Any, Any]):
    """One side of the join: store the record, match it against the other side, flush closed outers."""

    def __init__(self, this_store: str, other_store: str, outer_store: str | None, windows: JoinWindows,
                 is_left: bool, joiner: Fn, outer_this: bool) -> None:
        self.this_name, self.other_name, self.outer_name = this_store, other_store, outer_store
        self.windows = windows
        self.is_left = is_left
        self.joiner = joiner
        self.outer_this = outer_this  # unmatched records of this side are emitted (left/outer join)
        self.seq = itertools.count()

    def init(self, context: Any) -> None:
        super().init(context)
        self.this = WindowStoreFacade(context.get_state_store(self.this_name))
        self.other = WindowStoreFacade(context.get_state_store(self.other_name))
        self.outer = context.get_state_store(self.outer_name).inner if self.outer_name else None
        w = self.windows
        self.before, self.after = (w.before, w.after) if self.is_left else (w.after, w.before)
        self.retention = w.before + w.after + 1 + w.grace

    def _join(self, this_value: Any, other_value: Any) -> Any:
        return self.joiner(this_value, other_value) if self.is_left else self.joiner(other_value, this_value)

    def process(self, record: Record[Any, Any]) -> None:
        key, value, ts = record.key, record.value, record.timestamp
        if key is None or value is None:
            return  # Kafka skips: nothing to join on
        self.this.put(key, value, ts, ts)
        stream_time = max(self.this.inner.observed_stream_time, self.other.inner.observed_stream_time)
        if ts <= stream_time - self.retention:
            return  # late: outside every join window that can still be open
        if self.outer is not None:
            self._emit_closed_outer(stream_time)
        kb = self.this.key_bytes(key)
        matched = False
        fwd = self.context.forward
        for other_ts, other_value, _ in self.other.fetch(key, ts - self.before, ts + self.after):
            matched = True
            if self.outer is not None:  # the other record found its match: never emit it unmatched
                other_side = _RIGHT if self.is_left else _LEFT
                for k, _ in list(self.outer.prefix_scan(_outer_prefix(other_ts, other_side, kb))):
                    self.outer.delete(k)
            fwd(Record(key, self._join(value, other_value), max(ts, other_ts), record.headers))
        if matched or not self.outer_this:
            return
        if ts + self.after + self.windows.grace < stream_time:  # window already closed
            fwd(Record(key, self._join(value, None), ts, record.headers))
            return
        assert self.outer is not None
        vb = self.this._vser(self.this._topic, value) or b""
        side = _LEFT if self.is_left else _RIGHT
        self.outer.put(_outer_prefix(ts, side, kb) + _LEN.pack(next(self.seq) & 0xFFFFFFFF), vb)

    def _emit_closed_outer(self, stream_time: int) -> None:
        assert self.outer is not None
        w = self.windows
        horizon = max(w.before, w.after) + w.grace
        done = []
        for k, vb in self.outer.all():
            ts = _TS.unpack_from(k, 0)[0] - _OFFSET
            if ts + horizon >= stream_time:
                break  # entries are in time order: nothing later can be closed
            side = k[8:9]
            look = w.after if side == _LEFT else w.before
            if ts + look + w.grace >= stream_time:
                continue
            done.append(k)
            (n,) = _LEN.unpack_from(k, 9)
            kb = k[13:13 + n]
            # values were serialized by the side that parked them; decode with that side's serde
            store = self.this if (side == _LEFT) == self.is_left else self.other
            key = store._kde(store._topic, kb)
            v = store._vde(store._topic, vb)
            joined = self.joiner(v, None) if side == _LEFT else self.joiner(None, v)
            self.context.forward(Record(key, joined, ts))
        for k in done:
            self.outer.delete(k)


def _outer_prefix(ts: int, side: bytes, kb: bytes) -> bytes:
    return _TS.pack(ts + _OFFSET) + side + _LEN.pack(len(kb)) + kb


def stream_stream_join(left: KStream, right: KStream, joiner: Fn, windows: JoinWindows,
                       stream_joined: StreamJoined | None, mode: str) -> KStream:
    """Wire the join (``mode`` is "inner", "left" or "outer"); returns the joined stream."""
    if not isinstance(windows, JoinWindows):
        raise TopologyError(f"a stream-stream join needs JoinWindows, got {windows!r}")
    if left.builder is not right.builder:
        raise TopologyError("cannot join streams of different StreamsBuilders")
    b = left.builder
    sj = stream_joined or StreamJoined()
    ks = sj.key_serde if sj.key_serde is not None else (left.key_serde or right.key_serde)
    lvs = sj.value_serde if sj.value_serde is not None else left.value_serde
    rvs = sj.other_value_serde if sj.other_value_serde is not None else right.value_serde

    def copartitioned(s: KStream, vs: Any, side: str) -> tuple[str, frozenset[str]]:
        if not s.repartition_required:
            return s.node, s.source_topics
        prefix = f"{sj.name}-{side}" if sj.name else b.new_name("KSTREAM-REPARTITION")
        node, topic = repartition_through(b, s.node, prefix, ks, vs, sj.name is not None)
        return node, frozenset([topic])

    lnode, ltopics = copartitioned(left, lvs, "left")
    rnode, rtopics = copartitioned(right, rvs, "right")
    prefix = {"inner": "JOIN", "left": "LEFTJOIN", "outer": "OUTERJOIN"}[mode]
    this_name = f"{sj.name}-this-join" if sj.name else b.new_name(f"KSTREAM-{prefix}THIS")
    other_name = f"{sj.name}-other-join" if sj.name else b.new_name(f"KSTREAM-{prefix}OTHER")
    merge_name = f"{sj.name}-merge" if sj.name else b.new_name("KSTREAM-MERGE")
    base = sj.store_name
    this_store = f"{base}-this-join-store" if base else f"{this_name}-store"
    other_store = f"{base}-other-join-store" if base else f"{other_name}-store"
    outer_store = None
    if mode != "inner":
        outer_store = f"{base}-outer-shared-join-store" if base else f"{this_name}-outer-shared-join-store"
    retention = windows.before + windows.after + 1 + windows.grace
    size = windows.before + windows.after + 1
    topo = b.topology
    topo.add_processor(this_name, lambda: StreamStreamJoinSide(this_store, other_store, outer_store, windows,
                                                               True, joiner, mode != "inner"), lnode)
    topo.add_processor(other_name, lambda: StreamStreamJoinSide(other_store, this_store, outer_store, windows,
                                                                False, joiner, mode == "outer"), rnode)
    topo.add_processor(merge_name, _PassThrough, this_name, other_name)
    for store, vs in ((this_store, lvs), (other_store, rvs)):
        make = DslStoreSupplier(store, "window", retention, size, retain_duplicates=True)
        topo.add_state_store(StoreSpec(store, make, ks, vs, kind="window", retention_ms=retention,
                                       window_size=size, retain_duplicates=True), this_name, other_name)
    if outer_store is not None:
        topo.add_state_store(StoreSpec(outer_store, None, Serdes.bytes(), Serdes.bytes()), this_name, other_name)
    topo.copartition_groups.append(set(ltopics | rtopics))
    return b.new_stream(merge_name, ks, None, ltopics | rtopics, False)


class _PassThrough(Processor[Any, Any]):
    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)
