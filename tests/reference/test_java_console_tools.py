"""Kafka's own console consumer and consumer-group tool against strom and against Apache Kafka.

``kafka-console-consumer.sh`` (``ConsoleConsumer``) reads a topic in a group and commits, with the
classic protocol and with KIP-848 (``group.protocol=consumer``, whose Java client commits and
fetches offsets by topic id: OffsetCommit/OffsetFetch v10); ``kafka-consumer-groups.sh``
(``ConsumerGroupCommand``) then shows the committed offsets. The same steps run on both brokers,
so the expectations are Kafka's own.
"""

from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_ref import classpath, ensure_jars
from ref_fixtures import HasBootstrap

PARTITIONS = 3
RECORDS = 30


def run_tool(main_class: str, *args: str) -> str:
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath(ensure_jars()), main_class,
           *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{main_class} {args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """Partition -> CURRENT-OFFSET from ``kafka-consumer-groups.sh --describe --offsets``."""
    out = run_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bootstrap,
                   "--describe", "--offsets", "--group", group)
    rows = [line.split() for line in out.splitlines() if line.startswith(group + " ")]
    return {int(r[2]): int(r[3]) for r in rows}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_console_consumer_commits_and_group_tool_shows_offsets(any_broker: HasBootstrap, protocol: str) -> None:
    bootstrap = any_broker.bootstrap
    topic, group = f"console-{uuid.uuid4().hex[:8]}", f"console-g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    out = run_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bootstrap,
                   "--topic", topic, "--group", group, "--from-beginning", "--max-messages", str(RECORDS),
                   "--command-property", f"group.protocol={protocol}", "--timeout-ms", "60000")
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(RECORDS))
    # The consumer commits on close: every partition at its end.
    assert committed_offsets(bootstrap, group) == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
