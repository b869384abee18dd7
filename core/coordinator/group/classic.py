"""Classic consumer groups: Kafka's JoinGroup / SyncGroup / Heartbeat / LeaveGroup state machine.

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable (and Dead once deleted).
A rebalance starts when a member joins, leaves, changes its protocols or misses its session
timeout. JoinGroup is a long poll: every member's request waits (a future) until all known
members have rejoined or the rebalance timeout expires; members that did not rejoin are
removed. The first rebalance of an Empty group waits ``group.initial.rebalance.delay.ms``
(extended while members keep arriving, up to the rebalance timeout) so a starting fleet lands
in one generation. The leader's SyncGroup carries the assignment; it is persisted as a
GroupMetadataValue record before any member gets its share, so a restart restores the
generation, the members and their assignments. Timers are asyncio ``call_later`` handles; all
of this runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.coordinator.group.records import GroupMetadataValue, MemberMetadata
from strom.core.errors import KafkaError

if TYPE_CHECKING:
    from strom.core.coordinator.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)
UNKNOWN_MEMBER_ID = int(ErrorCode.unknown_member_id)
ILLEGAL_GENERATION = int(ErrorCode.illegal_generation)
REBALANCE_IN_PROGRESS = int(ErrorCode.rebalance_in_progress)
FENCED_INSTANCE_ID = int(ErrorCode.fenced_instance_id)
MEMBER_ID_REQUIRED = int(ErrorCode.member_id_required)
INCONSISTENT_GROUP_PROTOCOL = int(ErrorCode.inconsistent_group_protocol)
COORDINATOR_NOT_AVAILABLE = int(ErrorCode.coordinator_not_available)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class JoinResult:
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False, slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    heartbeat_handle: asyncio.TimerHandle | None = None
    # Joined for the first time and no JoinGroup answered yet: it cannot heartbeat, so it expires
    # after the new-member join timeout even while its JoinGroup waits (Kafka's isNew).
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()


def _resolve(fut: asyncio.Future[Any] | None, result: Any) -> None:
    if fut is not None and not fut.done():
        fut.set_result(result)


class ClassicGroup:
    """One classic group and its rebalance protocol (see the module docstring)."""

    group_type = "classic"

    def __init__(self, coordinator: GroupCoordinator, group_id: str) -> None:
        self.coordinator = coordinator
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = int(time.time() * 1000)
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}          # group.instance.id -> member id
        self.pending_members: dict[str, asyncio.TimerHandle] = {}  # KIP-394: id handed out, not joined yet
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self._join_timer: asyncio.TimerHandle | None = None
        self._sync_timer: asyncio.TimerHandle | None = None
        self._initial_delay = False

    # -- views --------------------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only; ``None`` if unknown)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def _loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    def _transition(self, state: GroupState) -> None:
        self.state = state
        self.state_timestamp = int(time.time() * 1000)

    # -- protocol selection -------------------------------------------------------------------

    def _supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        common = self._candidates()
        return any(name in common for name, _ in protocols)

    def _candidates(self, members: list[ClassicMember] | None = None) -> set[str]:
        members = list(self.members.values()) if members is None else members
        common: set[str] | None = None
        for m in members:
            names = {name for name, _ in m.protocols}
            common = names if common is None else common & names
        return common or set()

    def _select_protocol(self) -> str:
        candidates = self._candidates()
        if not candidates:
            raise KafkaError("no protocol is supported by every member")
        votes = Counter(next(name for name, _ in m.protocols if name in candidates) for m in self.members.values())
        # Kafka takes the most voted candidate; ties go to the first member's preference.
        return max(votes, key=lambda name: votes[name])

    # -- JoinGroup ----------------------------------------------------------------------------

    async def join(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                   session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        if self.state is GroupState.DEAD:
            return JoinResult(COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not self._supports(protocol_type, protocols):
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if group_instance_id:
                old_id = self.static_members.get(group_instance_id)
                if old_id is not None and old_id in self.members:
                    return await self._replace_static_member(old_id, new_id, client_id, client_host,
                                                             session_timeout_ms, rebalance_timeout_ms,
                                                             protocol_type, protocols)
            elif require_known_member_id:
                # KIP-394: hand out the id; the member must come back with it within its session.
                self.pending_members[new_id] = self._loop().call_later(
                    session_timeout_ms / 1000, self._expire_pending_member, new_id)
                return JoinResult(MEMBER_ID_REQUIRED, member_id=new_id)
            return await self._add_member_and_rebalance(new_id, group_instance_id, client_id, client_host,
                                                        session_timeout_ms, rebalance_timeout_ms,
                                                        protocol_type, protocols)
        handle = self.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()
            return await self._add_member_and_rebalance(member_id, group_instance_id, client_id, client_host,
                                                        session_timeout_ms, rebalance_timeout_ms,
                                                        protocol_type, protocols)
        member = self.members.get(member_id)
        if group_instance_id and self.static_members.get(group_instance_id, member_id) != member_id:
            return JoinResult(FENCED_INSTANCE_ID, member_id=member_id)
        if member is None or self.state is GroupState.EMPTY:
            return JoinResult(UNKNOWN_MEMBER_ID, member_id=member_id)
        same = member.protocols == protocols
        if self.state is GroupState.PREPARING_REBALANCE:
            return await self._update_member_and_rebalance(member, session_timeout_ms, rebalance_timeout_ms,
                                                           protocols)
        if self.state is GroupState.COMPLETING_REBALANCE and same:
            return self._join_result(member)
        if self.state is GroupState.STABLE and same and member_id != self.leader_id:
            # A follower rejoining with nothing new: answer with the current generation.
            self._schedule_heartbeat(member)
            return self._join_result(member, with_members=False)
        return await self._update_member_and_rebalance(member, session_timeout_ms, rebalance_timeout_ms,
                                                       protocols)

    def _join_result(self, member: ClassicMember, *, with_members: bool = True,
                     skip_assignment: bool = False) -> JoinResult:
        is_leader = member.member_id == self.leader_id
        members = ([(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                    for m in self.members.values()] if is_leader and with_members else [])
        return JoinResult(NONE, self.generation_id, self.protocol_type, self.protocol_name, self.leader_id or "",
                          member.member_id, members, skip_assignment)

    async def _add_member_and_rebalance(self, member_id: str, group_instance_id: str | None, client_id: str,
                                        client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                                        protocol_type: str, protocols: list[tuple[str, bytes]]) -> JoinResult:
        member = ClassicMember(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                               session_timeout_ms, protocol_type, list(protocols), is_new=True)
        if not self.members:
            self.protocol_type = protocol_type
        self.members[member_id] = member
        if group_instance_id:
            self.static_members[group_instance_id] = member_id
        fut: asyncio.Future[JoinResult] = self._loop().create_future()
        member.join_future = fut
        self.new_member_added = True
        # As Kafka: a new member cannot heartbeat while its JoinGroup is parked and a client that
        # disconnected (a request timeout during a long rebalance) retries as another new member,
        # so new members expire after the new-member join timeout, whatever the rebalance timeout.
        self._schedule_heartbeat(member, self.coordinator.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(f"member {member_id} joined")
        self._try_complete_join()
        return await asyncio.shield(fut)

    async def _update_member_and_rebalance(self, member: ClassicMember, session_timeout_ms: int,
                                           rebalance_timeout_ms: int,
                                           protocols: list[tuple[str, bytes]]) -> JoinResult:
        member.protocols = list(protocols)
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        _resolve(member.join_future, JoinResult(REBALANCE_IN_PROGRESS, member_id=member.member_id))
        fut: asyncio.Future[JoinResult] = self._loop().create_future()
        member.join_future = fut
        self._schedule_heartbeat(member)
        self._maybe_prepare_rebalance(f"member {member.member_id} rejoined")
        self._try_complete_join()
        return await asyncio.shield(fut)

    async def _replace_static_member(self, old_id: str, new_id: str, client_id: str, client_host: str,
                                     session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                                     protocols: list[tuple[str, bytes]]) -> JoinResult:
        """A static member rejoined without its member id: the new id replaces (fences) the old one."""
        member = self.members.pop(old_id)
        old_protocols = member.protocols
        _resolve(member.join_future, JoinResult(FENCED_INSTANCE_ID, member_id=old_id))
        _resolve(member.sync_future, SyncResult(FENCED_INSTANCE_ID))
        member.join_future = member.sync_future = None
        member.member_id = new_id
        member.client_id, member.client_host = client_id, client_host
        self.members[new_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        was_leader = self.leader_id == old_id
        if was_leader:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        if self.state is GroupState.STABLE and old_protocols == protocols:
            # Kafka persists the new member id and answers with the current generation: no rebalance.
            generation = self.generation_id
            try:
                await self.coordinator.store_group(self)
            except KafkaError as e:
                if self.members.get(new_id) is member:  # undo the replacement
                    del self.members[new_id]
                    member.member_id = old_id
                    self.members[old_id] = member
                    self.static_members[member.group_instance_id] = old_id
                    if was_leader:
                        self.leader_id = old_id
                return JoinResult(e.errno, member_id="")
            if self.generation_id == generation and self.state is GroupState.STABLE:
                self._schedule_heartbeat(member)
                return self._join_result(member, skip_assignment=was_leader)
        return await self._update_member_and_rebalance(member, session_timeout_ms, rebalance_timeout_ms, protocols)

    # -- rebalance ----------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, reason: str) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(reason)

    def _prepare_rebalance(self, reason: str) -> None:
        log.info("group %s: preparing rebalance (%s)", self.group_id, reason)
        if self.state is GroupState.COMPLETING_REBALANCE:
            self._propagate_sync_error(REBALANCE_IN_PROGRESS)
        self._cancel(self._sync_timer)
        self._cancel(self._join_timer)
        self.pending_sync.clear()
        was_empty = self.state is GroupState.EMPTY
        self._transition(GroupState.PREPARING_REBALANCE)
        delay = self.coordinator.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            self._initial_delay = True
            self.new_member_added = False
            remaining = max(self.rebalance_timeout_ms - delay, 0)
            self._join_timer = self._loop().call_later(delay / 1000, self._on_initial_delay, delay, remaining)
        else:
            self._initial_delay = False
            self._join_timer = self._loop().call_later(self.rebalance_timeout_ms / 1000, self._complete_join)

    def _on_initial_delay(self, delay: int, remaining: int) -> None:
        # Members kept arriving: wait once more (bounded by the rebalance timeout).
        if self.new_member_added and remaining > 0:
            self.new_member_added = False
            step = min(delay, remaining)
            self._join_timer = self._loop().call_later(step / 1000, self._on_initial_delay, delay, remaining - step)
            return
        self._initial_delay = False
        self._complete_join()

    def _try_complete_join(self) -> None:
        if (self.state is GroupState.PREPARING_REBALANCE and not self._initial_delay and not self.pending_members
                and all(m.awaiting_join for m in self.members.values())):
            self._complete_join()

    def _complete_join(self) -> None:
        if self.state is not GroupState.PREPARING_REBALANCE:
            return
        self._cancel(self._join_timer)
        self._join_timer = None
        self._initial_delay = False
        for member in [m for m in self.members.values() if not m.awaiting_join]:
            log.info("group %s: removing member %s, it did not rejoin in time", self.group_id, member.member_id)
            self._remove(member)
        for member_id in list(self.pending_members):
            self.pending_members.pop(member_id).cancel()
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self._transition(GroupState.EMPTY)
            self.coordinator.store_group_later(self)
            return
        self.protocol_name = self._select_protocol()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self._transition(GroupState.COMPLETING_REBALANCE)
        log.info("group %s: generation %d with %d member(s), protocol %s", self.group_id, self.generation_id,
                 len(self.members), self.protocol_name)
        for member in self.members.values():
            member.assignment = b""
            member.is_new = False
            fut, member.join_future = member.join_future, None
            _resolve(fut, self._join_result(member))
            self._schedule_heartbeat(member)
        self.pending_sync = set(self.members)
        generation = self.generation_id
        self._sync_timer = self._loop().call_later(self.rebalance_timeout_ms / 1000, self._expire_sync, generation)

    def _expire_sync(self, generation: int) -> None:
        """Members that did not SyncGroup within the rebalance timeout are removed."""
        if self.state is not GroupState.COMPLETING_REBALANCE or self.generation_id != generation:
            return
        for member_id in list(self.pending_sync):
            member = self.members.get(member_id)
            if member is not None:
                self._remove(member)
        self.pending_sync.clear()
        self._prepare_rebalance("members did not sync in time")
        self._try_complete_join()

    def _propagate_sync_error(self, error: int) -> None:
        for m in self.members.values():
            m.assignment = b""
            fut, m.sync_future = m.sync_future, None
            _resolve(fut, SyncResult(error))

    # -- SyncGroup ----------------------------------------------------------------------------

    async def sync(self, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        error = self._validate_member(member_id, group_instance_id, generation_id)
        if error:
            return SyncResult(error)
        if (protocol_type and protocol_type != self.protocol_type) or (
                protocol_name and protocol_name != self.protocol_name):
            return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
        member = self.members[member_id]
        if self.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(REBALANCE_IN_PROGRESS)
        if self.state is GroupState.STABLE:
            self._schedule_heartbeat(member)
            return SyncResult(NONE, self.protocol_type, self.protocol_name, member.assignment)
        # CompletingRebalance: wait for the leader's assignment.
        fut: asyncio.Future[SyncResult] = self._loop().create_future()
        _resolve(member.sync_future, SyncResult(REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        self.pending_sync.discard(member_id)
        if member_id == self.leader_id:
            await self._complete_sync(assignments)
        return await asyncio.shield(fut)

    async def _complete_sync(self, assignments: dict[str, bytes]) -> None:
        generation = self.generation_id
        full = {mid: assignments.get(mid, b"") for mid in self.members}
        try:
            await self.coordinator.store_group(self, full)
        except KafkaError as e:
            if self.state is GroupState.COMPLETING_REBALANCE and self.generation_id == generation:
                self._propagate_sync_error(e.errno)
                self._prepare_rebalance(f"storing the assignment failed: {e}")
            return
        if self.state is not GroupState.COMPLETING_REBALANCE or self.generation_id != generation:
            return
        self._cancel(self._sync_timer)
        self._sync_timer = None
        self._transition(GroupState.STABLE)
        for mid, m in self.members.items():
            m.assignment = full.get(mid, b"")
            fut, m.sync_future = m.sync_future, None
            _resolve(fut, SyncResult(NONE, self.protocol_type, self.protocol_name, m.assignment))
            self._schedule_heartbeat(m)

    # -- Heartbeat / LeaveGroup ---------------------------------------------------------------

    def heartbeat(self, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        error = self._validate_member(member_id, group_instance_id, generation_id)
        if error:
            return error
        self._schedule_heartbeat(self.members[member_id])
        if self.state is GroupState.PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    def _validate_member(self, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        if self.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if group_instance_id and self.static_members.get(group_instance_id, member_id) != member_id:
            return FENCED_INSTANCE_ID
        if member_id not in self.members or self.state is GroupState.EMPTY:
            return UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ILLEGAL_GENERATION
        return NONE

    def leave(self, members: list[tuple[str, str | None]]) -> list[int]:
        """Remove each (member id, group instance id); returns an error code per member."""
        out = []
        for member_id, instance_id in members:
            if instance_id:
                known = self.static_members.get(instance_id)
                if known is None:
                    out.append(UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    out.append(FENCED_INSTANCE_ID)
                    continue
                member_id = known
            handle = self.pending_members.pop(member_id, None)
            if handle is not None:
                handle.cancel()
                out.append(NONE)
                self._try_complete_join()
                continue
            member = self.members.get(member_id)
            if member is None:
                out.append(UNKNOWN_MEMBER_ID)
                continue
            self._remove_and_update(member, f"member {member_id} left")
            out.append(NONE)
        return out

    def _remove(self, member: ClassicMember) -> None:
        self._cancel(member.heartbeat_handle)
        _resolve(member.join_future, JoinResult(UNKNOWN_MEMBER_ID, member_id=member.member_id))
        _resolve(member.sync_future, SyncResult(UNKNOWN_MEMBER_ID))
        self.members.pop(member.member_id, None)
        self.pending_sync.discard(member.member_id)
        if member.group_instance_id and self.static_members.get(member.group_instance_id) == member.member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member.member_id:
            self.leader_id = next((m.member_id for m in self.members.values() if m.awaiting_join), None)

    def _remove_and_update(self, member: ClassicMember, reason: str) -> None:
        self._remove(member)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(reason)
        self._try_complete_join()

    # -- timers -------------------------------------------------------------------------------

    def _schedule_heartbeat(self, member: ClassicMember, timeout_ms: int | None = None) -> None:
        self._cancel(member.heartbeat_handle)
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_handle = self._loop().call_later(timeout / 1000, self._expire_member, member)

    def _expire_member(self, member: ClassicMember) -> None:
        if self.members.get(member.member_id) is not member:
            return
        if member.is_new:
            log.info("group %s: new member %s did not complete its join in time", self.group_id, member.member_id)
            # Kafka answers the parked JoinGroup with UNKNOWN_MEMBER_ID and no member id: a client
            # still there joins again.
            _resolve(member.join_future, JoinResult(UNKNOWN_MEMBER_ID, member_id=""))
            self._remove_and_update(member, f"new member {member.member_id} expired")
            return
        if member.awaiting_join or member.awaiting_sync:
            # A member in a long poll is alive; its request's own timeout bounds the wait.
            self._schedule_heartbeat(member)
            return
        log.info("group %s: member %s missed its session timeout", self.group_id, member.member_id)
        self._remove_and_update(member, f"member {member.member_id} session expired")

    def _expire_pending_member(self, member_id: str) -> None:
        if self.pending_members.pop(member_id, None) is not None:
            self._try_complete_join()

    @staticmethod
    def _cancel(handle: asyncio.TimerHandle | None) -> None:
        if handle is not None:
            handle.cancel()

    def close(self) -> None:
        """Cancel timers and fail waiting requests (broker shutdown or group deletion)."""
        self._cancel(self._join_timer)
        self._cancel(self._sync_timer)
        for handle in self.pending_members.values():
            handle.cancel()
        for m in self.members.values():
            self._cancel(m.heartbeat_handle)
            _resolve(m.join_future, JoinResult(COORDINATOR_NOT_AVAILABLE, member_id=m.member_id))
            _resolve(m.sync_future, SyncResult(COORDINATOR_NOT_AVAILABLE))

    # -- persistence --------------------------------------------------------------------------

    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        members = [MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                  m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata(self.protocol_name),
                                  (assignments or {}).get(m.member_id, m.assignment))
                   for m in self.members.values()]
        return GroupMetadataValue(self.protocol_type or "", self.generation_id, self.protocol_name, self.leader_id,
                                  int(time.time() * 1000), members)

    @classmethod
    def from_record(cls, coordinator: GroupCoordinator, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        group = cls(coordinator, group_id)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        if value.current_state_timestamp > 0:
            group.state_timestamp = value.current_state_timestamp
        for m in value.members:
            protocols = [(value.protocol, m.subscription)] if value.protocol else []
            member = ClassicMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.rebalance_timeout or m.session_timeout, m.session_timeout,
                                   value.protocol_type, protocols, m.assignment)
            group.members[m.member_id] = member
            if m.group_instance_id:
                group.static_members[m.group_instance_id] = m.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    def start_timers(self) -> None:
        """After loading: members must heartbeat within their session or be removed."""
        for m in self.members.values():
            self._schedule_heartbeat(m)


def parse_subscription_topics(data: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (int16 version, then an int16-string array)."""
    try:
        pos = 2
        n = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        pos += 4
        topics = []
        for _ in range(max(n, 0)):
            size = int.from_bytes(data[pos:pos + 2], "big", signed=True)
            pos += 2
            if size < 0 or pos + size > len(data):
                return None
            topics.append(data[pos:pos + size].decode())
            pos += size
        return topics
    except (UnicodeDecodeError, ValueError):
        return None
