"""BrokerHeartbeatManager's rules on a clock the test moves: Kafka 4.3.1's session tracker
(sessions keyed by broker id and epoch, started by heartbeats, not registrations; this node's own
always valid) and calculateNextBrokerState (the cases of Kafka's BrokerHeartbeatManagerTest
testCalculateNextBrokerState, plus the controlled-shutdown offset wait)."""

from __future__ import annotations

import pytest

from strom.core.controller.broker_heartbeat_manager import BrokerControlState, BrokerHeartbeatManager

FENCED, UNFENCED = BrokerControlState.FENCED, BrokerControlState.UNFENCED
CONTROLLED_SHUTDOWN, SHUTDOWN_NOW = BrokerControlState.CONTROLLED_SHUTDOWN, BrokerControlState.SHUTDOWN_NOW


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def manager(clock: Clock) -> BrokerHeartbeatManager:
    return BrokerHeartbeatManager(10_000, local_broker_id=0, clock=clock)


def test_a_session_starts_with_a_heartbeat_and_lapses_after_the_timeout(manager: BrokerHeartbeatManager,
                                                                         clock: Clock) -> None:
    manager.register(1, fenced=True, register_offset=100, new_incarnation=True)
    assert not manager.has_valid_session(1, 100)  # a registration starts no session
    manager.track(1, 100)
    assert manager.has_valid_session(1, 100) and not manager.has_valid_session(1, 99)
    clock.now += 10  # exactly the timeout: still valid (Kafka's isExpired is strict)
    assert manager.has_valid_session(1, 100) and manager.remove_expired() is None
    assert manager.next_check_delay() == 0
    clock.now += 0.001
    assert not manager.has_valid_session(1, 100)
    assert manager.remove_expired() == (1, 100)
    assert manager.remove_expired() is None  # taken once


def test_this_nodes_session_never_lapses(manager: BrokerHeartbeatManager, clock: Clock) -> None:
    manager.track(0, 5)
    manager.seed(0, 5)
    clock.now += 1e6
    assert manager.has_valid_session(0, 5) and manager.has_valid_session(0, 77)
    assert manager.remove_expired() is None


def test_seeded_sessions_lapse_without_heartbeats(manager: BrokerHeartbeatManager, clock: Clock) -> None:
    manager.seed(2, 7)
    assert manager.has_valid_session(2, 7)
    clock.now += 10.5
    assert manager.remove_expired() == (2, 7)


def _next(m: BrokerHeartbeatManager, fenced: bool, *, want_fence: bool = False, want_shut_down: bool = False,
          offset: int = 0, register_offset: int = 0, leaderships: bool = False) -> BrokerControlState:
    return m.next_state(1, fenced=fenced, want_fence=want_fence, want_shut_down=want_shut_down,
                        current_metadata_offset=offset, register_offset=register_offset,
                        has_leaderships=lambda: leaderships)[1]


def test_calculate_next_broker_state(manager: BrokerHeartbeatManager) -> None:
    manager.register(1, fenced=True, register_offset=100, new_incarnation=True)
    # Fenced: unfenced once caught up with the registration; shut down at once when asked.
    assert _next(manager, True, offset=99, register_offset=100) is FENCED
    assert _next(manager, True, offset=100, register_offset=100) is UNFENCED
    assert _next(manager, True, want_fence=True, offset=100, register_offset=100) is FENCED
    assert _next(manager, True, want_shut_down=True) is SHUTDOWN_NOW
    manager.touch(1, False, 100)
    # Unfenced: want_fence fences (and with want_shut_down shuts down); want_shut_down goes
    # through controlled shutdown while the broker leads something.
    assert _next(manager, False) is UNFENCED
    assert _next(manager, False, want_fence=True) is FENCED
    assert _next(manager, False, want_fence=True, want_shut_down=True) is SHUTDOWN_NOW
    assert _next(manager, False, want_shut_down=True) is SHUTDOWN_NOW
    assert _next(manager, False, want_shut_down=True, leaderships=True) is CONTROLLED_SHUTDOWN


def test_controlled_shutdown_waits_for_the_active_brokers(manager: BrokerHeartbeatManager) -> None:
    for broker in (1, 2):
        manager.register(broker, fenced=True, register_offset=10, new_incarnation=True)
        manager.touch(broker, False, 10)
    manager.enter_controlled_shutdown(1, 50)
    assert manager.current_state(1, fenced=False) is CONTROLLED_SHUTDOWN
    assert _next(manager, False, want_shut_down=True, leaderships=True) is CONTROLLED_SHUTDOWN
    # Leads nothing, but broker 2 has read only up to 10 < 50.
    assert manager.lowest_active_offset() == 10
    assert _next(manager, False, want_shut_down=True) is CONTROLLED_SHUTDOWN
    manager.touch(2, False, 50)
    assert _next(manager, False, want_shut_down=True) is SHUTDOWN_NOW
    # A fenced broker leaves controlled shutdown.
    manager.touch(1, True, 60)
    assert manager.current_state(1, fenced=True) is FENCED
