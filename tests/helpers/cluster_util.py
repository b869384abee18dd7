"""A cluster of DistributedHerders in one group on the bundled broker, shared by the distributed tests."""

from __future__ import annotations

import functools
import uuid

from strom.connect.plugins import PluginRegistry
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.distributed import DistributedHerder
from strom.core.testing import BrokerProcess, wait_for

wait_for = functools.partial(wait_for, timeout=90.0)


class Cluster:
    """Workers of one Connect group with their own internal topics; ``extra`` worker settings."""

    def __init__(self, broker: BrokerProcess, extra: dict[str, str] | None = None,
                 group_prefix: str = "connect-cluster") -> None:
        suffix = uuid.uuid4().hex[:8]
        self.group = f"{group_prefix}-{suffix}"
        self.config_topic = f"cfg-{suffix}"
        self.base = {
            "bootstrap.servers": broker.bootstrap, "group.id": self.group,
            "config.storage.topic": self.config_topic, "offset.storage.topic": f"off-{suffix}",
            "status.storage.topic": f"st-{suffix}", "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "offset.storage.partitions": "3", "status.storage.partitions": "2",
            "session.timeout.ms": "6000", "heartbeat.interval.ms": "500",
            "scheduled.rebalance.max.delay.ms": "1000", "offset.flush.interval.ms": "200",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            **(extra or {}),
        }
        self.registry = PluginRegistry()
        self.herders: list[DistributedHerder] = []

    def worker(self, port: int) -> DistributedHerder:
        h = DistributedHerder(WorkerConfig.from_mapping({**self.base, "listeners": f"http://127.0.0.1:{port}"}),
                              self.registry)
        h.start()
        self.herders.append(h)
        return h

    def stop_all(self) -> None:
        for h in self.herders:
            h.stop()
        self.herders.clear()


def datagen(topic: str, tasks: int, **extra: str) -> dict[str, str]:
    return {"connector.class": "DatagenConnector", "tasks.max": str(tasks), "kafka.topic": topic,
            "quickstart": "users", "rate": "20", "iterations": "-1", **extra}
