"""The share-group records of ``__consumer_offsets`` (record types 10..15, Kafka 4.3.1's schemas),
and the share assignor taken from the assignor hook (``group.share.assignors``).

Byte layouts checked by hand against the JSON schemas (ShareGroupMetadataValue's MetadataHash is
a plain int64, not tagged as in ConsumerGroupMetadataValue; AssignmentTimestamp is tag 0), and
a group rebuilt from the records its changes wrote equals the group that wrote them.
"""

from __future__ import annotations

import uuid

from strom.core.config import BrokerConfig
from strom.core.coordinator.group import records as R
from strom.core.coordinator.group import share_group_service as sgs
from strom.core.coordinator.share.assignor import SimpleAssignor
from strom.core.coordinator.share.share_group import ShareGroup
from strom.plugins.hookspecs.assignors import (
    ConsumerGroupPartitionAssignor,
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    SubscribedTopicDescriber,
)
from strom.plugins.manager import get_plugin_manager, load_assignors
from strom.plugins.markers import hookimpl

T1 = uuid.UUID(int=1)
TOPICS = {"t1": (T1, 3)}


def test_key_types_and_value_bytes() -> None:
    key, value = R.encode_record(R.ShareGroupMetadataKey("g"), R.ShareGroupMetadataValue(epoch=5, metadata_hash=7))
    assert key == b"\x00\x0b" + b"\x00\x01g"
    assert value == b"\x00\x00" + (5).to_bytes(4, "big") + (7).to_bytes(8, "big") + b"\x00"
    _, value = R.encode_record(R.ShareGroupTargetAssignmentMetadataKey("g"),
                               R.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=2, assignment_timestamp=9))
    assert value == b"\x00\x00" + (2).to_bytes(4, "big") + b"\x01\x00\x08" + (9).to_bytes(8, "big")
    keys = {R.ShareGroupMemberMetadataKey: 10, R.ShareGroupMetadataKey: 11, R.ShareGroupTargetAssignmentMetadataKey: 12,
            R.ShareGroupTargetAssignmentMemberKey: 13, R.ShareGroupCurrentMemberAssignmentKey: 14,
            R.ShareGroupStatePartitionMetadataKey: 15}
    for cls, record_type in keys.items():
        encoded = R.encode_key(cls(group_id="g"))
        assert int.from_bytes(encoded[:2], "big") == record_type
        assert R.decode_key(encoded) == (record_type, cls(group_id="g"))


def _replayed(records: list[sgs.Record], into: ShareGroup | None = None) -> ShareGroup:
    group = into or ShareGroup("g")
    for key, value in records:
        k, v = R.encode_record(key, value)
        decoded = R.decode_key(k)
        assert decoded is not None
        record_type, dkey = decoded
        assert isinstance(dkey, sgs.SHARE_KEYS)
        sgs.replay(group, dkey, R.decode_value(record_type, v))
    return group


def _state(g: ShareGroup) -> tuple[object, ...]:
    return (g.group_epoch, g.assignment_epoch, g.metadata_hash, g.target,
            {m.member_id: (m.member_epoch, m.previous_member_epoch, m.subscribed_topic_names, m.assignment,
                           m.client_id, m.client_host, m.rack_id) for m in g.members.values()})


def test_replaying_the_written_records_rebuilds_the_group() -> None:
    live = ShareGroup("g")
    log: list[sgs.Record] = []
    steps = [("a", 0, ["t1"]), ("b", 0, ["t1"]), ("a", 2, None), ("b", -1, None), ("c", 0, ["t1"])]
    for member, epoch, topics in steps:
        before = sgs._view(live)
        created = not log
        live.heartbeat(member, epoch, topics, topics=TOPICS, now_ms=0, client_id=f"cl-{member}", client_host="/h")
        log += sgs.diff_records(before, live, new_group=created)
        assert _state(_replayed(log)) == _state(live)
    # Expiry writes the member's tombstones and the epoch bump.
    before = sgs._view(live)
    live.session_timeout_ms = 1
    assert sorted(live.expire_members(now_ms=10)) == ["a", "c"]
    log += sgs.diff_records(before, live, new_group=False)
    assert _state(_replayed(log)) == _state(live)
    # Deletion's tombstones remove everything.
    deleted = _replayed(log + sgs.delete_records(live))
    assert deleted.deleted and not deleted.members and not deleted.target


def test_state_partition_metadata_round_trip() -> None:
    g = ShareGroup("g")
    g.initialized = {T1: {0, 2}}
    g.topic_names = {T1: "t1"}
    rebuilt = _replayed([sgs.state_partition_record(g)])
    assert (rebuilt.initialized, rebuilt.topic_names) == ({T1: {0, 2}}, {T1: "t1"})


class RoundRobinShareAssignor:
    """A third-party share assignor: every member gets every partition."""

    share_group_assignor = True

    def name(self) -> str:
        return "everything"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        return GroupAssignment({m: MemberAssignment({t: frozenset(range(topics.num_partitions(t)))
                                                     for t in s.subscribed_topic_ids})
                                for m, s in group_spec.members.items()})


class Plugin:
    @hookimpl
    def strom_assignors(self) -> list[ConsumerGroupPartitionAssignor]:
        return [RoundRobinShareAssignor()]


def test_share_assignors_come_from_the_assignor_hook() -> None:
    pm = get_plugin_manager(autoload=False)
    config = BrokerConfig()
    found = sgs.load_share_assignors(pm, config)
    assert list(found) == ["simple"] and isinstance(found["simple"], SimpleAssignor)
    assert "simple" not in load_assignors(pm, config)  # consumer groups do not pick it by default
    pm.register(Plugin(), name="everything")
    chosen = sgs.load_share_assignors(pm, BrokerConfig.from_mapping({"group.share.assignors": "everything,simple"}))
    assert list(chosen) == ["everything", "simple"]
    group = ShareGroup("g", assignor=chosen["everything"])
    group.heartbeat("a", 0, ["t1"], topics=TOPICS, now_ms=0)
    r = group.heartbeat("b", 0, ["t1"], topics=TOPICS, now_ms=0)
    assert r.assignment == {T1: {0, 1, 2}}
