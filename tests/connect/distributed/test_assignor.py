"""connect-protocol byte layouts and the incremental cooperative assignor (pure, no broker)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strom.connect.runtime.distributed.assignor import (
    CONFIG_MISMATCH,
    ConnectProtocolError,
    ExtendedAssignment,
    IncrementalCooperativeAssignor,
    WorkerState,
    deserialize_assignment,
    deserialize_metadata,
    join_protocols,
    serialize_assignment,
    serialize_metadata,
)

names = st.text(min_size=1, max_size=12)
task_ids = st.tuples(names, st.integers(0, 1000))


@st.composite
def assignments(draw: st.DrawFn) -> ExtendedAssignment:
    version = draw(st.sampled_from([1, 2]))
    return ExtendedAssignment(
        version, draw(st.sampled_from([0, 1])), draw(st.text(max_size=20)), draw(st.text(max_size=30)),
        draw(st.integers(-1, 2**62)),
        tuple(draw(st.lists(names, unique=True, max_size=4))), tuple(draw(st.lists(task_ids, unique=True, max_size=6))),
        tuple(draw(st.lists(names, unique=True, max_size=3))), tuple(draw(st.lists(task_ids, unique=True, max_size=3))),
        draw(st.integers(0, 2**31 - 1)))


def _normal(a: ExtendedAssignment) -> tuple[object, ...]:
    # The wire groups by connector, so compare as sets.
    return (a.version, a.error, a.leader, a.leader_url, a.config_offset, set(a.connectors), set(a.tasks),
            set(a.revoked_connectors), set(a.revoked_tasks), a.delay)


@given(assignments())
def test_assignment_round_trip(a: ExtendedAssignment) -> None:
    assert _normal(deserialize_assignment(serialize_assignment(a))) == _normal(a)


@given(assignments(), st.text(max_size=40), st.integers(-1, 2**40))
def test_metadata_round_trip(a: ExtendedAssignment, url: str, offset: int) -> None:
    for version in (1, 2):
        got = deserialize_metadata(serialize_metadata(WorkerState(url, offset, a), version))
        assert got.url == url and got.config_offset == offset and got.version == version
        if a.connectors or a.tasks:
            assert got.assignment is not None
            assert set(got.assignment.connectors) == set(a.connectors) and set(got.assignment.tasks) == set(a.tasks)
        else:
            assert got.assignment is None


def test_metadata_bytes_are_kafkas_layout() -> None:
    a = ExtendedAssignment(2, 0, "L", "http://l", 7, ("c",), (("c", 0), ("c", 1)))
    meta = serialize_metadata(WorkerState("http://w:8083", 42, a), 2)
    alloc = (struct.pack(">hh", 2, 0) + struct.pack(">h", 1) + b"L" + struct.pack(">h", 8) + b"http://l"
             + struct.pack(">q", 7)
             + struct.pack(">i", 1) + struct.pack(">h", 1) + b"c" + struct.pack(">iiii", 3, -1, 0, 1)
             + struct.pack(">i", 0) + struct.pack(">i", 0))
    expected = (struct.pack(">h", 2) + struct.pack(">h", 13) + b"http://w:8083" + struct.pack(">q", 42)
                + struct.pack(">i", len(alloc)) + alloc)
    assert meta == expected
    # Version 0 ("default") metadata: no allocation.
    v0 = serialize_metadata(WorkerState("u", 3), 0)
    assert v0 == struct.pack(">hh", 0, 1) + b"u" + struct.pack(">q", 3)
    assert deserialize_metadata(v0) == WorkerState("u", 3, None, 0)
    assert [n for n, _ in join_protocols(WorkerState("u", 3))] == ["sessioned", "compatible"]


@given(st.binary(max_size=60))
def test_garbage_is_rejected_or_decoded_never_crashes(data: bytes) -> None:
    for fn in (deserialize_metadata, deserialize_assignment):
        with contextlib.suppress(ConnectProtocolError):
            fn(data)


def test_truncated_assignment_is_an_error() -> None:
    raw = serialize_assignment(ExtendedAssignment(connectors=("abc",), tasks=(("abc", 0),), delay=5))
    for cut in range(len(raw)):
        with pytest.raises(ConnectProtocolError):
            deserialize_assignment(raw[:cut])


# -- the assignor -----------------------------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Group:
    """Members that apply their assignments as a worker does, around one assignor."""

    def __init__(self, delay_ms: int = 1000) -> None:
        self.clock = Clock()
        self.assignor = IncrementalCooperativeAssignor(delay_ms, self.clock)
        self.held: dict[str, tuple[set[str], set[tuple[str, int]]]] = {}
        self.generation = 0
        self.last: dict[str, ExtendedAssignment] = {}

    def rebalance(self, connectors: dict[str, int], offset: int = 0) -> dict[str, ExtendedAssignment]:
        self.generation += 1
        states = {m: WorkerState(f"http://{m}", offset, ExtendedAssignment(connectors=tuple(c), tasks=tuple(t)))
                  for m, (c, t) in self.held.items()}
        tasks = [(c, i) for c, n in connectors.items() for i in range(n)]
        out = self.assignor.perform_assignment(min(self.held), "http://leader", offset, connectors, tasks,
                                               states, self.generation)
        for m, a in out.items():
            c, t = self.held[m]
            c -= set(a.revoked_connectors)
            t -= set(a.revoked_tasks)
            c |= set(a.connectors)
            t |= set(a.tasks)
        self.last = out
        return out

    def settle(self, connectors: dict[str, int]) -> None:
        """Rebalance until no member is told to revoke (a revocation makes members rejoin)."""
        for _ in range(5):
            out = self.rebalance(connectors)
            if not any(a.revoked_connectors or a.revoked_tasks for a in out.values()):
                return
        raise AssertionError("assignor did not settle")

    def counts(self) -> dict[str, tuple[int, int]]:
        return {m: (len(c), len(t)) for m, (c, t) in self.held.items()}

    def all_tasks(self) -> list[tuple[str, int]]:
        return [t for _, ts in self.held.values() for t in ts]


def test_spreads_connectors_and_tasks_and_rebalances_on_join() -> None:
    g = Group()
    g.held["a"] = (set(), set())
    g.settle({"c1": 4, "c2": 2})
    assert g.counts() == {"a": (2, 6)}
    g.held["b"] = (set(), set())
    g.settle({"c1": 4, "c2": 2})
    assert sorted(g.counts().values()) == [(1, 3), (1, 3)]
    assert sorted(g.all_tasks()) == sorted([("c1", i) for i in range(4)] + [("c2", 0), ("c2", 1)])


def test_lost_tasks_wait_for_the_delay_then_move() -> None:
    g = Group(delay_ms=5000)
    g.held["a"], g.held["b"] = (set(), set()), (set(), set())
    g.settle({"c": 4})
    assert sorted(g.counts().values()) == [(0, 2), (1, 2)]
    gone = g.held.pop("b")
    out = g.rebalance({"c": 4})
    assert out["a"].delay == 5000 and not out["a"].tasks  # held back: b may come back
    g.clock.t += 2
    out = g.rebalance({"c": 4})
    assert 2900 <= out["a"].delay <= 3000 and not out["a"].tasks
    g.clock.t += 3.1
    out = g.rebalance({"c": 4})
    assert out["a"].delay == 0
    assert set(out["a"].tasks) | set(out["a"].connectors) == gone[1] | gone[0]
    assert g.counts() == {"a": (1, 4)}


def test_lost_tasks_go_to_a_new_member_at_once() -> None:
    g = Group(delay_ms=60000)
    g.held["a"], g.held["b"] = (set(), set()), (set(), set())
    g.settle({"c": 4})
    lost = g.held.pop("b")
    assert g.rebalance({"c": 4})["a"].delay == 60000
    g.held["b2"] = (set(), set())
    out = g.rebalance({"c": 4})
    assert out["b2"].delay == 0 and set(out["b2"].tasks) == lost[1]


def test_deleted_connector_is_revoked_and_tasks_shrink() -> None:
    g = Group()
    g.held["a"], g.held["b"] = (set(), set()), (set(), set())
    g.settle({"c": 4, "d": 2})
    out = g.rebalance({"c": 2})
    revoked = {t for a in out.values() for t in a.revoked_tasks}
    assert revoked == {("c", 2), ("c", 3), ("d", 0), ("d", 1)}
    assert {c for a in out.values() for c in a.revoked_connectors} == {"d"}
    g.settle({"c": 2})
    assert sorted(g.all_tasks()) == [("c", 0), ("c", 1)]


def test_duplicates_are_revoked_from_every_holder() -> None:
    a = IncrementalCooperativeAssignor(0)
    both = ExtendedAssignment(tasks=(("c", 0),))
    out = a.perform_assignment("m1", "u", 5, ["c"], [("c", 0)],
                               {"m1": WorkerState("u1", 5, both), "m2": WorkerState("u2", 5, both)}, 1)
    assert out["m1"].revoked_tasks == (("c", 0),) and out["m2"].revoked_tasks == (("c", 0),)
    assert not out["m1"].tasks and not out["m2"].tasks


def test_member_ahead_of_leader_gets_config_mismatch() -> None:
    a = IncrementalCooperativeAssignor(0)
    out = a.perform_assignment("m1", "u", 5, ["c"], [], {"m1": WorkerState("u1", 5), "m2": WorkerState("u2", 9)}, 1)
    assert all(x.error == CONFIG_MISMATCH and x.config_offset == 9 for x in out.values())


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 7), min_size=1, max_size=5),
       st.lists(st.tuples(st.sampled_from(["join", "leave"]), st.sampled_from(["m1", "m2", "m3", "m4"])),
                max_size=8))
def test_every_task_runs_once_and_load_is_balanced(connectors: dict[str, int],
                                                   changes: list[tuple[str, str]]) -> None:
    g = Group(delay_ms=0)  # lost work is handed out at once, so every round can settle
    g.held["m0"] = (set(), set())
    g.settle(connectors)
    for op, m in changes:
        if op == "join" and m not in g.held:
            g.held[m] = (set(), set())
        elif op == "leave" and m in g.held and len(g.held) > 1:
            del g.held[m]
        g.settle(connectors)
        tasks = g.all_tasks()
        assert sorted(tasks) == sorted((c, i) for c, n in connectors.items() for i in range(n))
        conns = [c for cs, _ in g.held.values() for c in cs]
        assert sorted(conns) == sorted(connectors)
        loads = [len(t) for _, t in g.held.values()]
        assert max(loads) - min(loads) <= 1, g.counts()
        cloads = [len(c) for c, _ in g.held.values()]
        assert max(cloads) - min(cloads) <= 1, g.counts()
