"""Runtime pieces without a broker: offset stores, reader/writer, retry/tolerance, configs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from strom.connect.api.records import SourceRecord
from strom.connect.exceptions import ConfigException, ConnectException, DataException, RetriableException
from strom.connect.runtime.config import ConnectorConfig, WorkerConfig
from strom.connect.runtime.errors import (
    ProcessingContext,
    RetryWithToleranceOperator,
    Stage,
    Tolerated,
)
from strom.connect.runtime.offsets import (
    FileOffsetBackingStore,
    MemoryOffsetBackingStore,
    OffsetStorageReaderImpl,
    OffsetStorageWriter,
    canonical_key,
    connector_offsets,
    serialize_key,
)
from strom.connect.runtime.worker_source_task import SubmittedRecords

# -- offsets ------------------------------------------------------------------------------------


def test_key_format_is_kafka_connects() -> None:
    assert serialize_key("c1", {"filename": "/tmp/x"}) == b'["c1",{"filename":"/tmp/x"}]'
    # A key written with another map order (Kafka's HashMap) finds the same entry.
    assert canonical_key(b'["c1", {"b": 1, "a": 2}]') == serialize_key("c1", {"a": 2, "b": 1})


def test_file_store_round_trip_and_reader_writer(tmp_path: Path) -> None:
    path = tmp_path / "offsets" / "connect.offsets"
    store = FileOffsetBackingStore(path)
    store.start()
    writer = OffsetStorageWriter(store, "src")
    writer.offset({"file": "a"}, {"position": 10})
    writer.offset({"file": "b"}, {"position": 3})
    assert writer.begin_flush()
    writer.do_flush()
    assert not writer.begin_flush()  # nothing staged
    store.stop()

    again = FileOffsetBackingStore(path)
    again.start()
    reader = OffsetStorageReaderImpl(again, "src")
    assert reader.offset({"file": "a"}) == {"position": 10}
    assert reader.offset({"file": "zzz"}) is None
    assert reader.offsets([{"file": "b"}, {"file": "a"}]) == [({"file": "b"}, {"position": 3}),
                                                               ({"file": "a"}, {"position": 10})]
    assert OffsetStorageReaderImpl(again, "other").offset({"file": "a"}) is None  # namespaced
    assert sorted(p["file"] for p, _ in connector_offsets(again, "src")) == ["a", "b"]
    # A None offset deletes the partition (Kafka's offset reset).
    OffsetStorageWriter(again, "src").offset({"file": "a"}, None)
    w = OffsetStorageWriter(again, "src")
    w.offset({"file": "a"}, None)
    w.begin_flush()
    w.do_flush()
    assert reader.offset({"file": "a"}) is None
    # The file is JSON rows of Kafka's key/value texts.
    rows = json.loads(path.read_text())
    assert rows == [['["src",{"file":"b"}]', '{"position":3}']]


def test_corrupt_or_truncated_offsets_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    good = FileOffsetBackingStore(path)
    good.start()
    good.set({serialize_key("c", {"p": 1}): b'{"o":1}'})
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # torn write (not ours: we rename atomically)
    with pytest.raises(ConnectException, match="corrupt"):
        FileOffsetBackingStore(path).start()
    path.write_text('[["not a key", "{}"]]')
    with pytest.raises(ConnectException, match="corrupt"):
        FileOffsetBackingStore(path).start()


def test_writer_cancel_keeps_newer_offsets() -> None:
    class FailingStore(MemoryOffsetBackingStore):
        fail = True

        def set(self, values):  # type: ignore[no-untyped-def]
            if self.fail:
                raise OSError("disk full")
            super().set(values)

    store = FailingStore()
    w = OffsetStorageWriter(store, "c")
    w.offset({"p": 0}, {"n": 1})
    assert w.begin_flush()
    w.offset({"p": 0}, {"n": 2})  # staged while the flush runs
    with pytest.raises(OSError):
        w.do_flush()
    store.fail = False
    assert w.begin_flush()
    w.do_flush()
    assert OffsetStorageReaderImpl(store, "c").offset({"p": 0}) == {"n": 2}


def test_submitted_records_commit_only_fully_acked_batches_in_order() -> None:
    sub = SubmittedRecords()
    part_x, part_y = {"f": "x"}, {"f": "y"}
    first, second = sub.new_batch(), sub.new_batch()
    for batch, n in ((first, 1), (first, 2), (second, 3)):
        batch.pending += 1
        batch.note(SourceRecord(part_x, {"n": n}, "t"))
    second.note(SourceRecord({"f": "y"}, {"n": 7}, "t"))  # an equal dict of another identity
    second.note(SourceRecord(part_y, {"n": 8}, "t"))
    second.note(SourceRecord(None, {"n": 9}, "t"))  # no partition: nothing to commit
    second.pending -= 1  # the later batch is acked first: nothing may be committed yet
    assert sub.committable() == [] and sub.outstanding == 2
    first.pending -= 1
    assert sub.committable() == []  # one record of the first batch is still unacknowledged
    first.pending -= 1
    assert sub.committable() == [({"f": "x"}, {"n": 3}), ({"f": "y"}, {"n": 8})]
    assert sub.committable() == [] and sub.outstanding == 0


# -- retry / tolerance -------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.contexts: list[tuple[Stage, str]] = []

    def report(self, ctx: ProcessingContext) -> None:
        self.contexts.append((ctx.stage, type(ctx.error).__name__))

    def flush(self, timeout: float) -> None:
        pass

    def close(self) -> None:
        pass


def test_retriable_failures_retry_with_backoff_until_success() -> None:
    waits: list[float] = []

    class Ev(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            return False

    calls = {"n": 0}

    def op() -> str:
        calls["n"] += 1
        if calls["n"] < 4:
            raise RetriableException("not yet")
        return "ok"

    rec = Recorder()
    operator = RetryWithToleranceOperator(retry_timeout_ms=60000, retry_delay_max_ms=1000,
                                          reporters=[rec], stopping=Ev())
    ctx = ProcessingContext("c", 0, Stage.VALUE_CONVERTER)
    assert operator.execute(op, ctx) == "ok"
    assert waits == [0.3, 0.6, 1.0]  # 300 ms doubling, capped by errors.retry.delay.max.ms
    assert rec.contexts == []


def test_retry_timeout_then_tolerance_decides() -> None:
    def op() -> None:
        raise RetriableException("down")

    clock = iter([0.0, 0.0, 100.0, 100.0])
    rec = Recorder()
    strict = RetryWithToleranceOperator(retry_timeout_ms=1000, reporters=[rec], clock=lambda: next(clock))
    strict.stopping.wait = lambda timeout=None: False  # type: ignore[method-assign]
    with pytest.raises(ConnectException, match="Tolerance exceeded"):
        strict.execute(op, ProcessingContext("c", 0, Stage.KEY_CONVERTER))
    assert rec.contexts == []  # as Kafka: an intolerable failure fails the task, unreported

    lenient = RetryWithToleranceOperator(tolerance_all=True, reporters=[rec])

    def bad() -> None:
        raise DataException("not json")

    with pytest.raises(Tolerated):
        lenient.execute(bad, ProcessingContext("c", 0, Stage.VALUE_CONVERTER))
    assert lenient.total_skipped == 1
    assert rec.contexts == [(Stage.VALUE_CONVERTER, "DataException")]
    # A stage that cannot be skipped fails the task even with tolerance all.
    with pytest.raises(ConnectException):
        lenient.execute(bad, ProcessingContext("c", 0, Stage.TASK_POLL))


# -- configs ----------------------------------------------------------------------------------


def test_worker_config_aliases_and_client_overrides(tmp_path: Path) -> None:
    p = tmp_path / "worker.properties"
    p.write_text("bootstrap.servers=h:1\noffset.flush.interval.ms=250\nproducer.linger.ms=50\n"
                 "consumer.max.poll.records=7\nkey.converter.schemas.enable=false\n")
    cfg = WorkerConfig.load(p)
    assert cfg.bootstrap_servers == "h:1" and cfg.offset_flush_interval_ms == 250
    assert cfg.producer_config()["linger.ms"] == "50"
    assert cfg.consumer_config()["max.poll.records"] == "7"
    assert cfg.with_prefix("key.converter.") == {"schemas.enable": "false"}
    with pytest.raises(ConfigException, match=r"offset\.flush\.interval\.ms"):
        WorkerConfig.from_mapping({"offset.flush.interval.ms": "soon"})


def test_connector_config_validation_names_the_key() -> None:
    base = {"name": "s", "connector.class": "X"}
    cfg = ConnectorConfig({**base, "topics": "a,b", "errors.tolerance": "all"}, "sink")
    assert cfg.get("topics") == ["a", "b"] and cfg.tolerance_all
    with pytest.raises(ConfigException, match="topics"):
        ConnectorConfig(base, "sink")  # neither topics nor topics.regex
    with pytest.raises(ConfigException, match=r"errors\.tolerance"):
        ConnectorConfig({**base, "errors.tolerance": "some"})
    with pytest.raises(ConfigException, match=r"tasks\.max"):
        ConnectorConfig({**base, "tasks.max": "0"})
    with pytest.raises(ConfigException, match=r"transforms\.t\.type"):
        ConnectorConfig({**base, "transforms": "t"})
    with pytest.raises(ConfigException, match=r"transforms\.t\.predicate"):
        ConnectorConfig({**base, "transforms": "t", "transforms.t.type": "Filter",
                         "transforms.t.predicate": "nope"})
    with pytest.raises(ConfigException, match=r"errors\.deadletterqueue\.topic\.name"):
        ConnectorConfig({**base, "topics": "a", "errors.deadletterqueue.topic.name": "a"}, "sink")
    with pytest.raises(ConfigException, match=r"connector\.class"):
        ConnectorConfig({"name": "s"})


# -- CLI ----------------------------------------------------------------------------------------


def test_connector_files_in_kafkas_shapes(tmp_path: Path) -> None:
    from strom.connect.cli import load_connector_config, main
    from strom.connect.exceptions import ConnectError

    props = tmp_path / "a.properties"
    props.write_text("name=a\nconnector.class=FileStreamSource\n# comment\ntopic=t\n")
    nested = tmp_path / "b.json"
    nested.write_text(json.dumps({"name": "b", "config": {"connector.class": "X", "tasks.max": 2,
                                                           "errors.log.enable": True}}))
    flat = tmp_path / "c.json"
    flat.write_text(json.dumps({"name": "c", "connector.class": "X"}))
    assert load_connector_config(props) == ("a", {"name": "a", "connector.class": "FileStreamSource", "topic": "t"})
    assert load_connector_config(nested) == ("b", {"connector.class": "X", "tasks.max": "2",
                                                   "errors.log.enable": "true", "name": "b"})
    assert load_connector_config(flat) == ("c", {"name": "c", "connector.class": "X"})
    broken = tmp_path / "d.json"
    broken.write_text('{"name": "d", "config": {')
    with pytest.raises(ConnectError, match="not valid JSON"):
        load_connector_config(broken)
    nameless = tmp_path / "e.properties"
    nameless.write_text("connector.class=X\n")
    with pytest.raises(ConnectError, match="no 'name'"):
        load_connector_config(nameless)
    worker = tmp_path / "w.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:1\n")
    assert main(["standalone", str(worker), str(broken)]) == 2  # refused before anything starts


# -- standalone herder without tasks -----------------------------------------------------------


def test_validation_and_errors_of_the_standalone_herder(tmp_path: Path) -> None:
    import strom_test_connect_plugins as tp

    from strom.connect.converters import PLUGINS
    from strom.connect.exceptions import AlreadyExistsError, BadRequestError, NotFoundError
    from strom.connect.plugins import PluginRegistry
    from strom.connect.runtime.herder import TargetState
    from strom.connect.runtime.standalone import StandaloneHerder

    herder = StandaloneHerder(WorkerConfig.from_mapping({
        "bootstrap.servers": "127.0.0.1:1", "offset.storage.file.filename": str(tmp_path / "o")}),
        PluginRegistry(classes=[*PLUGINS, tp.SeqSource, tp.FileCollectSink, tp.FailOnValue]))
    try:
        ok = herder.validate_connector_config({"name": "a", "connector.class": "SeqSource", "topic": "t"})
        assert ok["name"] == "SeqSource" and ok["error_count"] == 0
        names = [c["definition"]["name"] for c in ok["configs"] if c["definition"]]
        assert {"name", "connector.class", "tasks.max", "errors.tolerance", "exactly.once.support",
                "topic"} <= set(names)
        bad = herder.validate_connector_config({
            "name": "a", "connector.class": "FileCollectSink", "errors.tolerance": "most",
            "transforms": "x", "transforms.x.type": "NoSuchTransform"})
        errors = {c["value"]["name"]: c["value"]["errors"] for c in bad["configs"] if c["value"]["errors"]}
        assert bad["error_count"] == len([e for es in errors.values() for e in es]) >= 3
        assert {"errors.tolerance", "topics", "transforms.x.type"} <= set(errors)
        with pytest.raises(BadRequestError, match=r"errors\.tolerance"):
            herder.put_connector_config("a", {"connector.class": "SeqSource", "topic": "t",
                                              "errors.tolerance": "most"}, False)
        with pytest.raises(BadRequestError, match="doesn't match"):
            herder.put_connector_config("a", {"name": "b", "connector.class": "SeqSource", "topic": "t"}, False)
        # Created STOPPED: no tasks run, so no broker is needed.
        created, info = herder.put_connector_config(
            "a", {"connector.class": "SeqSource", "topic": "t"}, False, TargetState.STOPPED)
        assert created and info.to_json() == {"name": "a", "type": "source", "tasks": [],
                                              "config": {"connector.class": "SeqSource", "topic": "t",
                                                         "name": "a"}}
        assert herder.connector_status("a").connector.state.value == "STOPPED"
        with pytest.raises(AlreadyExistsError):
            herder.put_connector_config("a", {"connector.class": "SeqSource", "topic": "t"}, False)
        patched = herder.patch_connector_config("a", {"topic": "u", "tasks.max": None})
        assert patched.config["topic"] == "u"
        herder.delete_connector("a")
        with pytest.raises(NotFoundError):
            herder.connector_status("a")
    finally:
        herder.stop()
