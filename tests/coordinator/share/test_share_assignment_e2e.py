"""Four confluent-kafka ShareConsumers on a four-partition topic (bench/share_groups.py's shape):
once all four have joined, the group's target gives each one partition, as Kafka 4.3.1's
SimpleAssignor does (strom's old assignor left 186k-355k of 1M records per consumer)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from confluent_kafka import ShareConsumer
from diff_wire import WireClient
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.types import GroupId
from share_kit import produce

from strom.core.testing import BrokerProcess, wait_for


def test_four_share_consumers_on_four_partitions_get_one_each(fresh_broker: BrokerProcess) -> None:
    group, topic = f"e2e-{uuid.uuid4().hex[:6]}", "e2e-four"
    stop = threading.Event()
    consumers: list[ShareConsumer] = []
    threads: list[threading.Thread] = []

    def run(c: ShareConsumer) -> None:
        while not stop.is_set():
            c.poll(0.2)

    with fresh_broker, WireClient(fresh_broker.bootstrap) as wire:
        wire.create_topic(topic, 4)
        wire.wait_for_coordinator(group)
        produce(fresh_broker.bootstrap, topic, 400, 4)
        try:
            for _ in range(4):
                c = ShareConsumer({"bootstrap.servers": fresh_broker.bootstrap, "group.id": group})
                c.subscribe([topic])
                consumers.append(c)
                t = threading.Thread(target=run, args=(c,), daemon=True)
                t.start()
                threads.append(t)

            def balanced() -> Any:
                g = wire.request(ShareGroupDescribeRequest(group_ids=(GroupId(group),),
                                                           include_authorized_operations=False)).groups[0]
                parts = sorted(tuple(p for tp in m.assignment.topic_partitions for p in tp.partitions)
                               for m in g.members)
                return len(g.members) == 4 and parts == [(0,), (1,), (2,), (3,)] and parts

            # Each member takes its target at its next heartbeat (5 s apart): generous timeout.
            wait_for(balanced, 60, "one partition per consumer", interval=0.5)
        finally:
            stop.set()
            for t in threads:
                t.join(10)
            for c in consumers:
                c.close()
