"""FileStreamSource/Sink tasks run directly (no worker): lines, batches, offsets, restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strom.connect.api.batches import SourceRecordBatch
from strom.connect.api.records import SinkRecord
from strom.connect.connectors.file_stream import (
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from strom.connect.data import Schema, SchemaBuilder, Struct
from strom.connect.exceptions import ConfigException, ConnectException
from strom.connect.runtime.offsets import FileOffsetBackingStore


def test_source_connector_config_and_task_configs(tmp_path: Path) -> None:
    c = FileStreamSourceConnector()
    assert c.KAFKA_CLASS_NAME == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    c.start({"file": str(tmp_path / "in"), "topic": "t", "name": "x", "connector.class": "FileStreamSource"})
    assert c.task_configs(3) == [{"file": str(tmp_path / "in"), "topic": "t", "batch.size": "2000"}]
    with pytest.raises(ConfigException, match="topic"):
        FileStreamSourceConnector().start({"file": "f"})
    with pytest.raises(ConfigException, match=r"batch\.size"):
        FileStreamSourceConnector().start({"file": "f", "topic": "t", "batch.size": "0"})
    keys = c.config().config_keys
    assert set(keys) == {"file", "topic", "batch.size"}
    errors = {v.name: v.errors for v in c.validate({"file": "f"}).config_values}
    assert errors["topic"]


def test_source_reads_lines_with_kafka_offsets(tmp_path: Path, harness: Any) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes(b"alpha\nbeta\r\ngamma\npartial")
    h = harness(FileStreamSourceTask, {"file": str(src), "topic": "lines"})
    records = h.poll()
    assert [r.value for r in records] == ["alpha", "beta", "gamma"]
    assert all(r.topic == "lines" and r.value_schema == Schema.STRING_SCHEMA and r.key is None for r in records)
    assert records[0].source_partition == {"filename": str(src)}
    assert [r.source_offset for r in records] == [{"position": 6}, {"position": 12}, {"position": 18}]
    assert h.poll() == []  # "partial" has no newline yet
    with src.open("ab") as f:
        f.write(b" line\nlast\n")
    more = h.poll()
    assert [r.value for r in more] == ["partial line", "last"]
    assert more[-1].source_offset == {"position": src.stat().st_size}


def test_source_batch_size_limits_each_poll(tmp_path: Path, harness: Any) -> None:
    src = tmp_path / "in.txt"
    src.write_text("".join(f"line-{i}\n" for i in range(25)))
    h = harness(FileStreamSourceTask, {"file": str(src), "topic": "t", "batch.size": "10"})
    sizes = [len(h.poll()) for _ in range(4)]
    assert sizes == [10, 10, 5, 0]


def test_source_resumes_from_committed_position(tmp_path: Path, harness: Any) -> None:
    src = tmp_path / "in.txt"
    src.write_text("".join(f"{i}\n" for i in range(10)))
    store_path = tmp_path / "offsets.dat"
    props = {"file": str(src), "topic": "t", "batch.size": "4"}
    first = harness(FileStreamSourceTask, props, FileOffsetBackingStore(store_path))
    got = first.poll()
    assert [r.value for r in got] == ["0", "1", "2", "3"]
    first.poll(commit=False)  # published but offsets never committed: will be re-read
    first.stop()
    first.store.stop()
    second = harness(FileStreamSourceTask, props, FileOffsetBackingStore(store_path))
    assert [r.value for r in second.drain()] == [str(i) for i in range(4, 10)]


def test_source_waits_for_missing_file(tmp_path: Path, harness: Any) -> None:
    src = tmp_path / "later.txt"
    h = harness(FileStreamSourceTask, {"file": str(src), "topic": "t"})
    assert h.poll() == []
    src.write_text("now\n")
    assert [r.value for r in h.poll()] == ["now"]


def test_source_bad_stored_offset_fails(tmp_path: Path, harness: Any) -> None:
    src = tmp_path / "in.txt"
    src.write_text("a\n")
    h = harness(FileStreamSourceTask, {"file": str(src), "topic": "t"})
    h.writer.offset({"filename": str(src)}, {"position": "oops"})
    h.writer.begin_flush()
    h.writer.do_flush()
    h.task.stop()
    h.task.start({"file": str(src), "topic": "t"})
    with pytest.raises(ConnectException, match="incorrect type"):
        h.task.poll()


def test_source_alter_offsets_checks_like_kafka() -> None:
    c = FileStreamSourceConnector()
    assert c.alter_offsets({}, [({"filename": "f"}, {"position": 3}), ({"filename": "g"}, None)])
    for partition, offset, msg in (({"x": 1}, {"position": 1}, "filename"), ({"filename": "f"}, {"p": 1}, "position"),
                                   ({"filename": "f"}, {"position": "1"}, "Long"),
                                   ({"filename": "f"}, {"position": -1}, "non-negative")):
        with pytest.raises(ConnectException, match=msg):
            c.alter_offsets({}, [(partition, offset)])


def sink_record(value: Any, offset: int, schema: Schema | None = Schema.STRING_SCHEMA) -> SinkRecord:
    return SinkRecord("t", 0, None, None, schema, value, kafka_offset=offset)


def test_sink_appends_values(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("existing\n")
    c = FileStreamSinkConnector()
    assert c.KAFKA_CLASS_NAME == "org.apache.kafka.connect.file.FileStreamSinkConnector"
    c.start({"file": str(out), "topics": "t"})
    assert len(c.task_configs(2)) == 2
    task = FileStreamSinkTask()
    task.start({"file": str(out), "topics": "t"})
    schema = SchemaBuilder.struct().field("a", Schema.INT32_SCHEMA).build()
    task.put([sink_record("one", 0), sink_record(None, 1, None), sink_record({"k": [1, 2]}, 2, None),
              sink_record(True, 3, Schema.BOOLEAN_SCHEMA), sink_record(Struct(schema).put("a", 7), 4, schema)])
    task.flush({})
    lines = out.read_text().splitlines()
    assert lines[:5] == ["existing", "one", "null", '{"k":[1,2]}', "true"]
    assert "7" in lines[5]
    task.stop()


def test_sink_unwritable_file_fails(tmp_path: Path) -> None:
    task = FileStreamSinkTask()
    with pytest.raises(ConnectException, match="Couldn't find or create"):
        task.start({"file": str(tmp_path / "no" / "such" / "dir" / "out.txt")})


def test_source_polls_columns_with_the_positions_kafka_commits(tmp_path: Path, harness: Any) -> None:
    src = tmp_path / "in.txt"
    lines = ["plain", "ünïcode", "crlf\r", "", "last"]
    src.write_bytes("".join(f"{line}\n" for line in lines).encode())
    h = harness(FileStreamSourceTask, {"file": str(src), "topic": "t", "batch.size": "3"})
    first = h.task.poll()
    assert isinstance(first, SourceRecordBatch)
    assert first.values == ["plain", "ünïcode", "crlf"]
    # The last offset is known without building records: the byte position after the batch.
    end = len("plain\nünïcode\ncrlf\r\n".encode())
    assert first.last_source_offset() == {"position": end}
    assert first._records is None
    second_pos = 6 + len("ünïcode\n".encode())
    assert [r.source_offset for r in first] == [{"position": 6}, {"position": second_pos}, {"position": end}]
    assert first.source_offsets[0:2] == [{"position": 6}, {"position": second_pos}]
    second = h.task.poll()
    assert second.values == ["", "last"]
    assert second.last_source_offset() == {"position": src.stat().st_size}


def test_source_resumes_from_a_committed_offset_inside_its_read_buffer(tmp_path: Path, harness: Any) -> None:
    """One read holds more lines than a poll takes: after a restart from the last committed
    position the lines still buffered come again, and none twice."""
    src = tmp_path / "in.txt"
    src.write_text("".join(f"line-{i}\n" for i in range(30)))
    props = {"file": str(src), "topic": "t", "batch.size": "10"}
    h = harness(FileStreamSourceTask, props)
    assert [r.value for r in h.poll()] == [f"line-{i}" for i in range(10)]  # committed
    assert len(h.poll(commit=False)) == 10  # read, never committed
    h.stop()
    again = harness(FileStreamSourceTask, props, store=h.store).drain()
    assert [r.value for r in again] == [f"line-{i}" for i in range(10, 30)]
