"""The runtimes pass Kafka's SASL/TLS client settings through to their clients (issue 23 item 5).

One broker (a BrokerProcess started by ScramBroker) with a SASL_SSL listener (throwaway CA, SCRAM-SHA-256 users) and a PLAINTEXT one
only for the test's own admin. Each runtime gets nothing but the SASL_SSL bootstrap and the
settings by Kafka's names — ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` with
ScramLoginModule, a PEM ``ssl.truststore.location`` — which librdkafka does not know, so a runtime
that did not translate them could not build a client: a Connect worker (top level and a
connector's ``consumer.override.``), a Streams application (StreamsConfig), MirrorMaker in
dedicated mode (per-cluster ``A.security.protocol`` ...; its distributed workers' group
membership authenticates too) and the Spark source (``kafka.security.protocol`` ...).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from secure_broker import consume_values
from secure_broker_helpers import ScramBroker

from strom.client_security import to_librdkafka
from strom.connect.exceptions import ConfigException
from strom.connect.mirror.config import MirrorMakerConfig
from strom.connect.mirror.maker import MirrorMaker
from strom.connect.plugins import PluginRegistry
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.herder import State
from strom.connect.runtime.standalone import StandaloneHerder
from strom.core.testing import wait_for
from strom.streams import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder
from strom.streams.runtime import State as StreamsState

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def scram(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramBroker]:
    with ScramBroker(tmp_path_factory.mktemp("scram"), USERS) as broker:
        yield broker


def _topic(scram: ScramBroker, prefix: str, partitions: int = 1) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": scram.plain})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def _produce(scram: ScramBroker, topic: str, values: list[str]) -> None:
    producer = Producer(scram.librdkafka_props("alice"))
    for v in values:
        producer.produce(topic, v.encode(), key=v.encode())
    assert producer.flush(30) == 0


def _consume(scram: ScramBroker, topic: str, n: int, timeout: float = 60) -> list[str]:
    return [v.decode() for v in consume_values(scram.librdkafka_props("alice"), topic, n, timeout=timeout)]


def test_translation_of_kafka_names(tmp_path: Path) -> None:
    """What each Kafka key becomes; a JKS store and an unknown login module name the key."""
    pem = tmp_path / "store.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    conf = to_librdkafka({
        "security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                            'password="p\\"w";',
        "ssl.truststore.location": str(pem), "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pem),
        "ssl.key.password": "kp", "ssl.endpoint.identification.algorithm": "", "ssl.protocol": "TLSv1.3",
        "sasl.login.refresh.window.factor": "0.8", "linger.ms": 5})
    assert conf == {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
                    "sasl.password": 'p"w', "ssl.ca.location": str(pem), "ssl.certificate.location": str(pem),
                    "ssl.key.location": str(pem), "ssl.key.password": "kp",
                    "ssl.endpoint.identification.algorithm": "none", "linger.ms": 5}
    oauth = to_librdkafka({"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                               "required unsecuredLoginStringClaim_sub=alice;"})
    assert oauth == {"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=alice"}
    with pytest.raises(ConfigException, match=r"ssl\.truststore\.location.*JKS"):
        WorkerConfig.from_mapping({"ssl.truststore.location": str(tmp_path / "x.jks"),
                                   "ssl.truststore.type": "JKS"}).producer_config()
    with pytest.raises(ConfigException, match=r"sasl\.jaas\.config") as info:
        WorkerConfig.from_mapping({"sasl.jaas.config": "com.example.Login required secret=hunter2;"}).admin_config()
    assert "hunter2" not in str(info.value)  # the value may hold a password: never in the message


def test_connect_worker_over_sasl_ssl(scram: ScramBroker, tmp_path: Path) -> None:
    """FileStreamSource -> topic -> FileStreamSink: the worker's producer with the top-level
    settings, the sink's consumer as bob through consumer.override.sasl.jaas.config."""
    topic = _topic(scram, "connect")
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line-{i}" for i in range(20)]
    source_file.write_text("".join(f"{line}\n" for line in lines))
    worker = {**scram.kafka_props("alice"), "offset.storage.file.filename": str(tmp_path / "offsets"),
              "offset.flush.interval.ms": "300", "key.converter": "StringConverter",
              "value.converter": "StringConverter", "listeners": "http://127.0.0.1:0"}
    herder = StandaloneHerder(WorkerConfig.from_mapping(worker), PluginRegistry())
    herder.start()
    try:
        herder.put_connector_config("src", {"connector.class": "FileStreamSource", "file": str(source_file),
                                            "topic": topic}, False)
        herder.put_connector_config("sink", {
            "connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic,
            "consumer.override.sasl.jaas.config": scram.kafka_props("bob")["sasl.jaas.config"]}, False)
        assert sorted(_consume(scram, topic, 20)) == sorted(lines)
        wait_for(lambda: sink_file.exists() and sorted(sink_file.read_text().split()) == sorted(lines),
                 timeout=60, what="the sink file holding every line")
        status = herder.connector_status("sink")
        assert [t.state for t in status.tasks] == [State.RUNNING]
    finally:
        herder.stop()


