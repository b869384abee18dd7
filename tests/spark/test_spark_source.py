"""The "strom" Spark data source against the bundled broker, on one local[2] SparkSession.

Batch reads with offset ranges and minPartitions, streaming AvailableNow with admission control
and a restart from the checkpoint (plus a partition added in between), writes read back,
read_committed over an aborted transaction, failOnDataLoss after DeleteRecords, and the errors
for bad options.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql import DataFrame, SparkSession
from spark_helpers import create_topic, produce

from strom.core.testing import BrokerProcess


def read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format("strom").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_offset_ranges_of_three_partitions(spark: SparkSession, broker: BrokerProcess,
                                                      topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 3)
    produce(broker.bootstrap, topic_name,
            [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for p in range(3) for i in range(30)],
            headers=[("h1", b"x"), ("h2", b"yz")])
    starting = {topic_name: {"0": 5, "1": -2, "2": 10}}
    ending = {topic_name: {"0": 20, "1": -1, "2": 12}}
    df = read(spark, broker.bootstrap, subscribe=topic_name, startingOffsets=json.dumps(starting),
              endingOffsets=json.dumps(ending), includeHeaders="true")
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset",
                                                  "timestamp", "timestampType", "headers"]
    assert df.schema["offset"].dataType.simpleString() == "bigint"
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    rows = df.collect()
    got = sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows)
    want = sorted([(0, i, f"k0-{i}".encode(), f"v0-{i}".encode()) for i in range(5, 20)]
                  + [(1, i, f"k1-{i}".encode(), f"v1-{i}".encode()) for i in range(30)]
                  + [(2, i, f"k2-{i}".encode(), f"v2-{i}".encode()) for i in range(10, 12)])
    assert got == want
    first = rows[0]
    assert first.topic == topic_name and first.timestampType == 0
    assert abs(first.timestamp.timestamp() - time.time()) < 600
    assert [(h.key, bytes(h.value)) for h in first.headers] == [("h1", b"x"), ("h2", b"yz")]

    # minPartitions splits the ranges (47 records, 3 ranges) into at least 8 input partitions
    # and reads the same records.
    split = read(spark, broker.bootstrap, assign=json.dumps({topic_name: [0, 1, 2]}),
                 startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending), minPartitions="8")
    assert split.rdd.getNumPartitions() >= 8
    assert sorted((r.partition, r.offset) for r in split.select("partition", "offset").collect()) == \
        [(p, o) for p, o, _k, _v in want]
    # subscribePattern finds the topic; counting needs no per-row Python.
    assert read(spark, broker.bootstrap, subscribePattern=topic_name[:6] + ".*").filter(
        f"topic = '{topic_name}'").count() == 90


def test_write_then_read_back(spark: SparkSession, broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 2)
    data = [(f"k{i}", f"value-{i}", i % 2) for i in range(200)]
    df = spark.createDataFrame(data, "key string, value string, partition int")
    df.write.format("strom").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("topic", topic_name).mode("append").save()
    # headers column and a topic column instead of the option
    hdr = spark.createDataFrame([(topic_name, b"hv", [("a", b"1")])],
                                "topic string, value binary, headers array<struct<key:string,value:binary>>")
    hdr.write.format("strom").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()

    back = read(spark, broker.bootstrap, subscribe=topic_name, includeHeaders="true").collect()
    assert len(back) == 201
    plain = sorted((bytes(r.key).decode(), bytes(r.value).decode(), r.partition) for r in back if r.key)
    assert plain == sorted(data)
    (extra,) = [r for r in back if r.key is None]
    assert bytes(extra.value) == b"hv" and [(h.key, bytes(h.value)) for h in extra.headers] == [("a", b"1")]

    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="required attribute 'value' not found"):
        no_value.write.format("strom").option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("topic", topic_name).mode("append").save()


def _offsets_in_checkpoint(ckpt: Path) -> dict[str, dict[str, int]]:
    files = sorted((ckpt / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in files if p.name.isdigit()][-1]
    # "v1", the batch metadata, then one line per source: spark-sql-kafka's JSON.
    return json.loads(last.read_text().splitlines()[2])


def test_stream_available_now_restarts_from_checkpoint(spark: SparkSession, broker: BrokerProcess,
                                                       topic_name: str, tmp_path: Path) -> None:
    src, dst = topic_name, topic_name + "-out"
    create_topic(broker.bootstrap, src, 2)
    create_topic(broker.bootstrap, dst, 1)
    produce(broker.bootstrap, src, [(i % 2, None, f"a{i}".encode()) for i in range(50)])
    ckpt = tmp_path / "ckpt"

    def run() -> list[int]:
        stream = (spark.readStream.format("strom").option("kafka.bootstrap.servers", broker.bootstrap)
                  .option("subscribe", src).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "20").load())
        query = (stream.select("key", "value").writeStream.format("strom")
                 .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", dst)
                 .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        assert query.awaitTermination(180), "AvailableNow query did not finish"
        assert query.exception() is None
        return [int(p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]]

    first = run()
    assert sum(first) == 50 and max(first) <= 20 and len(first) >= 3
    assert _offsets_in_checkpoint(ckpt) == {src: {"0": 25, "1": 25}}

    # While stopped: a third partition appears and more records arrive in all three.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(src, 3)])[src].result(30)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(src, timeout=10).topics[src].partitions) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    produce(broker.bootstrap, src, [(i % 3, None, f"b{i}".encode()) for i in range(30)])

    second = run()
    assert sum(second) == 30
    assert _offsets_in_checkpoint(ckpt) == {src: {"0": 35, "1": 35, "2": 10}}
    out = sorted(bytes(r.value).decode() for r in read(spark, broker.bootstrap, subscribe=dst).collect())
    assert out == sorted([f"a{i}" for i in range(50)] + [f"b{i}" for i in range(30)])


def test_read_committed_skips_aborted_transaction(spark: SparkSession, broker: BrokerProcess,
                                                  topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic_name}"})
    p.init_transactions(30)
    for label, commit in (("c1", True), ("ab", False), ("c2", True)):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic_name, value=f"{label}-{i}".encode(), partition=0)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    committed = read(spark, broker.bootstrap, subscribe=topic_name, **{"kafka.isolation.level": "read_committed"})
    values = [bytes(r.value).decode() for r in committed.orderBy("offset").collect()]
    assert values == [f"c1-{i}" for i in range(5)] + [f"c2-{i}" for i in range(5)]
    everything = read(spark, broker.bootstrap, subscribe=topic_name).collect()
    assert sorted(bytes(r.value).decode() for r in everything) == sorted(
        [f"{lab}-{i}" for lab in ("c1", "ab", "c2") for i in range(5)])


def test_fail_on_data_loss_after_delete_records(spark: SparkSession, broker: BrokerProcess,
                                                topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [(0, None, f"r{i}".encode()) for i in range(10)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_records([TopicPartition(topic_name, 0, 4)])[TopicPartition(topic_name, 0, 4)].result(30)
    start = json.dumps({topic_name: {"0": 0}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, broker.bootstrap, subscribe=topic_name, startingOffsets=start).collect()
    rows = read(spark, broker.bootstrap, subscribe=topic_name, startingOffsets=start,
                failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(4, 10))


@pytest.mark.parametrize(("options", "needle"), [
    ({"subscribe": "t", "bogusOption": "1"}, "'bogusoption': unknown option"),
    ({"subscribe": "t", "assign": '{"t":[0]}'}, "exactly one of 'assign', 'subscribe' or 'subscribePattern'"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":5'}, "option 'startingOffsets': malformed JSON"),
    ({"subscribe": "t", "endingOffsets": '{"t":[1]}'}, "option 'endingOffsets'"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
    ({"subscribe": "t", "minPartitions": "0"}, "option 'minPartitions': expected a positive integer"),
])
def test_bad_options_are_clear_errors(spark: SparkSession, broker: BrokerProcess,
                                      options: dict[str, str], needle: str) -> None:
    with pytest.raises(Exception, match="OptionError") as info:
        read(spark, broker.bootstrap, **options).collect()
    assert needle in str(info.value)


def test_stream_processing_time_picks_up_new_records_and_partitions(spark: SparkSession, broker: BrokerProcess,
                                                                    topic_name: str, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [(0, None, b"before")])  # startingOffsets=latest skips it
    stream = (spark.readStream.format("strom").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic_name).load())
    table = "t_" + topic_name.replace("-", "_")
    query = (stream.selectExpr("CAST(value AS STRING) AS v", "partition").writeStream.format("memory")
             .queryName(table).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        def seen() -> list[tuple[str, int]]:
            return sorted((r.v, r.partition) for r in spark.sql(f"SELECT * FROM {table}").collect())

        def wait_for(want: list[tuple[str, int]]) -> None:
            deadline = time.monotonic() + 120
            while seen() != want:
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, f"saw {seen()}, want {want}"
                time.sleep(0.5)

        # The first micro-batch fixes the starting offsets (latest) before anything new arrives.
        deadline = time.monotonic() + 120
        while not query.recentProgress:
            assert time.monotonic() < deadline
            time.sleep(0.3)
        produce(broker.bootstrap, topic_name, [(0, None, f"r{i}".encode()) for i in range(5)])
        wait_for([(f"r{i}", 0) for i in range(5)])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(30)
        produce(broker.bootstrap, topic_name, [(1, None, b"new-partition")])
        wait_for(sorted([(f"r{i}", 0) for i in range(5)] + [("new-partition", 1)]))
    finally:
        query.stop()


def test_stream_resumes_after_broker_kill9(spark: SparkSession, fresh_broker: BrokerProcess,
                                           topic_name: str, tmp_path: Path) -> None:
    """kill -9 of the broker between two AvailableNow runs: the second resumes at the checkpoint."""
    fresh_broker.start()
    create_topic(fresh_broker.bootstrap, topic_name, 2)
    produce(fresh_broker.bootstrap, topic_name, [(i % 2, None, f"a{i}".encode()) for i in range(40)])
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run() -> None:
        query = (spark.readStream.format("strom").option("kafka.bootstrap.servers", fresh_broker.bootstrap)
                 .option("subscribe", topic_name).option("startingOffsets", "earliest").load()
                 .selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
                 .writeStream.format("parquet").option("path", str(out))
                 .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        assert query.awaitTermination(180) and query.exception() is None

    run()
    fresh_broker.kill()
    fresh_broker.start()  # same data dir and port; recovery after an unclean shutdown
    produce(fresh_broker.bootstrap, topic_name, [(i % 2, None, f"b{i}".encode()) for i in range(20)])
    run()
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r.v for r in rows) == sorted([f"a{i}" for i in range(40)] + [f"b{i}" for i in range(20)])
    assert _offsets_in_checkpoint(ckpt) == {topic_name: {"0": 30, "1": 30}}


def test_ending_offset_beyond_the_log_fails_after_poll_timeout(spark: SparkSession, broker: BrokerProcess,
                                                               topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [(0, None, b"x")] * 3)
    df = read(spark, broker.bootstrap, subscribe=topic_name, **{
        "endingOffsets": json.dumps({topic_name: {"0": 10}}), "kafkaConsumer.pollTimeoutMs": "2000"})
    with pytest.raises(Exception, match=r"kafkaConsumer\.pollTimeoutMs"):
        df.collect()
