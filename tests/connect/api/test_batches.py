"""Columnar record batches: the records they stand for, built on demand; the file sink reads the
column without building them (the file source's side is in tests/connect/connectors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.connect.api import SinkRecord, SinkRecordBatch, SourceRecord, SourceRecordBatch
from strom.connect.connectors.file_stream import FileStreamSinkTask
from strom.connect.data import Schema


def test_source_batch_is_the_sequence_of_its_records() -> None:
    part = {"file": "f"}
    batch = SourceRecordBatch(part, [{"pos": 1}, {"pos": 2}], "t", Schema.STRING_SCHEMA, ["a", "b"],
                              key_schema=Schema.STRING_SCHEMA, keys=["k1", "k2"], kafka_partition=3, timestamp=7)
    expected = [SourceRecord(part, {"pos": 1}, "t", 3, Schema.STRING_SCHEMA, "k1", Schema.STRING_SCHEMA, "a", 7),
                SourceRecord(part, {"pos": 2}, "t", 3, Schema.STRING_SCHEMA, "k2", Schema.STRING_SCHEMA, "b", 7)]
    assert batch._records is None  # nothing built yet
    assert batch.last_source_offset() == {"pos": 2}
    assert len(batch) == 2 and batch
    assert batch._records is None
    assert list(batch) == expected and batch == expected
    assert batch[1] == expected[1] and batch[-1] is batch[1]  # built once, then kept
    assert batch[:1] == expected[:1]
    assert expected[0] in batch and batch.index(expected[1]) == 1


def test_source_batch_without_keys_and_empty() -> None:
    batch = SourceRecordBatch(None, [None], "t", None, [b"v"])
    assert batch[0].key is None and batch[0].key_schema is None and batch[0].kafka_partition is None
    empty = SourceRecordBatch(None, [], "t", None, [])
    assert not empty and len(empty) == 0 and empty.last_source_offset() is None and list(empty) == []


def test_source_batch_columns_must_line_up() -> None:
    with pytest.raises(ValueError, match="2 source offsets for 1 values"):
        SourceRecordBatch(None, [None, None], "t", None, ["a"])
    with pytest.raises(ValueError, match="1 keys for 2 values"):
        SourceRecordBatch(None, [None, None], "t", None, ["a", "b"], keys=["k"])


def test_sink_batch_builds_its_records_once() -> None:
    batch = SinkRecordBatch("t", [0, 0, 1], [5, 6, 9], None, [None, b"k", None], Schema.STRING_SCHEMA,
                            ["x", "y", "z"], [(1, 100), (2, 200), (0, -1)])
    assert batch.values == ["x", "y", "z"] and len(batch) == 3 and batch._records is None
    records = list(batch)
    assert records == [
        SinkRecord("t", 0, None, None, Schema.STRING_SCHEMA, "x", 5, 100, "CreateTime"),
        SinkRecord("t", 0, None, b"k", Schema.STRING_SCHEMA, "y", 6, 200, "LogAppendTime"),
        SinkRecord("t", 1, None, None, Schema.STRING_SCHEMA, "z", 9, None, "NoTimestampType"),
    ]
    assert records[2].original_kafka_offset == 9
    assert batch[0] is records[0]  # built once
    assert SinkRecordBatch("t", [0], [1], None, [None], None, ["a"])[0].timestamp is None
    with pytest.raises(ValueError, match="one item per record"):
        SinkRecordBatch("t", [0], [1, 2], None, [None], None, ["a"])
    with pytest.raises(ValueError, match="one item per record"):
        SinkRecordBatch("t", [0], [1], None, [None], None, ["a"], [(1, 1), (1, 2)])


def test_file_sink_writes_a_batch_from_its_value_column(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    task = FileStreamSinkTask()
    task.start({"file": str(out)})
    batch = SinkRecordBatch("t", [0, 0], [0, 1], None, [None, None], Schema.STRING_SCHEMA, ["a", "b"])
    task.put(batch)
    assert batch._records is None  # the sink read the column only
    task.put([SinkRecord("t", 0, None, None, None, {"n": 1}, 2)])  # a plain list of records still works
    task.stop()
    assert out.read_text() == 'a\nb\n{"n":1}\n'