def test_streams_app_over_sasl_ssl(scram: ScramBroker, tmp_path: Path) -> None:
    source, sink = _topic(scram, "st-in"), _topic(scram, "st-out")
    builder = StreamsBuilder()
    (builder.stream(source, Consumed.with_(Serdes.string(), Serdes.string()))
        .map_values(lambda v: v.upper())
        .to(sink, Produced.with_(Serdes.string(), Serdes.string())))
    props = {**scram.kafka_props("alice"), "application.id": f"secure-{uuid.uuid4().hex[:6]}",
             "commit.interval.ms": 200, "state.dir": str(tmp_path)}
    app = KafkaStreams(builder.build(), props)
    app.start()
    try:
        _produce(scram, source, ["a", "b", "c"])
        assert sorted(_consume(scram, sink, 3)) == ["A", "B", "C"]
        assert app.state() is StreamsState.RUNNING, app.errors()
    finally:
        assert app.close(30)


def test_mirror_maker_over_sasl_ssl(scram: ScramBroker) -> None:
    """Dedicated MirrorMaker with clusters A and B (both the SASL_SSL listener): A's topic
    arrives as A.<topic>; the driver's distributed herder joins its group over SCRAM."""
    topic = _topic(scram, "mm")
    tag = uuid.uuid4().hex[:6]
    props = {"clusters": "A,B", "A->B.enabled": "true", "A->B.topics": topic, "B->A.enabled": "false",
             "emit.heartbeats.enabled": "false", "emit.checkpoints.enabled": "false",
             "sync.topic.acls.enabled": "false", "replication.factor": "1",
             "offset-syncs.topic.replication.factor": "1", "checkpoints.topic.replication.factor": "1",
             "heartbeats.topic.replication.factor": "1", "config.storage.replication.factor": "1",
             "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
             "B.group.id": f"mm2-{tag}", "B.config.storage.topic": f"mm2-configs-{tag}",
             "B.offset.storage.topic": f"mm2-offsets-{tag}", "B.status.storage.topic": f"mm2-status-{tag}",
             "refresh.topics.interval.seconds": "1"}
    for alias, user in (("A", "alice"), ("B", "bob")):
        props.update({f"{alias}.{k}": v for k, v in scram.kafka_props(user).items()})
    _produce(scram, topic, [f"m{i}" for i in range(10)])
    maker = MirrorMaker(MirrorMakerConfig(props), clusters=["B"])
    maker.start()
    try:
        assert sorted(_consume(scram, f"A.{topic}", 10, timeout=90)) == sorted(f"m{i}" for i in range(10))
    finally:
        maker.stop()


@pytest.mark.slow
def test_spark_source_over_sasl_ssl(scram: ScramBroker) -> None:
    pytest.importorskip("pyspark")
    from spark_helpers import spark_builder

    import strom.spark_bridge

    topic = _topic(scram, "spark")
    _produce(scram, topic, [f"s{i}" for i in range(5)])
    session = spark_builder().getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    strom.spark_bridge.register(session)
    try:
        reader = session.read.format("strom").option("subscribe", topic)
        for key, value in scram.kafka_props("alice").items():
            reader = reader.option(f"kafka.{key}", value)
        rows = reader.load().collect()
        assert sorted(bytes(r.value).decode() for r in rows) == [f"s{i}" for i in range(5)]
    finally:
        session.stop()
