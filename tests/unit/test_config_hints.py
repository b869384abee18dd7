"""Configuration mistakes get a precise message: the closest known key for a typo, and one line
per bad value naming the key, the value, what was expected and where it came from.

Unit tests of :mod:`strom.config_hints` and of the loaders that use it (BrokerConfig,
WorkerConfig, StreamsConfig, the Spark options); no broker process.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from strom.config_hints import closest_key, forget_warnings, unknown_key_hint, warn_unknown_keys
from strom.connect.exceptions import ConfigException
from strom.connect.mirror.config import MirrorMakerConfig
from strom.connect.runtime.config import WorkerConfig, warn_connector_typos
from strom.core.cli import main as cli_main
from strom.core.config import BrokerConfig
from strom.core.exceptions import ConfigError
from strom.spark_bridge.exceptions import OptionError
from strom.spark_bridge.options import parse_source_options
from strom.streams.runtime.config import StreamsConfig, StreamsConfigError

KNOWN = ["num.partitions", "log.segment.bytes", "bootstrap.servers", "num.network.threads"]


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    forget_warnings()


@pytest.mark.parametrize(("typo", "meant"), [
    ("num.partition", "num.partitions"),
    ("log.segment.byte", "log.segment.bytes"),
    ("bootstrap.server", "bootstrap.servers"),
    ("Num.Partitions", "num.partitions"),
    ("num.netwrok.threads", "num.network.threads"),
])
def test_a_typo_names_the_closest_key(typo: str, meant: str) -> None:
    assert closest_key(typo, KNOWN) == meant
    assert unknown_key_hint(typo, KNOWN) == f"unknown config {typo!r} (did you mean {meant!r}?)"


def test_an_unrelated_key_gets_no_suggestion() -> None:
    assert closest_key("zookeeper.connect", KNOWN) is None
    assert unknown_key_hint("zookeeper.connect", KNOWN) == "unknown config 'zookeeper.connect'"


def test_each_unknown_key_is_warned_once_and_prefixes_are_open(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.hints")
    keys = ["num.partition", "num.partitions", "listener.name.x.ssl.keystore.location"]
    with caplog.at_level(logging.WARNING, "test.hints"):
        assert warn_unknown_keys(logger, keys, KNOWN, prefixes=["listener.name."], kind="k", source="f") == \
            ["num.partition"]
        warn_unknown_keys(logger, keys, KNOWN, prefixes=["listener.name."], kind="k", source="f")
    assert [r.getMessage() for r in caplog.records] == \
        ["unknown config 'num.partition' (did you mean 'num.partitions'?) in f"]


def test_broker_override_and_file_typos_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    props = tmp_path / "server.properties"
    props.write_text("log.segment.byte=1000\nrsm.config.storage.s3.bucket.name=b\nsuper.users=User:admin\n")
    with caplog.at_level(logging.WARNING, "strom.core.config"):
        config = BrokerConfig.load(props, {"num.partition": "3", "listener.name.ext.sasl.enabled.mechanisms": "PLAIN"},
                                   env={})
    assert config.num_partitions == 1  # the typo is not applied, only reported
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "unknown config 'log.segment.byte' (did you mean 'log.segment.bytes'?) in server.properties",
        "unknown config 'num.partition' (did you mean 'num.partitions'?) in --override",
    ]


def test_a_kafka_broker_key_strom_ignores_is_not_a_typo(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "strom.core.config"):
        BrokerConfig.load(None, {"log.cleaner.threads": "2", "remote.log.metadata.topic.replication.factor": "1"},
                          env={})
    assert not caplog.records


def test_broker_bad_values_are_one_line_per_key(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=abc\nlog.message.timestamp.type=Now\n")
    with pytest.raises(ConfigError) as err:
        BrokerConfig.load(props, {"log.segment.bytes": "10", "log.preallocate": "maybe"}, env={})
    text = str(err.value)
    assert "Input should" not in text
    assert sorted(text.splitlines()) == sorted([
        "invalid value 'abc' for num.partitions: expected an integer (in server.properties)",
        "invalid value '10' for log.segment.bytes: expected a value of at least 14 (in --override)",
        "invalid value 'Now' for log.message.timestamp.type: expected one of CreateTime or LogAppendTime "
        "(in server.properties)",
        "invalid value 'maybe' for log.preallocate: expected true or false (in --override)",
    ])
    assert err.value.key in ("num.partitions", "log.segment.bytes", "log.message.timestamp.type", "log.preallocate")


def test_worker_bad_value_names_key_value_and_file(tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:1\noffset.flush.interval.ms=soon\n")
    with pytest.raises(ConfigException) as err:
        WorkerConfig.load(worker)
    assert str(err.value) == \
        "invalid value 'soon' for offset.flush.interval.ms: expected an integer (in worker.properties)"


def test_worker_known_keys_are_not_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:1\nproducer.linger.ms=5\nkey.converter.schemas.enable=false\n"
                      "rest.extension.classes=\nsecurity.protocol=PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "task.shutdown.graceful.timeout.ms=100\n")
    with caplog.at_level(logging.WARNING, "strom.connect.runtime.config"):
        WorkerConfig.load(worker)
    assert not caplog.records


def test_streams_typo_names_the_key_it_meant() -> None:
    with pytest.raises(StreamsConfigError) as err:
        StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x", "num.stream.thread": 2})
    assert "unknown config 'num.stream.thread' (did you mean 'num.stream.threads'?)" in str(err.value)


def test_streams_bad_value_reads_plainly() -> None:
    with pytest.raises(StreamsConfigError) as err:
        StreamsConfig.load({"application.id": "a", "bootstrap.servers": "x", "num.stream.threads": "two"})
    assert "invalid value 'two' for num.stream.threads: expected an integer" in str(err.value)
    assert "Input should" not in str(err.value)


def test_spark_option_typo_names_the_option_it_meant() -> None:
    with pytest.raises(OptionError, match=r"did you mean 'startingOffsets'\?"):
        parse_source_options({"subscribe": "t", "kafka.bootstrap.servers": "x", "startingOffset": "earliest"},
                             streaming=False)


def test_mirror_maker_typos_name_the_key_meant(caplog: pytest.LogCaptureFixture) -> None:
    config = MirrorMakerConfig({"clusters": "a, b", "a.bootstrap.servers": "x:1", "b.bootstrap.servers": "y:1",
                                "a->b.enabled": "true", "a->b.topic": "t.*", "refresh.topics.interval.second": "5"})
    with caplog.at_level(logging.WARNING, "strom.connect.mirror.config"):
        config.validate()
    assert {r.getMessage() for r in caplog.records} == {
        "The configuration 'a->b.topic' was supplied but isn't a known config. (did you mean 'a->b.topics'?)",
        "The configuration 'refresh.topics.interval.second' was supplied but isn't a known config. "
        "(did you mean 'refresh.topics.interval.seconds'?)",
    }


def test_cli_topic_config_typo_names_the_key_before_any_request(capsys: pytest.CaptureFixture[str]) -> None:
    # port 1: nothing listens there, and nothing is asked: the key is checked first
    assert cli_main(["topics", "create", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
                     "--config", "segment.byte=1"]) == 1
    assert capsys.readouterr().err.strip() == \
        "error: unknown config 'segment.byte' (did you mean 'segment.bytes'?) for a topic"
    assert cli_main(["configs", "--bootstrap-server", "127.0.0.1:1", "--alter", "--entity-type", "topics",
                     "--entity-name", "t", "--add-config", "retention.m=1"]) == 1
    assert "unknown config 'retention.m' (did you mean 'retention.ms'?)" in capsys.readouterr().err


def test_connector_near_misses_of_framework_keys_warn(caplog: pytest.LogCaptureFixture) -> None:
    props = {"name": "c", "connector.class": "X", "task.max": "2", "file": "/tmp/x", "topic": "t",
             "errors.tolerance": "all", "transforms.a.type": "Y", "batch.size": "5"}
    with caplog.at_level(logging.WARNING, "strom.connect.runtime.config"):
        warned = warn_connector_typos("c", props, "source", lambda: ["file", "topic", "batch.size"])
    assert warned == ["task.max"]
    assert [r.getMessage() for r in caplog.records] == [
        "The configuration 'task.max' was supplied but isn't a known config. (did you mean 'tasks.max'?) "
        "in connector c"]
