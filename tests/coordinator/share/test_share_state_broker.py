"""The share coordinator's state APIs on strom's broker, over a real socket, across restart and kill -9.

The requests are what a share-partition leader sends (Initialize/Read/Write/Delete
ShareGroupState, ReadShareGroupStateSummary); the answers expected are the ones Apache Kafka
4.3.1 gives to the same requests (probed against the reference broker: INVALID_REQUEST for a
read or write of a state never initialized, FENCED_LEADER_EPOCH with its default text,
re-initializing at the same state epoch allowed, a summary of nothing is start offset -1, any
delivery state and count stored as sent).
"""

from __future__ import annotations

import uuid
from typing import Any

from diff_wire import WireClient
from kio.schema.delete_share_group_state.v0 import request as delete_req
from kio.schema.errors import ErrorCode
from kio.schema.initialize_share_group_state.v0 import request as init_req
from kio.schema.read_share_group_state.v0 import request as read_req
from kio.schema.read_share_group_state_summary.v1 import request as summary_req
from kio.schema.write_share_group_state.v1 import request as write_req
from kio.static.primitive import i8, i16, i32, i64

from strom.core.testing import BrokerProcess

GROUP = "g-share"


class StateClient:
    """The five state requests of one (group, topic id, partition) through a WireClient."""

    def __init__(self, wire: WireClient, topic_id: uuid.UUID, partition: int = 0) -> None:
        self.wire, self.topic_id, self.partition = wire, topic_id, partition

    def _one(self, response: Any) -> Any:
        return response.results[0].partitions[0]

    def initialize(self, state_epoch: int, start_offset: int, partition: int | None = None) -> Any:
        p = init_req.PartitionData(partition=i32(self.partition if partition is None else partition),
                                   state_epoch=i32(state_epoch), start_offset=i64(start_offset))
        return self._one(self.wire.request(init_req.InitializeShareGroupStateRequest(
            group_id=GROUP, topics=(init_req.InitializeStateData(topic_id=self.topic_id, partitions=(p,)),))))

    def read(self, leader_epoch: int) -> Any:
        p = read_req.PartitionData(partition=i32(self.partition), leader_epoch=i32(leader_epoch))
        return self._one(self.wire.request(read_req.ReadShareGroupStateRequest(
            group_id=GROUP, topics=(read_req.ReadStateData(topic_id=self.topic_id, partitions=(p,)),))))

    def write(self, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: list[tuple[int, int, int, int]]) -> Any:
        p = write_req.PartitionData(
            partition=i32(self.partition), state_epoch=i32(state_epoch), leader_epoch=i32(leader_epoch),
            start_offset=i64(start_offset), delivery_complete_count=i32(-1),
            state_batches=tuple(write_req.StateBatch(first_offset=i64(a), last_offset=i64(b), delivery_state=i8(s),
                                                     delivery_count=i16(n)) for a, b, s, n in batches))
        return self._one(self.wire.request(write_req.WriteShareGroupStateRequest(
            group_id=GROUP, topics=(write_req.WriteStateData(topic_id=self.topic_id, partitions=(p,)),))))

    def summary(self) -> Any:
        p = summary_req.PartitionData(partition=i32(self.partition), leader_epoch=i32(-1))
        return self._one(self.wire.request(summary_req.ReadShareGroupStateSummaryRequest(
            group_id=GROUP, topics=(summary_req.ReadStateSummaryData(topic_id=self.topic_id, partitions=(p,)),))))

    def delete(self) -> Any:
        p = delete_req.PartitionData(partition=i32(self.partition))
        return self._one(self.wire.request(delete_req.DeleteShareGroupStateRequest(
            group_id=GROUP, topics=(delete_req.DeleteStateData(topic_id=self.topic_id, partitions=(p,)),))))


def batches_of(result: Any) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches]


def topic_id_of(wire: WireClient, topic: str) -> uuid.UUID:
    md = wire.metadata([topic])
    return md.topics[0].topic_id


