"""Kafka Connect's group protocol for workers: ``connect-protocol`` metadata and assignments, and
the incremental cooperative assignor the group leader runs.

Byte layouts are Kafka's (``ConnectProtocol`` v0, ``IncrementalCooperativeConnectProtocol``
v1 "compatible" and v2 "sessioned"; all big-endian, strings int16-length-prefixed):

- member metadata v0: ``version:int16 url:string config_offset:int64``
- member metadata v1/v2: the same, then ``allocation:nullable_bytes`` holding the member's
  current assignment serialized as below (null when it holds nothing)
- assignment v0: ``version error:int16 leader:string leader_url:string config_offset:int64
  assignment:[connector:string tasks:[int32]]``
- assignment v1/v2: v0, then ``revoked:[connector tasks]`` and ``delay:int32``

A connector instance is the sentinel task ``-1`` inside its connector's entry. Assignments are
*incremental*: a member is sent what it newly gets and what it must give up; it keeps the rest.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from strom.connect.exceptions import ConnectProtocolError

CONNECTOR_TASK = -1
EAGER, COMPATIBLE, SESSIONED = "default", "compatible", "sessioned"
PROTOCOL_VERSIONS = {EAGER: 0, COMPATIBLE: 1, SESSIONED: 2}
NO_ERROR, CONFIG_MISMATCH = 0, 1

TaskId = tuple[str, int]
"""(connector, task number); ``ConnectorTaskId`` compares equal to it."""

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


@dataclass(frozen=True)
class ExtendedAssignment:
    """One member's assignment (Kafka's ``ExtendedAssignment``; v0 has no revoked/delay)."""

    version: int = 2
    error: int = NO_ERROR
    leader: str = ""
    leader_url: str = ""
    config_offset: int = -1
    connectors: tuple[str, ...] = ()
    tasks: tuple[TaskId, ...] = ()
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[TaskId, ...] = ()
    delay: int = 0

    def is_empty(self) -> bool:
        return not (self.connectors or self.tasks or self.revoked_connectors or self.revoked_tasks)


@dataclass(frozen=True)
class WorkerState:
    """What a worker tells the leader when it joins: its REST URL, how far it has read the config
    topic, and what it runs now (v1/v2 only)."""

    url: str
    config_offset: int
    assignment: ExtendedAssignment | None = None
    version: int = 2


# -- primitive codec --------------------------------------------------------------------------

class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def i64(self, v: int) -> None:
        self.parts.append(_I64.pack(v))

    def string(self, s: str) -> None:
        raw = s.encode("utf-8")
        self.i16(len(raw))
        self.parts.append(raw)

    def nullable_bytes(self, b: bytes | None) -> None:
        if b is None:
            self.i32(-1)
        else:
            self.i32(len(b))
            self.parts.append(b)

    def value(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ConnectProtocolError(f"truncated connect-protocol data: need {n} bytes at {self.pos}, "
                                       f"have {len(self.data) - self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise ConnectProtocolError("null string where connect-protocol requires one")
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError:
            raise ConnectProtocolError("string is not valid UTF-8") from None

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n == -1 else bytes(self._take(n))

    def array_len(self) -> int:
        n = self.i32()
        if n < -1 or n > len(self.data) - self.pos:  # every element takes at least one byte
            raise ConnectProtocolError(f"bad array length {n}")
        return n


def _write_connector_assignments(w: _Writer, connectors: Iterable[str], tasks: Iterable[TaskId]) -> None:
    # Kafka's layout groups by connector, the connector's own sentinel first.
    grouped: dict[str, list[int]] = {}
    for c in connectors:
        grouped.setdefault(c, []).append(CONNECTOR_TASK)
    for c, t in tasks:
        grouped.setdefault(c, []).append(t)
    w.i32(len(grouped))
    for c, ts in grouped.items():
        w.string(c)
        w.i32(len(ts))
        for t in ts:
            w.i32(t)


def _read_connector_assignments(r: _Reader) -> tuple[tuple[str, ...], tuple[TaskId, ...]]:
    n = r.array_len()
    connectors: list[str] = []
    tasks: list[TaskId] = []
    for _ in range(max(n, 0)):
        c = r.string()
        m = r.array_len()
        for _ in range(max(m, 0)):
            t = r.i32()
            if t == CONNECTOR_TASK:
                connectors.append(c)
            else:
                tasks.append((c, t))
    return tuple(connectors), tuple(tasks)


def _check_version(version: int) -> None:
    if version < 0:
        raise ConnectProtocolError(f"unsupported connect-protocol version {version}")


# -- assignments ------------------------------------------------------------------------------

def serialize_assignment(a: ExtendedAssignment) -> bytes:
    w = _Writer()
    w.i16(a.version)
    w.i16(a.error)
    w.string(a.leader)
    w.string(a.leader_url)
    w.i64(a.config_offset)
    _write_connector_assignments(w, a.connectors, a.tasks)
    if a.version >= 1:
        _write_connector_assignments(w, a.revoked_connectors, a.revoked_tasks)
        w.i32(a.delay)
    return w.value()


def _read_assignment(r: _Reader) -> ExtendedAssignment:
    version = r.i16()
    _check_version(version)
    error = r.i16()
    leader = r.string()
    leader_url = r.string()
    offset = r.i64()
    connectors, tasks = _read_connector_assignments(r)
    revoked_c: tuple[str, ...] = ()
    revoked_t: tuple[TaskId, ...] = ()
    delay = 0
    if version >= 1:
        revoked_c, revoked_t = _read_connector_assignments(r)
        delay = r.i32()
    return ExtendedAssignment(version, error, leader, leader_url, offset, connectors, tasks,
                              revoked_c, revoked_t, delay)


def deserialize_assignment(data: bytes) -> ExtendedAssignment:
    # Newer versions may append fields; like Kafka, bytes after the known ones are ignored.
    return _read_assignment(_Reader(data))


# -- member metadata --------------------------------------------------------------------------

def serialize_metadata(state: WorkerState, version: int) -> bytes:
    """Member metadata for one protocol version (0 for "default", 1 "compatible", 2 "sessioned")."""
    w = _Writer()
    w.i16(version)
    w.string(state.url)
    w.i64(state.config_offset)
    if version >= 1:
        a = state.assignment
        # Kafka writes a null allocation for an empty assignment.
        if a is None or (not a.connectors and not a.tasks):
            w.nullable_bytes(None)
        else:
            w.nullable_bytes(serialize_assignment(ExtendedAssignment(
                version, a.error, a.leader, a.leader_url, a.config_offset, a.connectors, a.tasks)))
    return w.value()


def deserialize_metadata(data: bytes) -> WorkerState:
    r = _Reader(data)
    version = r.i16()
    _check_version(version)
    url = r.string()
    offset = r.i64()
    assignment = None
    if version >= 1:
        raw = r.nullable_bytes()
        assignment = deserialize_assignment(raw) if raw is not None else None
    return WorkerState(url, offset, assignment, version)


def join_protocols(state: WorkerState, sessioned: bool = True) -> list[tuple[str, bytes]]:
    """The (name, metadata) list a worker joins with, most preferred first (as Kafka's worker
    with ``connect.protocol=sessioned``, or ``compatible`` when ``sessioned`` is False)."""
    out = [(SESSIONED, serialize_metadata(state, 2))] if sessioned else []
    out.append((COMPATIBLE, serialize_metadata(state, 1)))
    return out


# -- the assignor -----------------------------------------------------------------------------

@dataclass
class _Load:
    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)


def _task_sort_key(t: TaskId) -> tuple[str, int]:
    return t[0], t[1]


class IncrementalCooperativeAssignor:
    """Kafka Connect's incremental cooperative assignor, run by the group leader.

    Per round: revoke what is deleted or held twice; keep what members already run; when a
    member left, hold its connectors and tasks back for ``scheduled.rebalance.max.delay.ms``
    (it may come back) unless a new member can take them, and hand them out once the delay
    expires; revoke the excess of overloaded members (only when the previous round revoked
    nothing, so members do not ping-pong); assign everything unassigned to the least loaded
    members. Connectors and tasks are balanced separately, as Kafka does.
    """

    def __init__(self, max_delay_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_delay_ms = max_delay_ms
        self.clock = clock
        self.previous: dict[str, _Load] = {}     # member -> what it holds after the last round
        self.previous_generation = -1
        self.lost_connectors: set[str] = set()   # held back while the delay runs
        self.lost_tasks: set[TaskId] = set()
        self.deadline: float | None = None       # when held-back work is handed out
        self.revoked_last_round = False

    def _now_ms(self) -> float:
        return self.clock() * 1000.0

    def perform_assignment(self, leader_id: str, leader_url: str, config_offset: int,
                           connectors: Iterable[str], tasks: Iterable[TaskId],
                           members: dict[str, WorkerState], generation: int,
                           version: int = 2) -> dict[str, ExtendedAssignment]:
        """Assignments for every member. ``config_offset``/``connectors``/``tasks`` are the
        leader's view of the config topic; members that have read further get CONFIG_MISMATCH,
        as in Kafka, so the leader catches up and the group rejoins."""
        max_offset = max((s.config_offset for s in members.values()), default=config_offset)
        if max_offset > config_offset:
            bad = ExtendedAssignment(version, CONFIG_MISMATCH, leader_id, leader_url, max_offset)
            return dict.fromkeys(members, bad)
        configured_c = set(connectors)
        configured_t = set(tasks)
        # The leader's memory is only valid if it also led the previous generation.
        if generation != self.previous_generation + 1 and self.previous_generation >= 0:
            self.previous = {}

        current: dict[str, _Load] = {}
        for m, s in members.items():
            a = s.assignment
            current[m] = _Load(set(a.connectors), set(a.tasks)) if a is not None else _Load()

        revoke = {m: _Load() for m in members}
        # Deleted connectors/tasks, and anything held by more than one member.
        holders_c: dict[str, list[str]] = {}
        holders_t: dict[TaskId, list[str]] = {}
        for m, load in current.items():
            for c in load.connectors:
                holders_c.setdefault(c, []).append(m)
            for t in load.tasks:
                holders_t.setdefault(t, []).append(m)
        for c, ms in holders_c.items():
            if c not in configured_c or len(ms) > 1:
                for m in ms:
                    revoke[m].connectors.add(c)
        for t, ms in holders_t.items():
            if t not in configured_t or len(ms) > 1:
                for m in ms:
                    revoke[m].tasks.add(t)
        kept = {m: _Load(current[m].connectors - revoke[m].connectors, current[m].tasks - revoke[m].tasks)
                for m in members}
        held_c = set().union(*(k.connectors for k in kept.values())) if kept else set()
        held_t = set().union(*(k.tasks for k in kept.values())) if kept else set()

        # Lost: what the leader gave out last time that no member reports now.
        prev_c = set().union(*(p.connectors for p in self.previous.values())) if self.previous else set()
        prev_t = set().union(*(p.tasks for p in self.previous.values())) if self.previous else set()
        self.lost_connectors |= (prev_c - held_c - set(holders_c)) & configured_c
        self.lost_tasks |= (prev_t - held_t - set(holders_t)) & configured_t
        self.lost_connectors &= configured_c - held_c
        self.lost_tasks &= configured_t - held_t
        new_members = [m for m in members if m not in self.previous] if self.previous else []
        delay = 0
        release_lost = False
        if self.lost_connectors or self.lost_tasks:
            now = self._now_ms()
            if self.max_delay_ms <= 0:
                release_lost = True
            elif self.deadline is None:
                self.deadline = now + self.max_delay_ms
            if self.deadline is not None and now >= self.deadline:
                release_lost = True
            if not release_lost and self.deadline is not None:
                delay = max(int(self.deadline - now), 1)
        else:
            self.deadline = None

        assign = {m: _Load() for m in members}
        if release_lost:
            self.lost_connectors, self.lost_tasks, self.deadline = set(), set(), None
        elif (self.lost_connectors or self.lost_tasks) and new_members:
            # A (re)joined worker takes the held-back work now; no need to wait for the delay.
            self._spread(sorted(self.lost_connectors), sorted(self.lost_tasks, key=_task_sort_key),
                         {m: kept[m] for m in new_members}, {m: assign[m] for m in new_members})
            self.lost_connectors, self.lost_tasks, self.deadline = set(), set(), None
            delay = 0

        pending = not release_lost and (self.lost_connectors or self.lost_tasks)
        revoked_any = any(r.connectors or r.tasks for r in revoke.values())
        if not pending and not revoked_any and not self.revoked_last_round and len(members) > 1:
            # Unassigned work also counts: it will go to the least loaded members this round.
            unassigned_c = len(configured_c - held_c - self.lost_connectors)
            unassigned_t = len(configured_t - held_t - self.lost_tasks)
            self._revoke_excess(kept, revoke, "connectors", unassigned_c)
            self._revoke_excess(kept, revoke, "tasks", unassigned_t)
        revoked_now = any(r.connectors or r.tasks for r in revoke.values())
        held_c = set().union(*(k.connectors for k in kept.values()))
        held_t = set().union(*(k.tasks for k in kept.values()))
        already_c = set().union(*(a.connectors for a in assign.values()))
        already_t = set().union(*(a.tasks for a in assign.values()))
        # Revoked work is handed out in the next round, once its old owner has stopped it.
        revoked_c = set().union(*(r.connectors for r in revoke.values()))
        revoked_t = set().union(*(r.tasks for r in revoke.values()))
        todo_c = sorted(configured_c - held_c - already_c - self.lost_connectors - revoked_c)
        todo_t = sorted(configured_t - held_t - already_t - self.lost_tasks - revoked_t, key=_task_sort_key)
        self._spread(todo_c, todo_t, kept, assign)

        self.previous = {m: _Load(kept[m].connectors | assign[m].connectors, kept[m].tasks | assign[m].tasks)
                         for m in members}
        self.previous_generation = generation
        self.revoked_last_round = revoked_now
        return {m: ExtendedAssignment(
            version, NO_ERROR, leader_id, leader_url, config_offset,
            tuple(sorted(assign[m].connectors)), tuple(sorted(assign[m].tasks, key=_task_sort_key)),
            tuple(sorted(revoke[m].connectors)), tuple(sorted(revoke[m].tasks, key=_task_sort_key)),
            delay) for m in members}

    @staticmethod
    def _revoke_excess(kept: dict[str, _Load], revoke: dict[str, _Load], kind: str, unassigned: int) -> None:
        """Revoke from the most loaded members down to the balanced share of ``kind``."""
        n = len(kept)
        total = sum(len(getattr(k, kind)) for k in kept.values()) + unassigned
        floor, extra = divmod(total, n)
        by_load = sorted(kept, key=lambda m: (-len(getattr(kept[m], kind)), m))
        for i, m in enumerate(by_load):
            allowed = floor + (1 if i < extra else 0)
            items: set[str] | set[TaskId] = getattr(kept[m], kind)
            excess = len(items) - allowed
            if excess > 0:
                victims = sorted(items)[-excess:]
                for v in victims:
                    items.remove(v)  # type: ignore[arg-type]
                    getattr(revoke[m], kind).add(v)

    @staticmethod
    def _spread(todo_c: list[str], todo_t: list[TaskId], base: dict[str, _Load], out: dict[str, _Load]) -> None:
        """Hand each item to the member with the fewest of that kind (ties: member id)."""
        if not out:
            return
        for c in todo_c:
            m = min(out, key=lambda m: (len(base[m].connectors) + len(out[m].connectors), m))
            out[m].connectors.add(c)
        for t in todo_t:
            m = min(out, key=lambda m: (len(base[m].tasks) + len(out[m].tasks), m))
            out[m].tasks.add(t)
