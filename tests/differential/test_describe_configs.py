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
from diff_wire import WireClient, incremental_alter_configs, kio_schema
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


# -- broker configs: the whole list, the dynamic rules (issue 27 item 5) -------------------------

# strom's own keys (no Kafka counterpart) and the keys whose default strom really differs on:
# strom accepts connections on its event loop (a longer listen backlog, see core/config.py) and
# names its topic-based metadata manager plugin, which also accepts Kafka's class name.
STROM_ONLY_PREFIX = "strom."
STROM_DEFAULTS = frozenset({"socket.listen.backlog.size", "remote.log.metadata.manager.class.name"})
BROKER, GROUP = 4, 32
STATIC = 4

Entry = tuple[Any, ...]  # value, source, read_only, sensitive, type, ((synonym, value, source), ...)


def describe_raw(bootstrap: str, rtype: int, name: str, keys: list[str] | None = None) -> tuple[int, dict[str, Entry]]:
    """DescribeConfigs v4 with synonyms, by wire: (error code, {name: entry})."""
    m = kio_schema("describe_configs", 4)
    req = m.DescribeConfigsRequest(resources=(m.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=tuple(keys) if keys else None),),
        include_synonyms=True, include_documentation=False)
    with WireClient(bootstrap) as c:
        res = c.request(req).results[0]
    return int(res.error_code), {c.name: (c.value, int(c.config_source), c.read_only, c.is_sensitive,
                                          int(c.config_type), tuple((s.name, s.value, int(s.source)) for s in c.synonyms))
                                 for c in res.configs}


def alter_raw(bootstrap: str, rtype: int, name: str, ops: list[tuple[str, int, str | None]]) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 of one resource, by wire: (error code, message)."""
    return incremental_alter_configs(bootstrap, rtype, name, ops)


def legacy_alter_raw(bootstrap: str, rtype: int, name: str, configs: dict[str, str]) -> tuple[int, str | None]:
    """AlterConfigs v2 (the whole set of the resource's dynamic configs), by wire."""
    m = kio_schema("alter_configs", 2)
    req = m.AlterConfigsRequest(resources=(m.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=tuple(m.AlterableConfig(name=k, value=v) for k, v in configs.items())),), validate_only=False)
    with WireClient(bootstrap) as c:
        r = c.request(req).responses[0]
    return int(r.error_code), r.error_message


def diff_broker_configs(ours: dict[str, Entry], theirs: dict[str, Entry]) -> list[str]:
    """Key sets, read-only/sensitive flags and types of every key; sources, values and synonyms
    of the keys neither broker sets in its static configuration (those differ by setup)."""
    out = [f"missing in strom: {k}" for k in sorted(set(theirs) - set(ours))]
    out += [f"only in strom: {k}" for k in sorted(set(ours) - set(theirs)) if not k.startswith(STROM_ONLY_PREFIX)]
    for key in sorted(set(ours) & set(theirs)):
        a, b = ours[key], theirs[key]
        for field, i in (("read_only", 2), ("sensitive", 3), ("type", 4)):
            if a[i] != b[i]:
                out.append(f"{key}.{field}: strom {a[i]!r}, Kafka {b[i]!r}")
        if any(s[2] == STATIC for s in a[5] + b[5]) or STATIC in (a[1], b[1]):
            continue
        if a[1] != b[1]:
            out.append(f"{key}.source: strom {a[1]}, Kafka {b[1]}")
        if [(n, s) for n, _, s in a[5]] != [(n, s) for n, _, s in b[5]]:
            out.append(f"{key}.synonyms: strom {a[5]}, Kafka {b[5]}")
        elif key not in STROM_DEFAULTS and (a[0] != b[0] or a[5] != b[5]):
            out.append(f"{key}.value: strom {a[0]!r} {a[5]}, Kafka {b[0]!r} {b[5]}")
    return out