def test_state_apis_answer_as_kafka(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    with WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("share-a", 2)
        s = StateClient(wire, topic_id_of(wire, "share-a"))
        r = s.read(0)
        assert (r.error_code, r.error_message) == (ErrorCode.invalid_request,
                                                   "Read operation on uninitialized share partition not allowed.")
        w = s.write(0, 0, -1, [])
        assert (w.error_code, w.error_message) == (ErrorCode.invalid_request,
                                                   "Write operation on uninitialized share partition not allowed.")
        sm = s.summary()
        assert (sm.error_code, sm.start_offset, sm.state_epoch) == (ErrorCode.none, -1, 0)
        assert s.initialize(0, 5, partition=7).error_code == ErrorCode.unknown_topic_or_partition
        assert s.initialize(0, 5).error_code == ErrorCode.none
        assert s.initialize(0, 5).error_code == ErrorCode.none  # the same epoch again is allowed
        r = s.read(0)
        assert (r.error_code, r.state_epoch, r.start_offset, batches_of(r)) == (ErrorCode.none, 0, 5, [])
        assert s.write(0, 0, -1, [(5, 9, 2, 1), (10, 12, 0, 2)]).error_code == ErrorCode.none
        r = s.read(1)  # a newer leader epoch is recorded
        assert batches_of(r) == [(5, 9, 2, 1), (10, 12, 0, 2)]
        r = s.read(0)
        assert (r.error_code, r.error_message) == (
            ErrorCode.fenced_leader_epoch, "The leader epoch in the request is older than the epoch on the broker.")
        sm = s.summary()
        assert (sm.error_code, sm.state_epoch, sm.leader_epoch, sm.start_offset) == (ErrorCode.none, 0, 1, 5)
        assert s.initialize(3, 20).error_code == ErrorCode.none
        assert s.initialize(2, 20).error_code == ErrorCode.fenced_state_epoch
        r = s.read(1)
        assert (r.state_epoch, r.start_offset, batches_of(r)) == (3, 20, [])
        # Kafka 4.3.1's share coordinator does not validate a batch's delivery state or count
        # (probed: -1, 0, 32767 counts and states -1, 4, 5, 127 are stored and read back as sent).
        assert s.write(3, 1, -1, [(20, 24, 127, -1), (25, 25, -1, 32767)]).error_code == ErrorCode.none
        assert batches_of(s.read(1)) == [(20, 24, 127, -1), (25, 25, -1, 32767)]
        assert s.delete().error_code == ErrorCode.none
        assert s.read(1).error_code == ErrorCode.invalid_request


def test_state_survives_restart_and_kill9(fresh_broker: BrokerProcess) -> None:
    """Many updates (past a snapshot) then a clean restart, more updates then kill -9: the state read
    back is the state written, to the last acknowledged write."""
    fresh_broker.start()
    with WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic("share-b", 1)
        topic_id = topic_id_of(wire, "share-b")
        s = StateClient(wire, topic_id)
        assert s.initialize(1, 0).error_code == ErrorCode.none
        # One acknowledged offset per write: 0..599 acknowledged, 600..609 available, delivered twice.
        assert s.write(1, 0, -1, [(0, 609, 0, 2)]).error_code == ErrorCode.none
        for off in range(600):
            assert s.write(1, 0, -1, [(off, off, 2, 2)]).error_code == ErrorCode.none
        assert s.write(1, 0, 600, []).error_code == ErrorCode.none
    expected = [(600, 609, 0, 2)]

    fresh_broker.restart()
    with WireClient(fresh_broker.bootstrap) as wire:
        s = StateClient(wire, topic_id)
        r = s.read(0)
        assert (r.error_code, r.state_epoch, r.start_offset, batches_of(r)) == (ErrorCode.none, 1, 600, expected)
        assert s.write(1, 0, -1, [(600, 601, 4, 3)]).error_code == ErrorCode.none
        assert s.write(1, 0, 602, []).error_code == ErrorCode.none

    fresh_broker.kill()
    fresh_broker.start()
    with WireClient(fresh_broker.bootstrap) as wire:
        s = StateClient(wire, topic_id)
        r = s.read(0)
        assert (r.error_code, r.start_offset, batches_of(r)) == (ErrorCode.none, 602, [(602, 609, 0, 2)])
        sm = s.summary()
        assert (sm.state_epoch, sm.start_offset) == (1, 602)
