"""The share-group service's assignment interval, its rollback and its replayed timestamp.

* ``group.share.assignment.interval.ms`` (Kafka 4.3.1's broker config; a GROUP's
  ``share.assignment.interval.ms`` overrides it) decides when a bumped group epoch gets a new
  target: a broker started with 0 recomputes on the heartbeat that bumped it, one started with
  60000 keeps the old target (assignment epoch below the group epoch), also after a kill -9 and
  restart, because the replayed ShareGroupTargetAssignmentMetadata restores the timestamp.
* Out-of-bounds values are refused with Kafka's ``GroupCoordinatorConfig`` messages.
* A heartbeat whose append fails leaves the group exactly as it was: every attribute a heartbeat
  changes is in the service's rollback list (``_STATE_SLOTS``).
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
from diff_wire import WireClient
from kio.schema.errors import ErrorCode
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32

from strom.core.config import BrokerConfig
from strom.core.coordinator.group.share_group_service import (
    _STATE_SLOTS,
    ShareGroupService,
    _save,
    check_assignment_interval,
)
from strom.core.coordinator.share.share_group import ShareGroup
from strom.core.testing import BrokerProcess

# What the service sets from config before each heartbeat: not state a failed append undoes.
CONFIG_ATTRS = {"assignor", "session_timeout_ms", "heartbeat_interval_ms", "max_size", "assignment_interval_ms"}


def heartbeat(wire: WireClient, group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    names = None if topics is None else tuple(TopicName(t) for t in topics)
    r = wire.request(ShareGroupHeartbeatRequest(group_id=GroupId(group), member_id=member, member_epoch=i32(epoch),
                                                rack_id=None, subscribed_topic_names=names))
    assert r.error_code == ErrorCode.none, r
    return r


def epochs(wire: WireClient, group: str) -> tuple[int, int]:
    d = wire.request(ShareGroupDescribeRequest(group_ids=(GroupId(group),), include_authorized_operations=False)).groups[0]
    assert d.error_code == ErrorCode.none, d
    return int(d.group_epoch), int(d.assignment_epoch)


def join_and_bump(wire: WireClient, group: str) -> tuple[str, int]:
    """One member joins (the target is computed at once: there was none) and heartbeats again:
    its partitions are now initialized, so the group epoch moves (Kafka's
    initializedAssignmentPending) and the target is due again."""
    wire.create_topic("iv", 2)
    wire.wait_for_coordinator(group)
    a = str(uuid.uuid4())
    r = heartbeat(wire, group, a, 0, ["iv"])
    assert epochs(wire, group) == (2, 2)
    r = heartbeat(wire, group, a, r.member_epoch)
    return a, int(r.member_epoch)


@pytest.mark.broker
def test_zero_interval_recomputes_on_the_bumping_heartbeat(fresh_broker: BrokerProcess) -> None:
    fresh_broker.config.update({"group.share.assignment.interval.ms": "0"})
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        _, epoch = join_and_bump(wire, "iv0")
        assert (epoch, epochs(wire, "iv0")) == (3, (3, 3))


@pytest.mark.broker
def test_long_interval_holds_the_target_across_restart(fresh_broker: BrokerProcess) -> None:
    # Above the default maximum (15 s), which must be raised with it, as Kafka requires.
    fresh_broker.config.update({"group.share.assignment.interval.ms": "60000",
                                "group.share.max.assignment.interval.ms": "120000"})
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        a, epoch = join_and_bump(wire, "iv1")
        # The default (1 s) would have let a later heartbeat recompute; 60 s does not.
        for _ in range(3):
            epoch = int(heartbeat(wire, "iv1", a, epoch).member_epoch)
        assert (epoch, epochs(wire, "iv1")) == (2, (3, 2))
        fresh_broker.kill()
    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.wait_for_coordinator("iv1")
        assert epochs(wire, "iv1") == (3, 2)
        # Replayed with the timestamp of the first target: still inside the interval.
        r = heartbeat(wire, "iv1", a, epoch)
        assert (int(r.member_epoch), epochs(wire, "iv1")) == (2, (3, 2))


@pytest.mark.unit
@pytest.mark.parametrize(("values", "message"), [
    ({"group.share.assignment.interval.ms": "20000"},
     "group.share.assignment.interval.ms must be less than or equal to group.share.max.assignment.interval.ms"),
    ({"group.share.min.assignment.interval.ms": "2000"},
     "group.share.assignment.interval.ms must be greater than or equal to group.share.min.assignment.interval.ms"),
    ({"group.share.min.assignment.interval.ms": "500", "group.share.max.assignment.interval.ms": "100"},
     "group.share.max.assignment.interval.ms must be greater than or equal to group.share.min.assignment.interval.ms"),
])
def test_interval_bounds_like_group_coordinator_config(tmp_path: Path, values: dict[str, str], message: str) -> None:
    config = BrokerConfig.model_validate({"log.dirs": str(tmp_path), **values})
    with pytest.raises(ValueError, match=message):
        check_assignment_interval(config)
    check_assignment_interval(BrokerConfig.model_validate({"log.dirs": str(tmp_path)}))


def _state(group: ShareGroup) -> dict[str, object]:
    return {k: copy.deepcopy(v) for k, v in vars(group).items() if k not in CONFIG_ATTRS}


def _group_after_two_targets() -> tuple[ShareGroup, dict[str, tuple[uuid.UUID, int]]]:
    topics = {"t": (uuid.uuid4(), 4)}
    g = ShareGroup("g", assignment_interval_ms=1000)
    g.heartbeat("a", 0, ["t"], topics=topics, now_ms=10_000)
    g.initialized = {topics["t"][0]: {0, 1, 2, 3}}
    g.topic_names = {topics["t"][0]: "t"}
    # Initialized partitions are assignable from the heartbeat after the one that saw them.
    for now in (12_000, 13_000):
        g.heartbeat("a", g.members["a"].member_epoch, None, topics=topics, now_ms=now)
    assert g.assignment_epoch == g.group_epoch == 3 and g.assignment_timestamp_ms == 13_000
    return g, topics


@pytest.mark.unit
def test_failed_append_restores_every_changed_attribute() -> None:
    g, topics = _group_after_two_targets()
    before = _state(g)
    saved = _save(g)
    g.heartbeat("b", 0, ["t"], topics=topics, now_ms=14_000)
    after = _state(g)
    changed = {k for k in before if before[k] != after[k]}
    # The join recomputed the target: the timestamp and the seen partitions moved too.
    assert {"group_epoch", "assignment_epoch", "assignment_timestamp_ms", "members", "target"} <= changed
    assert changed <= set(_STATE_SLOTS)
    # The service's rollback (its host is not used when the group existed before).
    ShareGroupService(cast(Any, None))._restore(g, saved, False)
    assert _state(g) == before


@pytest.mark.unit
def test_rollback_restores_the_seen_initialized_partitions() -> None:
    g, topics = _group_after_two_targets()
    g.initialized[uuid.uuid4()] = {0}
    before = _state(g)
    saved = _save(g)
    g.heartbeat("a", g.members["a"].member_epoch, None, topics=topics, now_ms=13_100)
    assert g._initialized_seen != before["_initialized_seen"]
    ShareGroupService(cast(Any, None))._restore(g, saved, False)
    assert _state(g) == before
