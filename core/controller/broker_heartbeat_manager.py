"""Kafka's BrokerHeartbeatManager (KIP-631) for the brokers that register with this controller.

A broker other than this node registers over the controller listener (BrokerRegistration) and
keeps a session by BrokerHeartbeat. As in Kafka 4.3.1 (``BrokerHeartbeatTracker``) the session
is the last contact time of (broker id, broker epoch): a heartbeat sets it, a registration does
not; it is valid while younger than ``broker.session.timeout.ms``. A second incarnation may
register under a broker id only when the first's session is not valid
(DUPLICATE_BROKER_REGISTRATION otherwise). :meth:`BrokerHeartbeatManager.remove_expired` hands
the timer one expired session at a time; the controller fences that broker when the epoch is
still its registration's (``QuorumController.fence_stale_broker``), as Kafka's
``maybeFenceOneStaleBroker``.

The per-broker state (Kafka's ``BrokerHeartbeatState``): the metadata offset of the last
heartbeat, the offset of the broker's last RegisterBrokerRecord (a fenced broker is unfenced
once its ``current_metadata_offset`` reaches it), and the offset of the batch that put it in
controlled shutdown (it may shut down once every active broker has read that far).
:meth:`next_state` is Kafka's ``calculateNextBrokerState``.

This node's own broker registers in process and never heartbeats over the wire: it always has a
valid session and the timer never sees it (it is fenced only by its own controlled shutdown).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

LONG_MAX = (1 << 63) - 1


class BrokerControlState(enum.Enum):
    """Kafka's BrokerControlState: (fenced, in controlled shutdown, should shut down)."""

    FENCED = (True, False, False)
    UNFENCED = (False, False, False)
    CONTROLLED_SHUTDOWN = (False, True, False)
    SHUTDOWN_NOW = (True, False, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def in_controlled_shutdown(self) -> bool:
        return self.value[1]

    @property
    def should_shut_down(self) -> bool:
        return self.value[2]


@dataclass(slots=True)
class _BrokerState:
    fenced: bool
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0


class BrokerHeartbeatManager:
    """Sessions and lifecycle state of the brokers that heartbeat to this controller."""

    def __init__(self, session_timeout_ms: int, local_broker_id: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.session_timeout_s = session_timeout_ms / 1000.0
        self.local_broker_id = local_broker_id
        self._clock = clock
        # (broker id, broker epoch) -> monotonic time of the last heartbeat (Kafka's tracker).
        self._contact: dict[tuple[int, int], float] = {}
        self._brokers: dict[int, _BrokerState] = {}
        # broker id -> offset of its last RegisterBrokerRecord (Kafka's registerBrokerRecordOffsets).
        self._register_offsets: dict[int, int] = {}

    # -- sessions -------------------------------------------------------------------------------

    def track(self, broker_id: int, epoch: int) -> None:
        """A heartbeat arrived (Kafka tracks it before it checks the epoch)."""
        if broker_id != self.local_broker_id:
            self._contact[(broker_id, epoch)] = self._clock()

    def has_valid_session(self, broker_id: int, epoch: int) -> bool:
        if broker_id == self.local_broker_id:
            return True  # in process: alive while this controller is
        contact = self._contact.get((broker_id, epoch))
        return contact is not None and not self._expired(contact, self._clock())

    def _expired(self, contact: float, now: float) -> bool:
        return now > contact + self.session_timeout_s  # Kafka 4.3.1 BrokerHeartbeatTracker.isExpired

    def remove_expired(self) -> tuple[int, int] | None:
        """One expired (broker id, epoch), removed from the tracker; None when no session lapsed."""
        now = self._clock()
        for key, contact in self._contact.items():
            if self._expired(contact, now):
                del self._contact[key]
                return key
        return None

    def seed(self, broker_id: int, epoch: int) -> None:
        """On activation every unfenced registered broker gets a contact time of now (Kafka's
        ClusterControlManager.activate): one that never heartbeats again is fenced a session later."""
        if broker_id != self.local_broker_id:
            self._contact[(broker_id, epoch)] = self._clock()
            self._brokers.setdefault(broker_id, _BrokerState(fenced=False))

    # -- registrations and lifecycle ------------------------------------------------------------

    def register(self, broker_id: int, fenced: bool, register_offset: int, *, new_incarnation: bool) -> None:
        """A RegisterBrokerRecord for ``broker_id`` was written at ``register_offset``."""
        if new_incarnation:
            self._brokers.pop(broker_id, None)
        self._register_offsets[broker_id] = register_offset
        state = self._brokers.get(broker_id)
        if state is None:
            self._brokers[broker_id] = _BrokerState(fenced=fenced)
        else:
            state.fenced = fenced
            if fenced:
                state.controlled_shutdown_offset = -1

    def register_offset(self, broker_id: int) -> int | None:
        return self._register_offsets.get(broker_id)

    def fenced_by_timer(self, broker_id: int) -> None:
        """Kafka's BrokerHeartbeatManager.fence: the broker leaves the active set."""
        state = self._brokers.get(broker_id)
        if state is not None:
            state.fenced = True

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int) -> None:
        state = self._brokers.setdefault(broker_id, _BrokerState(fenced=fenced))
        state.fenced = fenced
        state.metadata_offset = metadata_offset
        if fenced:
            state.controlled_shutdown_offset = -1  # a fenced broker leaves controlled shutdown

    def enter_controlled_shutdown(self, broker_id: int, offset: int) -> None:
        """The batch that put the broker in controlled shutdown ends at ``offset``."""
        state = self._brokers.setdefault(broker_id, _BrokerState(fenced=False))
        if state.controlled_shutdown_offset < 0:
            state.controlled_shutdown_offset = offset

    def lowest_active_offset(self) -> int:
        """The lowest metadata offset of the unfenced brokers not shutting down (this node reads
        the log in process, so it is never behind)."""
        offsets = [s.metadata_offset for b, s in self._brokers.items()
                   if b != self.local_broker_id and not s.fenced and not s.shutting_down]
        return min(offsets, default=LONG_MAX)

    def current_state(self, broker_id: int, fenced: bool) -> BrokerControlState:
        state = self._brokers.get(broker_id)
        if state is not None and state.shutting_down and not fenced:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if fenced else BrokerControlState.UNFENCED

    def next_state(self, broker_id: int, *, fenced: bool, want_fence: bool, want_shut_down: bool,
                   current_metadata_offset: int, register_offset: int,
                   has_leaderships: Callable[[], bool]) -> tuple[BrokerControlState, BrokerControlState]:
        """(current, next) state of a heartbeating broker: Kafka's calculateNextBrokerState.
        ``fenced``: the registration's flag in the latest image."""
        current = self.current_state(broker_id, fenced)
        if current is BrokerControlState.FENCED:
            if want_shut_down:
                return current, BrokerControlState.SHUTDOWN_NOW
            if not want_fence and current_metadata_offset >= register_offset:
                return current, BrokerControlState.UNFENCED
            return current, BrokerControlState.FENCED
        if current is BrokerControlState.UNFENCED:
            if want_fence:
                return current, (BrokerControlState.SHUTDOWN_NOW if want_shut_down else BrokerControlState.FENCED)
            if want_shut_down:
                return current, (BrokerControlState.CONTROLLED_SHUTDOWN if has_leaderships()
                                 else BrokerControlState.SHUTDOWN_NOW)
            return current, BrokerControlState.UNFENCED
        # CONTROLLED_SHUTDOWN: shut down once it leads nothing and every active broker has
        # read the batch that began the controlled shutdown.
        if has_leaderships():
            return current, BrokerControlState.CONTROLLED_SHUTDOWN
        state = self._brokers[broker_id]
        if state.controlled_shutdown_offset <= self.lowest_active_offset():
            return current, BrokerControlState.SHUTDOWN_NOW
        return current, BrokerControlState.CONTROLLED_SHUTDOWN

    def next_check_delay(self) -> float:
        """Seconds until the oldest session lapses (at most one session timeout)."""
        if not self._contact:
            return self.session_timeout_s
        now = self._clock()
        return max(0.0, min(c + self.session_timeout_s for c in self._contact.values()) - now)
