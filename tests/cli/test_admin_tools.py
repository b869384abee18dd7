"""``strom topics alter``, ``topics describe``'s Configs column, ``strom configs`` and
``strom perf``: end to end against strom's broker and (where ``any_broker``) Apache Kafka 4.3.1."""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Callable
from typing import Any

Run = Callable[..., subprocess.CompletedProcess[str]]


def test_topics_alter_adds_partitions(any_broker: Any, strom: Run) -> None:
    topic = f"alter-{uuid.uuid4().hex[:8]}"
    bs = ("--bootstrap-server", any_broker.bootstrap)
    assert strom("topics", "create", "--topic", topic, "--partitions", "2", *bs).returncode == 0
    res = strom("topics", "alter", "--topic", topic, "--partitions", "5", *bs)
    assert res.returncode == 0, res.stderr
    res = strom("topics", "describe", "--topic", topic, *bs)
    assert "\tPartitionCount: 5\t" in res.stdout.splitlines()[0]
    res = strom("topics", "alter", "--topic", topic, "--partitions", "3", *bs)
    assert res.returncode == 1 and "INVALID_PARTITIONS" in res.stderr
    res = strom("topics", "alter", "--topic", f"{topic}-missing", "--partitions", "3", *bs)
    assert res.returncode == 1 and "does not exist" in res.stderr


def test_topics_describe_lists_only_the_topics_own_overrides(any_broker: Any, strom: Run) -> None:
    """Kafka 4's controller writes a cluster-wide min.insync.replicas=1; it is not the topic's."""
    topic = f"overrides-{uuid.uuid4().hex[:8]}"
    bs = ("--bootstrap-server", any_broker.bootstrap)
    assert strom("topics", "create", "--topic", topic, *bs).returncode == 0
    res = strom("topics", "describe", "--topic", topic, *bs)
    assert res.stdout.splitlines()[0].endswith("\tConfigs: "), res.stdout
    assert strom("topics", "alter-config", "--topic", topic, "--add-config", "retention.ms=3600000", *bs).returncode == 0
    res = strom("topics", "describe", "--topic", topic, *bs)
    assert res.stdout.splitlines()[0].endswith("\tConfigs: retention.ms=3600000"), res.stdout


def test_configs_describe_and_alter(any_broker: Any, strom: Run) -> None:
    topic = f"configs-{uuid.uuid4().hex[:8]}"
    bs = ("--bootstrap-server", any_broker.bootstrap)
    assert strom("topics", "create", "--topic", topic, *bs).returncode == 0
    res = strom("configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]", *bs)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"Completed updating config for topic {topic}."
    res = strom("configs", "--describe", "--entity-type", "topics", "--entity-name", topic, *bs)
    assert res.returncode == 0, res.stderr
    # kafka-configs.sh's lines. The synonyms after the topic's own differ between brokers (Kafka
    # 4.3.1 lists no DEFAULT_CONFIG synonym of retention.ms, strom lists log.retention.ms).
    lines = res.stdout.splitlines()
    assert lines[0] == f"Dynamic configs for topic {topic} are:"
    assert [line.split(", DEFAULT_CONFIG:")[0].rstrip("}") for line in lines[1:]] == [
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete",
        "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"]
    res = strom("configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--delete-config", "cleanup.policy", *bs)
    assert res.returncode == 0, res.stderr
    res = strom("configs", "--describe", "--entity-type", "topics", "--entity-name", topic, "--all", *bs)
    lines = res.stdout.splitlines()
    assert lines[0] == f"All configs for topic {topic} are:"
    assert "  cleanup.policy=delete sensitive=false synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}" in lines
    res = strom("configs", "--alter", "--entity-type", "topics", "--entity-name", topic,
                "--add-config", "retention.msx=1", *bs)
    assert res.returncode == 1 and "retention.msx" in res.stderr

    # A broker by id: set, describe (DYNAMIC_BROKER_CONFIG), remove.
    res = strom("configs", "--describe", "--entity-type", "brokers", *bs)
    assert res.returncode == 0, res.stderr
    node = re.match(r"Dynamic configs for broker (\d+) are:", res.stdout)
    assert node, res.stdout
    broker_args = ("--entity-type", "brokers", "--entity-name", node.group(1), *bs)
    res = strom("configs", "--alter", "--add-config", "log.cleaner.threads=2", *broker_args)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"Completed updating config for broker {node.group(1)}."
    try:
        res = strom("configs", "--describe", *broker_args)
        assert res.stdout.splitlines()[0] == f"Dynamic configs for broker {node.group(1)} are:"
        assert any(line.startswith("  log.cleaner.threads=2 sensitive=false") for line in res.stdout.splitlines())
    finally:
        assert strom("configs", "--alter", "--delete-config", "log.cleaner.threads", *broker_args).returncode == 0
    res = strom("configs", "--describe", *broker_args)
    assert not any("log.cleaner.threads" in line for line in res.stdout.splitlines())


def test_perf_produce_and_consume(broker: Any, strom: Run) -> None:
    topic = f"perf-{uuid.uuid4().hex[:8]}"
    bs = ("--bootstrap-server", broker.bootstrap)
    assert strom("topics", "create", "--topic", topic, "--partitions", "2", *bs).returncode == 0
    res = strom("perf", "produce", "--topic", topic, "--num-records", "3000", "--record-size", "100",
                "--throughput", "2000", "--reporting-interval", "500", "--producer-props", "acks=1", "linger.ms=5", *bs)
    assert res.returncode == 0, res.stderr
    *windows, total = res.stdout.splitlines()
    # Throttled to 2000 records/s, 3000 records take over a second: window lines came first.
    assert windows and all(re.fullmatch(r"\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), "
                                        r"[\d.]+ ms avg latency, [\d.]+ ms max latency\.", w) for w in windows)
    m = re.fullmatch(r"3000 records sent, [\d.]+ records/sec \(([\d.]+) MB/sec\), [\d.]+ ms avg latency, "
                     r"[\d.]+ ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.", total)
    assert m, total
    p50, p95, p99, p999 = (int(g) for g in m.groups()[1:])
    assert p50 <= p95 <= p99 <= p999

    res = strom("perf", "consume", "--topic", topic, "--messages", "3000", *bs)
    assert res.returncode == 0, res.stderr
    header, row = res.stdout.splitlines()
    assert header.split(", ") == ["start.time", "end.time", "data.consumed.in.MB", "MB.sec", "data.consumed.in.nMsg",
                                  "nMsg.sec", "rebalance.time.ms", "fetch.time.ms", "fetch.MB.sec", "fetch.nMsg.sec"]
    fields = row.split(", ")
    assert fields[2] == f"{3000 * 100 / 1024 / 1024:.4f}" and fields[4] == "3000"


def test_configs_cluster_default(any_broker: Any, strom: Run) -> None:
    """--entity-default: the broker resource with an empty name, sent by the tool itself."""
    args = ("--entity-type", "brokers", "--entity-default", "--bootstrap-server", any_broker.bootstrap)
    key = "log.cleaner.io.max.bytes.per.second"
    res = strom("configs", "--alter", "--add-config", f"{key}=1000000", *args)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "Completed updating default config for brokers in the cluster."
    try:
        res = strom("configs", "--describe", *args)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == "Default configs for brokers in the cluster are:"
        assert (f"  {key}=1000000 sensitive=false synonyms={{DYNAMIC_DEFAULT_BROKER_CONFIG:{key}=1000000}}"
                in lines)
    finally:
        assert strom("configs", "--alter", "--delete-config", key, *args).returncode == 0
    assert key not in strom("configs", "--describe", *args).stdout
