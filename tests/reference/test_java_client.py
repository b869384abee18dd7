"""The official Java client (kafka-clients, via scripts/java_client/ClientCheck.java) against
strom and against Apache Kafka: produce with each acks mode and compression codec, consume the
records back without a group, and run the admin operations a Java application uses.

Every test runs twice (``any_broker``: strom, kafka). The kafka run proves the expectations
are Kafka's real behaviour; the strom run checks strom matches it.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from java_client import ClientRun, JavaClient
from ref_fixtures import HasBootstrap

N_RECORDS = 200
VALUE_BYTES = 100
PATTERN = "strom-kafka-compat-"

# (name, producer properties). Kafka 4 clients default to enable.idempotence=true with
# acks=all, which needs InitProducerId; the other modes switch idempotence off explicitly.
PRODUCE_MODES: list[tuple[str, dict[str, str]]] = [
    *[(f"acks-all-{codec}", {"acks": "all", "enable.idempotence": "false", "compression.type": codec})
      for codec in ("none", "gzip", "snappy", "lz4", "zstd")],
    ("acks-1-none", {"acks": "1", "enable.idempotence": "false"}),
    ("acks-1-lz4", {"acks": "1", "enable.idempotence": "false", "compression.type": "lz4"}),
    ("idempotent-default", {}),
    ("idempotent-zstd", {"compression.type": "zstd"}),
]


def expected_value(i: int, size: int = VALUE_BYTES) -> str:
    """Mirror of ClientCheck.valueOf."""
    chars = list(f"value-{i}-")
    while len(chars) < size:
        chars.append(PATTERN[len(chars) % len(PATTERN)])
    return "".join(chars)


def topic() -> str:
    return f"java-{uuid.uuid4().hex[:10]}"


def check_ok(run: ClientRun) -> None:
    assert run.returncode == 0, run.describe()
    assert not run.ops("fatal"), run.describe()


@pytest.mark.parametrize("props", [p for _, p in PRODUCE_MODES], ids=[n for n, _ in PRODUCE_MODES])
def test_produce_then_consume(any_broker: HasBootstrap, java_client: JavaClient, props: dict[str, str]) -> None:
    name = topic()
    produced = java_client.run("produce", any_broker.bootstrap, name, str(N_RECORDS),
                               "--value-bytes", str(VALUE_BYTES), props=props)
    check_ok(produced)
    summary = produced.one("produce")
    assert summary["errors"] == 0, produced.describe()
    sent = produced.ops("sent")
    assert [s["i"] for s in sent] == list(range(N_RECORDS))
    # An auto-created topic has one partition: offsets are 0..n-1 in send order.
    assert {s["partition"] for s in sent} == {0}
    assert [s["offset"] for s in sent] == list(range(N_RECORDS)), produced.describe()

    consumed = java_client.run("consume", any_broker.bootstrap, name, str(N_RECORDS))
    check_ok(consumed)
    records = consumed.ops("record")
    assert len(records) == N_RECORDS, consumed.describe()
    for i, (rec, s) in enumerate(zip(records, sent, strict=True)):
        assert rec["offset"] == i
        assert rec["key"] == f"key-{i}"
        assert rec["value"] == expected_value(i)
        assert rec["headers"] == {"seq": str(i)}
        assert rec["timestampType"] == "CreateTime"
        assert rec["timestamp"] == s["timestamp"]
        assert rec["leaderEpoch"] >= 0
    end = consumed.one("consume")
    assert end["count"] == N_RECORDS
    assert end["positions"] == {"0": N_RECORDS}


def ops_by_name(run: ClientRun) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in run.lines:
        assert line["op"] not in out, f"duplicate op {line['op']}"
        out[line["op"]] = line
    return out


def test_admin_operations(any_broker: HasBootstrap, java_client: JavaClient) -> None:
    name = topic()
    run = java_client.run("admin", any_broker.bootstrap, name)
    check_ok(run)
    ops = ops_by_name(run)
    ctx = run.describe()

    cluster = ops["describeCluster"]
    assert len(cluster["nodes"]) == 1 and cluster["controller"] in cluster["nodes"], ctx
    node = cluster["nodes"][0]

    assert ops["createTopics"] == {"op": "createTopics", "ok": True}, ctx
    assert ops["createTopicsAgain"]["error"] == "TopicExistsException", ctx
    assert ops["listTopics"]["contains"] is True, ctx

    desc = ops["describeTopics"]
    assert desc["name"] == name and desc["internal"] is False, ctx
    assert desc["topicId"] != "AAAAAAAAAAAAAAAAAAAAAA", ctx  # not Uuid.ZERO_UUID
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2], ctx
    for p in desc["partitions"]:
        assert p["leader"] == node and p["replicas"] == [node] and p["isr"] == [node], ctx

    configs = ops["describeConfigs"]["configs"]
    assert configs["retention.ms"]["value"] == "3600000", ctx
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG", ctx
    assert configs["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG", ctx
    assert configs["segment.bytes"] == {"value": "1073741824", "source": "DEFAULT_CONFIG", "isDefault": True,
                                        "readOnly": False, "sensitive": False, "type": "INT"}, ctx
    assert configs["min.insync.replicas"]["value"] == "1", ctx
    assert configs["compression.type"]["value"] == "producer", ctx

    assert ops["incrementalAlterConfigs"]["ok"] is True, ctx
    after = ops["describeConfigsAfterAlter"]["configs"]
    assert after["retention.ms"]["value"] == "7200000", ctx
    assert after["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG", ctx
    assert after["max.message.bytes"]["value"] == "2000000", ctx
    # DELETE drops the topic override: back to the default.
    assert after["cleanup.policy"]["value"] == "delete", ctx
    assert after["cleanup.policy"]["source"] == "DEFAULT_CONFIG", ctx
    assert ops["incrementalAlterConfigsInvalid"]["error"] == "InvalidConfigurationException", ctx

    assert ops["produce"]["lastOffset"] == 9, ctx
    assert ops["listOffsets"] == {"op": "listOffsets", "earliest": 0, "latest": 10, "maxTimestamp": 9}, ctx
    assert ops["deleteRecords"]["lowWatermark"] == 4, ctx
    assert ops["listOffsetsAfterDeleteRecords"]["earliest"] == 4, ctx
    assert ops["listOffsetsAfterDeleteRecords"]["latest"] == 10, ctx
    assert ops["deleteRecordsBeyondEnd"]["error"] == "OffsetOutOfRangeException", ctx

    assert ops["deleteTopics"]["ok"] is True, ctx
    assert ops["describeTopicsAfterDelete"]["error"] == "UnknownTopicOrPartitionException", ctx
    assert ops["deleteTopicsAgain"]["error"] == "UnknownTopicOrPartitionException", ctx
