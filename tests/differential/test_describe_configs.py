"""Differential: DescribeConfigs of a topic, as confluent-kafka's AdminClient sees it.

A new topic reports every topic config with its default value and source; strom must report
the same keys, values, sources and read-only/sensitive flags as Apache Kafka, both for a
topic without overrides and for one created with overrides.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka_ref import KafkaRef
from ref_fixtures import HasBootstrap

Observed = dict[str, tuple[Any, ...]]


def describe_new_topic(bootstrap: str, name: str, overrides: dict[str, str]) -> Observed:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    fut = admin.create_topics([NewTopic(name, 1, 1, config=overrides)], operation_timeout=30)[name]
    fut.result(timeout=60)
    res = ConfigResource(ResourceType.TOPIC, name)
    # CreateTopics answers once the controller committed the topic; Apache Kafka's broker may
    # learn of it a moment later (metadata propagation), so an immediate describe can get
    # UNKNOWN_TOPIC_OR_PARTITION. Retry that one error for a few seconds, on both brokers.
    deadline = time.monotonic() + 15
    while True:
        try:
            entries = admin.describe_configs([res], request_timeout=30)[res].result(timeout=60)
            break
        except KafkaException as e:
            if e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    return {key: (e.value, ConfigSource(e.source).name, e.is_read_only, e.is_sensitive, e.is_default)
            for key, e in entries.items()}


def diff_configs(ours: Observed, theirs: Observed) -> list[str]:
    out = [f"missing in strom: {k} = {theirs[k]}" for k in sorted(set(theirs) - set(ours))]
    out += [f"only in strom: {k} = {ours[k]}" for k in sorted(set(ours) - set(theirs))]
    fields = ("value", "source", "read_only", "sensitive", "is_default")
    for key in sorted(set(ours) & set(theirs)):
        for field, a, b in zip(fields, ours[key], theirs[key], strict=True):
            if a != b:
                out.append(f"{key}.{field}: strom {a!r}, Kafka {b!r}")
    return out


@pytest.mark.parametrize("overrides", [
    {},
    {"cleanup.policy": "compact", "retention.ms": "3600000", "min.insync.replicas": "1",
     "compression.type": "zstd", "message.timestamp.type": "LogAppendTime"},
], ids=["defaults", "overrides"])
def test_describe_configs_of_new_topic(strom: HasBootstrap, kafka: KafkaRef, overrides: dict[str, str]) -> None:
    name = f"diff-cfg-{uuid.uuid4().hex[:8]}"
    theirs = describe_new_topic(kafka.bootstrap, name, overrides)
    # The reference itself: every override shows up as a dynamic topic config.
    for key, value in overrides.items():
        assert theirs[key][0] == value and theirs[key][1] == "DYNAMIC_TOPIC_CONFIG"
    ours = describe_new_topic(strom.bootstrap, name, overrides)
    differences = diff_configs(ours, theirs)
    print("\n".join([f"DescribeConfigs differences ({len(differences)}):", *differences]))
    assert not differences, "\n".join(differences)


def test_diff_configs_reports_each_kind() -> None:
    theirs = {"a": ("1", "DEFAULT", False, False, True), "b": ("x", "DEFAULT", False, False, True)}
    ours = {"a": ("2", "DEFAULT", False, False, True), "c": ("y", "DEFAULT", False, False, True)}
    assert diff_configs(ours, theirs) == ["missing in strom: b = ('x', 'DEFAULT', False, False, True)",
                                          "only in strom: c = ('y', 'DEFAULT', False, False, True)",
                                          "a.value: strom '2', Kafka '1'"]


def alter_broker_config(bootstrap: str, ops: list[tuple[str, str | None]]) -> tuple[str, str]:
    """IncrementalAlterConfigs on broker 1 (SET with a value, DELETE with None): (error name, message)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                           else AlterConfigOpType.DELETE) for k, v in ops]
    future = admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1", incremental_configs=entries)])
    try:
        next(iter(future.values())).result(timeout=30)
    except Exception as e:  # a KafkaException carrying the broker's error
        err = e.args[0]
        return err.name(), err.str()
    return "NO_ERROR", ""


def test_replication_throttles_are_accepted_and_checked(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """Kafka's tools set and clear the replication throttles (kafka-reassign-partitions.sh --verify
    clears them); a bad value is refused with INVALID_REQUEST and ConfigDef's words on both brokers."""
    for b in (strom, kafka):
        assert alter_broker_config(b.bootstrap, [("leader.replication.throttled.rate", "1048576"),
                                                 ("follower.replication.throttled.rate", "1048576")]) == ("NO_ERROR", "")
        assert alter_broker_config(b.bootstrap, [("leader.replication.throttled.rate", None),
                                                 ("follower.replication.throttled.rate", None)]) == ("NO_ERROR", "")
        assert alter_broker_config(b.bootstrap, [("leader.replication.throttled.rate", "-5")]) == (
            "INVALID_REQUEST", "Invalid value -5 for configuration leader.replication.throttled.rate: "
                               "Value must be at least 0")
        assert alter_broker_config(b.bootstrap, [("follower.replication.throttled.rate", "abc")]) == (
            "INVALID_REQUEST", "Invalid value abc for configuration follower.replication.throttled.rate: "
                               "Not a number of type LONG")
