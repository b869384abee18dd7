"""Kafka's config rules as strom.core.dynamic_config / group_config apply them, without a broker.

The expected messages are Kafka 4.3.1's, as the reference broker answered them
(tests/differential/test_describe_configs.py, test_group_configs.py and test_client_metrics.py
compare strom with the reference itself).
"""

from __future__ import annotations

import pytest

from strom.core.config import BrokerConfig
from strom.core.dynamic_config import (
    DEFAULT_CONFIG,
    STATIC_BROKER_CONFIG,
    describe_broker,
    java_double,
    java_set_text,
    validate_client_metrics,
    validate_dynamic_broker_configs,
)
from strom.core.errors import InvalidConfigurationError, InvalidRequestError
from strom.core.group_config import describe_group, group_timeouts, validate_group_configs
from strom.core.kafka_config_defs import BROKER_CONFIG_KEYS, GROUP_CONFIG_KEYS


def test_the_generated_tables_are_kafkas() -> None:
    assert sum(not k.internal for k in BROKER_CONFIG_KEYS) == 340
    assert {k.name for k in GROUP_CONFIG_KEYS} >= {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                                                   "share.auto.offset.reset", "streams.num.standby.replicas"}


@pytest.mark.parametrize(("props", "per_broker", "message"), [
    ({"log.dirs": "/x"}, True, "Cannot update these configs dynamically: [log.dirs]"),
    ({"log.dirs": "/x", "node.id": "3"}, True, "Cannot update these configs dynamically: [node.id, log.dirs]"),
    ({"listeners": "PLAINTEXT://:9093"}, False,
     "Cannot update these configs at default cluster level, broker id must be specified: [listeners]"),
    ({"ssl.keystore.location": "/x"}, True, "These security configs can be dynamically updated only per-listener "
                                            "using the listener prefix: [ssl.keystore.location]"),
    ({"log.cleaner.threads": "abc"}, True,
     "Invalid value abc for configuration log.cleaner.threads: Not a number of type INT"),
    ({"log.cleaner.threads": "-1"}, True,
     "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0"),
    ({"compression.type": "bogus"}, True, "Invalid value bogus for configuration compression.type: String must be "
                                          "one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
])
def test_refused_broker_changes(props: dict[str, str], per_broker: bool, message: str) -> None:
    with pytest.raises(InvalidRequestError) as e:
        validate_dynamic_broker_configs(props, per_broker)
    assert str(e.value.message) == message


def test_accepted_broker_changes() -> None:
    validate_dynamic_broker_configs({"log.cleaner.threads": "2", "sasl.kerberos.min.time.before.relogin": "60000",
                                     "some.unknown.key": "1", "log.retention.ms": "-5"}, True)
    validate_dynamic_broker_configs({"log.cleaner.threads": "2", "log.cleaner.io.max.bytes.per.second": "1e6"}, False)


def test_java_renderings() -> None:
    assert java_set_text(["log.dirs", "node.id"]) == "[node.id, log.dirs]"
    assert [java_double(v) for v in (1000000.0, 1.7976931348623157e308, 0.5, 1e7, 0.0)] == [
        "1000000.0", "1.7976931348623157E308", "0.5", "1.0E7", "0.0"]


def test_describe_broker_sources_and_synonyms() -> None:
    config = BrokerConfig.from_mapping({"node.id": "1", "log.cleaner.backoff.ms": "500"})
    entries = {e.name: e for e in describe_broker(config, {"log.cleaner.threads": "2"},
                                                  {"log.cleaner.threads": "3", "log.cleaner.io.max.bytes.per.second": "1000000"},
                                                  per_broker_resource=True)}
    assert len([n for n in entries if not n.startswith("strom.")]) == 340
    threads = entries["log.cleaner.threads"]
    assert (threads.value, threads.source, threads.read_only) == ("2", 2, False)
    assert threads.synonyms == (("log.cleaner.threads", "2", 2), ("log.cleaner.threads", "3", 3),
                                ("log.cleaner.threads", "1", DEFAULT_CONFIG))
    assert entries["log.cleaner.io.max.bytes.per.second"].value == "1000000.0"
    backoff = entries["log.cleaner.backoff.ms"]
    assert backoff.synonyms == (("log.cleaner.backoff.ms", "500", STATIC_BROKER_CONFIG),
                                ("log.cleaner.backoff.ms", "15000", DEFAULT_CONFIG))
    # No synonyms where Kafka has no default and nothing is set; broker.id follows node.id.
    assert entries["log.retention.ms"].synonyms == () and entries["log.retention.ms"].value is None
    assert entries["broker.id"].source == STATIC_BROKER_CONFIG and entries["log.dirs"].read_only
    assert entries["ssl.keystore.password"].sensitive and entries["ssl.keystore.password"].value is None
    cluster = describe_broker(config, {}, {"log.cleaner.threads": "3"}, per_broker_resource=False)
    assert [(e.name, e.value, e.source, e.synonyms) for e in cluster] == [
        ("log.cleaner.threads", "3", 3, (("log.cleaner.threads", "3", 3),))]


@pytest.mark.parametrize(("props", "message"), [
    ({"consumer.session.timeout.ms": "10000"},
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "70000"},
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "abc"},
     "Invalid value abc for configuration consumer.heartbeat.interval.ms: Not a number of type INT"),
    ({"foo": "1"}, "Unknown group config name: foo"),
    ({"streams.num.standby.replicas": "5"},
     "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
])
def test_refused_group_configs(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigurationError) as e:
        validate_group_configs(BrokerConfig(), props)
    assert str(e.value.message) == message


def test_group_configs_follow_the_broker_bounds_and_apply() -> None:
    loose = BrokerConfig.from_mapping({"group.consumer.min.session.timeout.ms": "1000",
                                       "group.consumer.min.heartbeat.interval.ms": "500"})
    validate_group_configs(loose, {"consumer.session.timeout.ms": "3000", "consumer.heartbeat.interval.ms": "1000"})
    with pytest.raises(InvalidConfigurationError, match=r"must be greater than consumer\.heartbeat\.interval\.ms"):
        validate_group_configs(loose, {"consumer.session.timeout.ms": "3000"})  # the default heartbeat is 5 s
    assert group_timeouts(loose, {"consumer.session.timeout.ms": "3000"}) == (3000, 5000)
    assert group_timeouts(loose, {}) == (45000, 5000)
    entries = {e.name: e for e in describe_group(loose, {"consumer.session.timeout.ms": "3000"})}
    assert entries["consumer.session.timeout.ms"].synonyms == (
        ("consumer.session.timeout.ms", "3000", 8), ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG))
    assert entries["share.auto.offset.reset"].synonyms == (("share.auto.offset.reset", "latest", DEFAULT_CONFIG),)


@pytest.mark.parametrize(("name", "props", "error", "message"), [
    ("s", {"interval.ms": "10"}, InvalidRequestError,
     "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"match": "foo=bar"}, InvalidConfigurationError, "Illegal client matching pattern: foo=bar"),
    ("s", {"bogus": "1"}, InvalidRequestError, "Unknown client metrics configuration: bogus"),
    ("", {"metrics": "x"}, InvalidRequestError, "Subscription name can't be empty"),
])
def test_refused_client_metrics(name: str, props: dict[str, str], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as e:
        validate_client_metrics(name, props)
    assert str(getattr(e.value, "message", e.value)) == message
