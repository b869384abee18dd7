"""The suppress buffer and window stores are change-logged: a crash between commits loses no
final result and emits none twice once the stores are restored from their changelogs.

The test plays the runtime's part (as strom.streams.runtime.task does) with the real DSL
processors and stores: stores come from ``build_store`` (RocksDB) wrapped in change-logging
stores; a commit appends the pending changelog records to an in-memory "topic" per store and
makes the output visible together with them (exactly_once_v2: one transaction); a crash drops
what was not committed and wipes the state directory; the next incarnation restores every
store from its changelog and re-reads the input from the committed position.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from strom.streams import Consumed, Produced, Serdes, StreamsBuilder
from strom.streams.dsl.suppress import BufferConfig, Suppressed
from strom.streams.dsl.windows import SessionWindows, TimeWindows, Window, Windowed, WindowedSerdes
from strom.streams.state.changelogging import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
)
from strom.streams.state.factory import build_store
from strom.streams.state.keyvalue import BytesKeyValueStore
from strom.streams.state.session import BytesSessionStore
from strom.streams.topology.runtime import TopologyRuntime
from strom.streams.topology.topology import StoreSpec, Topology

S = Serdes.string()
L = Serdes.long()


def _wrap(raw: Any) -> Any:
    if isinstance(raw, BytesKeyValueStore):
        return ChangeLoggingKeyValueStore(raw)
    if isinstance(raw, BytesSessionStore):
        return ChangeLoggingSessionStore(raw)
    return ChangeLoggingWindowStore(raw)


class MiniTask:
    """One task of ``topology`` over input partition 0, with change-logged RocksDB stores."""

    def __init__(self, topology: Topology, state_dir: Path, changelogs: dict[str, list[tuple[bytes, bytes | None]]]):
        self.uncommitted: list[tuple[bytes | None, bytes | None, int]] = []
        self.logged: dict[str, Any] = {}

        def factory(spec: StoreSpec) -> Any:
            store = _wrap(build_store(spec, state_dir / "rocksdb"))
            self.logged[spec.name] = store
            return store

        self.runtime = TopologyRuntime(topology, "app", lambda t, k, v, ts, h: self.uncommitted.append((k, v, ts)),
                                       store_factory=factory, state_dir=str(state_dir))
        # processors are initialised before the restore, as in the KafkaStreams runtime
        for name, store in self.logged.items():
            records = changelogs.get(name, [])
            store.restore(((i, k, v) for i, (k, v) in enumerate(records)), (f"app-{name}-changelog", 0))

    def commit(self, changelogs: dict[str, list[tuple[bytes, bytes | None]]],
               output: list[tuple[bytes | None, bytes | None, int]]) -> None:
        for name, store in self.logged.items():
            changelogs.setdefault(name, []).extend(store.drain_changelog())
            store.commit({(f"app-{name}-changelog", 0): len(changelogs[name])})
        output.extend(self.uncommitted)
        self.uncommitted.clear()

    def close(self) -> None:
        self.runtime.close()


def _topology(windows: Any) -> tuple[Topology, Any]:
    b = StreamsBuilder()
    serde = (WindowedSerdes.time_windowed(S, windows.size) if isinstance(windows, TimeWindows)
             else WindowedSerdes.session_windowed(S))
    (b.stream("in", Consumed.with_(S, S)).group_by_key().windowed_by(windows).count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream().to("out", Produced.with_(serde, L)))
    return b.build(), serde


def _run_with_crashes(topology: Topology, records: list[tuple[str, int]], tmp: Path, crash_every: int,
                      commit_every: int) -> list[tuple[bytes | None, bytes | None, int]]:
    changelogs: dict[str, list[tuple[bytes, bytes | None]]] = {}
    output: list[tuple[bytes | None, bytes | None, int]] = []
    committed_pos = 0
    incarnation = 0
    while committed_pos < len(records):
        incarnation += 1
        task = MiniTask(topology, tmp / f"run{incarnation}", changelogs)  # a wiped state directory
        pos = committed_pos
        processed = 0
        crashed = False
        while pos < len(records):
            k, ts = records[pos]
            task.runtime.process_input("in", 0, pos, S.serialize("in", k), b"x", ts)
            pos += 1
            processed += 1
            if processed % commit_every == 0:
                task.commit(changelogs, output)
                committed_pos = pos
            if processed == crash_every:
                crashed = True
                break  # kill -9: uncommitted output and changelog records are lost
        if not crashed:
            task.commit(changelogs, output)
            committed_pos = pos
        task.close()
    return output


@pytest.mark.parametrize("windows", [TimeWindows.of_size_and_grace(10, 3),
                                     SessionWindows.of_inactivity_gap_and_grace(4, 2)], ids=["tumbling", "session"])
def test_final_results_exactly_once_across_crashes(tmp_path: Path, windows: Any) -> None:
    rng = random.Random(11)
    records = []
    t = 0
    for _ in range(400):
        t += rng.choice([0, 1, 1, 2, 7])
        records.append((rng.choice("abcde"), max(0, t - rng.randint(0, 4))))  # some out of order
    records.append(("flush", t + 1000))  # closes every window
    topology, serde = _topology(windows)
    reference = _run_with_crashes(topology, records, tmp_path / "ref", crash_every=10**9, commit_every=7)
    crashed = _run_with_crashes(topology, records, tmp_path / "crash", crash_every=23, commit_every=5)

    def decode(out: list[tuple[bytes | None, bytes | None, int]]) -> list[tuple[Windowed, int]]:
        decoded = []
        for k, v, _ in out:
            w, n = serde.deserialize("out", k), L.deserialize("out", v)
            assert w is not None and n is not None  # final results: never a tombstone
            decoded.append((w, n))
        return decoded

    ref, got = decode(reference), decode(crashed)
    assert ref, "no final results at all"
    # each window is emitted once, with the same final count as the run without crashes
    assert Counter(w for w, _ in got) == Counter(w for w, _ in ref)
    assert max(Counter(w for w, _ in got).values()) == 1
    assert sorted(got) == sorted(ref)
    # the windowed counts add up to the input (the late "flush" record's own window is open)
    total = sum(n for w, n in got)
    assert total == len(records) - 1 - _dropped_late(windows, records[:-1])


def _dropped_late(windows: Any, records: list[tuple[str, int]]) -> int:
    """Records the aggregation drops for arriving after their window closed (stream time based)."""
    observed = -1
    dropped = 0
    sessions: dict[str, list[list[int]]] = {}
    for k, ts in records:
        observed = max(observed, ts)
        if isinstance(windows, TimeWindows):
            end = (ts // windows.size) * windows.size + windows.size
            if end <= observed - windows.grace:
                dropped += 1
        else:
            # a session record is late when the session it would join/create ends before close
            close = observed - windows.grace
            merged = [s for s in sessions.get(k, []) if s[1] >= ts - windows.gap and s[0] <= ts + windows.gap]
            start = min([ts] + [s[0] for s in merged])
            end = max([ts] + [s[1] for s in merged])
            if end < close:
                dropped += 1
                continue
            rest = [s for s in sessions.get(k, []) if s not in merged]
            sessions[k] = [*rest, [start, end]]
    return dropped


def test_restored_buffer_keeps_pending_windows(tmp_path: Path) -> None:
    """A window still open at the crash is emitted after the restart, from the restored buffer."""
    topology, serde = _topology(TimeWindows.of_size_and_grace(10, 0))
    changelogs: dict[str, list[tuple[bytes, bytes | None]]] = {}
    output: list[tuple[bytes | None, bytes | None, int]] = []
    task = MiniTask(topology, tmp_path / "a", changelogs)
    for i, (k, ts) in enumerate([("a", 1), ("a", 2), ("b", 3)]):
        task.runtime.process_input("in", 0, i, S.serialize("in", k), b"x", ts)
    task.commit(changelogs, output)
    task.close()
    assert output == []
    assert any(name.startswith("KTABLE-SUPPRESS-STATE-STORE") for name in changelogs)
    task = MiniTask(topology, tmp_path / "b", changelogs)  # empty directory: restore only
    task.runtime.process_input("in", 0, 3, S.serialize("in", "c"), b"x", 10)  # closes [0, 10)
    task.commit(changelogs, output)
    task.close()
    got = [(serde.deserialize("out", k), L.deserialize("out", v), ts) for k, v, ts in output]
    assert got == [(Windowed("a", Window(0, 10)), 2, 2), (Windowed("b", Window(0, 10)), 1, 3)]