def test_describe_broker_lists_every_kafka_config(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """``kafka-configs --describe --all --entity-type brokers --entity-name 1``: the 340 keys of
    Kafka 4.3.1 (strom listed 85 before), with Kafka's sources, synonyms, flags and types."""
    code, theirs = describe_raw(kafka.bootstrap, BROKER, "1")
    assert code == 0 and len(theirs) >= 340
    code, ours = describe_raw(strom.bootstrap, BROKER, "1")
    assert code == 0
    differences = diff_broker_configs(ours, theirs)
    assert not differences, "\n".join(differences)
    # No DEFAULT_CONFIG synonym where Kafka's ConfigDef has no default (issue 27).
    assert ours["log.retention.ms"] == theirs["log.retention.ms"] == (None, 5, False, False, 5, ())


def test_diff_broker_configs_reports_each_kind() -> None:
    default = ("1", 5, True, False, 3, (("a", "1", 5),))
    theirs = {"a": default, "b": default, "s": ("x", STATIC, True, False, 2, (("s", "x", STATIC),))}
    ours = {"a": ("2", 5, False, False, 3, (("a", "2", 5),)), "strom.own": default, "c": default,
            "s": ("y", 5, True, False, 2, (("s", "y", 5),))}
    assert diff_broker_configs(ours, theirs) == [
        "missing in strom: b", "only in strom: c", "a.read_only: strom False, Kafka True",
        "a.value: strom '2' (('a', '2', 5),), Kafka '1' (('a', '1', 5),)"]


# (resource name, ops) of IncrementalAlterConfigs on a broker resource, each answered by strom
# exactly as by Kafka 4.3.1 (code and message); SET 0, DELETE 1, APPEND 2.
BROKER_ALTER_CASES: list[tuple[str, list[tuple[str, int, str | None]]]] = [
    ("1", [("log.dirs", 0, "/x")]),
    ("1", [("log.dirs", 0, "/x"), ("node.id", 0, "3")]),
    ("1", [("log.cleaner.threads", 0, "2")]),
    ("", [("log.cleaner.threads", 0, "2")]),
    ("", [("log.cleaner.io.max.bytes.per.second", 0, "1000000")]),
    ("", [("listeners", 0, "PLAINTEXT://:9093")]),
    ("1", [("strom.diff.unknown.key", 0, "1")]),
    ("1", [("log.cleaner.threads", 0, "abc")]),
    ("1", [("log.cleaner.threads", 0, "-1")]),
    ("1", [("ssl.keystore.location", 0, "/x")]),
    ("1", [("compression.type", 0, "bogus")]),
    ("1", [("log.cleaner.threads", 2, "2")]),
    ("1", [("num.io.threads", 0, "4")]),
    ("1", [("sasl.kerberos.min.time.before.relogin", 0, "60000")]),
    ("2", [("log.cleaner.threads", 0, "2")]),
    ("x", [("log.cleaner.threads", 0, "2")]),
]
CLEANUP = {"1": ["log.cleaner.threads", "strom.diff.unknown.key", "num.io.threads",
                 "sasl.kerberos.min.time.before.relogin"],
           "": ["log.cleaner.threads", "log.cleaner.io.max.bytes.per.second"]}


def _cleanup(bootstrap: str) -> None:
    for name, keys in CLEANUP.items():
        assert alter_raw(bootstrap, BROKER, name, [(k, 1, None) for k in keys]) == (0, None)


def _wait_for(bootstrap: str, name: str, key: str, source: int) -> dict[str, Entry]:
    """Kafka's broker applies a committed change a moment later: poll until it shows."""
    deadline = time.monotonic() + 30
    while True:
        _, entries = describe_raw(bootstrap, BROKER, name, [key])
        if key in entries and entries[key][1] == source:
            return entries
        assert time.monotonic() < deadline, f"{key} never got source {source}: {entries}"
        time.sleep(0.1)


def test_dynamic_broker_configs_are_checked_as_kafka_checks_them(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """Static-only keys refused ("Cannot update these configs dynamically: [log.dirs]"), per-broker
    keys refused at the cluster level, per-listener security keys, bad values; dynamic keys
    (log.cleaner.threads, which strom refused) and unknown keys accepted; the legacy AlterConfigs
    takes every broker key Kafka takes (sasl.kerberos.min.time.before.relogin was "Unknown broker
    config name")."""
    try:
        for name, ops in BROKER_ALTER_CASES:
            theirs = alter_raw(kafka.bootstrap, BROKER, name, ops)
            ours = alter_raw(strom.bootstrap, BROKER, name, ops)
            assert ours == theirs, f"{name!r} {ops}: strom {ours}, Kafka {theirs}"
        assert alter_raw(strom.bootstrap, BROKER, "1", [("log.dirs", 0, "/x")]) == (
            42, "Cannot update these configs dynamically: [log.dirs]")
        # What the accepted changes look like afterwards: per-broker over cluster default over default.
        for b in (kafka, strom):
            _wait_for(b.bootstrap, "1", "log.cleaner.io.max.bytes.per.second", 3)
            _wait_for(b.bootstrap, "1", "log.cleaner.threads", 2)
        _wait_for(kafka.bootstrap, "1", "sasl.kerberos.min.time.before.relogin", 2)
        # (num.io.threads is static in the reference's server.properties, not in strom's: left out)
        keys = ["log.cleaner.threads", "log.cleaner.io.max.bytes.per.second", "sasl.kerberos.min.time.before.relogin"]
        assert describe_raw(strom.bootstrap, BROKER, "1", keys) == describe_raw(kafka.bootstrap, BROKER, "1", keys)
        _, theirs_default = describe_raw(kafka.bootstrap, BROKER, "")
        _, ours_default = describe_raw(strom.bootstrap, BROKER, "")
        assert ours_default == theirs_default and "log.cleaner.threads" in ours_default
        for b in (kafka, strom):
            assert legacy_alter_raw(b.bootstrap, BROKER, "1", {"sasl.kerberos.min.time.before.relogin": "60000",
                                                                "log.cleaner.threads": "3"}) == (0, None)
            assert legacy_alter_raw(b.bootstrap, BROKER, "1", {"log.dirs": "/x"}) == (
                42, "Cannot update these configs dynamically: [log.dirs]")
    finally:
        _cleanup(kafka.bootstrap)
        _cleanup(strom.bootstrap)
