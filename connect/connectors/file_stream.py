"""FileStreamSource / FileStreamSink: Kafka's file connectors, same config keys and offsets.

The source reads lines of ``file`` (stdin when unset) and publishes each as a STRING value to
``topic``, ``batch.size`` lines per poll at most. Its source partition is
``{"filename": file}`` and its offset ``{"position": n}``, the byte position after the last
line published (Kafka counts characters; the two agree for ASCII), so offsets written by Kafka
Connect's FileStreamSource resume here and vice versa. A line is published only once its newline
has been written. The sink appends each record's value and a newline to ``file`` (stdout when
unset).

The source reads the file in large chunks and splits them with ``bytes.split``, and returns each
poll's lines as one :class:`SourceRecordBatch` (columns, no object per line); the sink writes a
:class:`SinkRecordBatch`'s value column in one call. Records are built only when something asks
for them (a transformation, a custom sink).
"""

from __future__ import annotations

import json
import logging
import os
import select
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import IO, Any

from strom.connect.api.batches import SinkRecordBatch, SourceRecordBatch
from strom.connect.api.config import ConfigDef, ConfigType, Importance, NonEmptyString, Range
from strom.connect.api.connector import ExactlyOnceSupport, SinkConnector, SourceConnector
from strom.connect.api.records import SinkRecord, SourceRecord, TopicPartition
from strom.connect.api.task import SinkTask, SourceTask, Task
from strom.connect.data import Schema, Struct
from strom.connect.exceptions import ConnectException

log = logging.getLogger(__name__)

FILE_CONFIG = "file"
TOPIC_CONFIG = "topic"
TOPICS_CONFIG = "topics"
BATCH_SIZE_CONFIG = "batch.size"
DEFAULT_BATCH_SIZE = 2000
FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
READ_CHUNK = 1 << 20
IDLE_WAIT_S = 0.1  # how long poll waits for more input before returning None

SOURCE_CONFIG_DEF = (
    ConfigDef()
    .define(FILE_CONFIG, ConfigType.STRING, None, importance=Importance.HIGH,
            doc="Source filename. If not specified, the standard input will be used")
    .define(TOPIC_CONFIG, ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="The topic to publish data to")
    .define(BATCH_SIZE_CONFIG, ConfigType.INT, DEFAULT_BATCH_SIZE, validator=Range.at_least(1),
            importance=Importance.LOW,
            doc="The maximum number of records the source task can read from the file each time it is polled")
)

SINK_CONFIG_DEF = ConfigDef().define(
    FILE_CONFIG, ConfigType.STRING, None, importance=Importance.HIGH,
    doc="Destination filename. If not specified, the standard output will be used")


def _check_offsets(offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None:
    """Kafka's FileStreamSourceConnector.alterOffsets checks."""
    for partition, offset in offsets:
        if offset is None:
            continue  # a reset is always allowed
        if FILENAME_FIELD not in partition:
            raise ConnectException(f"Partition objects for source offsets must contain the key '{FILENAME_FIELD}'")
        if POSITION_FIELD not in offset:
            raise ConnectException(f"Offset objects should contain the key '{POSITION_FIELD}'")
        position = offset[POSITION_FIELD]
        if isinstance(position, bool) or not isinstance(position, int):
            raise ConnectException(f"The value for the '{POSITION_FIELD}' key in the offset is expected to be a "
                                   "Long value")
        if position < 0:
            raise ConnectException(f"The value for the '{POSITION_FIELD}' key in the offset should be a "
                                   "non-negative value")


class FileStreamSourceConnector(SourceConnector):
    """Reads lines of a file (or stdin) into a topic; one task."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.file.FileStreamSourceConnector"

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        parsed = SOURCE_CONFIG_DEF.parse(props)
        self._props = {TOPIC_CONFIG: parsed[TOPIC_CONFIG], BATCH_SIZE_CONFIG: str(parsed[BATCH_SIZE_CONFIG])}
        if parsed[FILE_CONFIG]:
            self._props[FILE_CONFIG] = parsed[FILE_CONFIG]

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props)]  # a file is one stream: one task

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return SOURCE_CONFIG_DEF

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        # Reading stdin cannot be replayed; a file can, from its stored position.
        return ExactlyOnceSupport.SUPPORTED if props.get(FILE_CONFIG) else ExactlyOnceSupport.UNSUPPORTED

    def alter_offsets(self, props: Mapping[str, str],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> bool:
        _check_offsets(offsets)
        return True


class FileStreamSourceTask(SourceTask):
    """Publishes each complete line of the file from the stored position on."""

    # Written as the task configs' task.class: a Kafka Connect worker in the same cluster can
    # then run a task of a connector that a strom worker runs (and the other way round).
    KAFKA_CLASS_NAME = "org.apache.kafka.connect.file.FileStreamSourceTask"

    def __init__(self) -> None:
        self.filename: str | None = None
        self.topic = ""
        self.batch_size = DEFAULT_BATCH_SIZE
        self._stream: IO[bytes] | None = None
        self._position = 0  # byte position after the last line handed out
        self._pending = b""  # bytes read past the last complete line
        self._lines: list[bytes] = []  # complete lines read but not handed out yet
        self._stop = threading.Event()
        self._io_lock = threading.Lock()
        self._partition: dict[str, Any] = {}

    def start(self, props: dict[str, str]) -> None:
        parsed = SOURCE_CONFIG_DEF.parse(props)
        self.filename = parsed[FILE_CONFIG] or None
        self.topic = parsed[TOPIC_CONFIG]
        self.batch_size = parsed[BATCH_SIZE_CONFIG]
        self._partition = {FILENAME_FIELD: self.filename}
        self._stop.clear()

    def _open(self) -> IO[bytes] | None:
        if self.filename is None:
            return sys.stdin.buffer
        try:
            stream = open(self.filename, "rb")  # noqa: SIM115 - kept open across polls
        except FileNotFoundError:
            log.warning("Couldn't find file %s for FileStreamSourceTask, sleeping to wait for it to be created",
                        self.filename)
            return None
        position = 0
        if self.context is not None:
            stored = self.context.offset_storage_reader.offset(self._partition)
            if stored is not None:
                value = stored.get(POSITION_FIELD)
                if not isinstance(value, int):
                    stream.close()
                    raise ConnectException(f"Offset position is the incorrect type: {type(value).__name__}")
                position = value
        if position:
            log.debug("Found previous offset %d for %s, seeking", position, self.filename)
            stream.seek(position)
        self._position = position
        self._pending = b""
        self._lines = []
        return stream

    def _read(self, stream: IO[bytes]) -> bytes:
        if self.filename is None:
            ready, _, _ = select.select([stream], [], [], IDLE_WAIT_S)
            return os.read(stream.fileno(), READ_CHUNK) if ready else b""
        return stream.read(READ_CHUNK)

    def poll(self) -> Sequence[SourceRecord] | None:
        # stop() may run on another thread: reading and closing share a lock, waits happen outside it.
        with self._io_lock:
            if self._stop.is_set():
                return None
            if self._stream is None:
                self._stream = self._open()
            if self._stream is None:
                wait = 1.0
            else:
                lines = self._read_lines(self._stream)
                if lines:
                    return self._records(lines)
                wait = IDLE_WAIT_S
        self._stop.wait(wait)
        return None

    def _read_lines(self, stream: IO[bytes]) -> list[bytes]:
        # Each chunk is split once; complete lines wait in _lines until polls have taken them all.
        buffered = self._lines
        size = self.batch_size
        while len(buffered) < size:
            chunk = self._read(stream)
            if not chunk:
                break
            parts = (self._pending + chunk).split(b"\n")
            self._pending = parts.pop()  # the unterminated tail waits for its newline
            buffered.extend(parts)
        lines = buffered[:size]
        del buffered[:size]
        return lines

    def _records(self, lines: list[bytes]) -> SourceRecordBatch:
        now = int(time.time() * 1000)
        start = self._position
        block = b"\n".join(lines)
        if block.isascii() and b"\r" not in block:
            # The common case, decoded in one call: a character is a byte.
            texts = block.decode("ascii").split("\n")
        else:
            texts = [(raw[:-1] if raw.endswith(b"\r") else raw).decode("utf-8", "replace") for raw in lines]
        self._position = start + len(block) + 1  # every line plus its newline
        return SourceRecordBatch(self._partition, _LinePositions(start, lines, self._position), self.topic,
                                 Schema.STRING_SCHEMA, texts, timestamp=now)

    def stop(self) -> None:
        self._stop.set()
        with self._io_lock:
            stream, self._stream = self._stream, None
            if stream is not None and self.filename is not None:
                stream.close()


class _LinePositions(Sequence[Mapping[str, int]]):
    """The source offsets of one poll's lines, ``{"position": p}`` after each, built on demand:
    the worker commits only the last, which is known without adding up the lines."""

    __slots__ = ("_end", "_lines", "_positions", "_start")

    def __init__(self, start: int, lines: list[bytes], end: int) -> None:
        self._start, self._lines, self._end = start, lines, end
        self._positions: list[int] | None = None

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, index: Any) -> Any:
        if index == -1 or index == len(self._lines) - 1:
            return {POSITION_FIELD: self._end}
        if self._positions is None:
            self._positions = list(accumulate([len(line) + 1 for line in self._lines], initial=self._start))[1:]
        if isinstance(index, slice):
            return [{POSITION_FIELD: p} for p in self._positions[index]]
        return {POSITION_FIELD: self._positions[index]}


class FileStreamSinkConnector(SinkConnector):
    """Appends record values to a file (or stdout), one line each."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.file.FileStreamSinkConnector"

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        SINK_CONFIG_DEF.parse(props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return SINK_CONFIG_DEF

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        return True  # the file keeps no offsets of its own


def render_value(value: Any) -> str:
    """The text a value gets in the sink file (Java's ``println(Object)`` where it is meaningful)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Struct):
        return str(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str, separators=(",", ":"))
    return str(value)


class FileStreamSinkTask(SinkTask):
    """Writes each record's value on its own line; ``flush`` flushes the file."""

    KAFKA_CLASS_NAME = "org.apache.kafka.connect.file.FileStreamSinkTask"  # see FileStreamSourceTask

    def __init__(self) -> None:
        self.filename: str | None = None
        self._out: IO[str] | None = None

    def start(self, props: dict[str, str]) -> None:
        self.filename = SINK_CONFIG_DEF.parse(props)[FILE_CONFIG] or None
        if self.filename is None:
            self._out = sys.stdout
        else:
            try:
                self._out = open(self.filename, "a", encoding="utf-8")  # noqa: SIM115 - open for the task's life
            except OSError as exc:
                raise ConnectException(f"Couldn't find or create file '{self.filename}' for FileStreamSinkTask") \
                    from exc

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records or self._out is None:
            return
        values = records.values if isinstance(records, SinkRecordBatch) else [r.value for r in records]
        try:
            text = "\n".join(values)  # all strings (StringConverter): no per-record call
        except TypeError:
            text = "\n".join([render_value(v) for v in values])
        self._out.write(text + "\n")
        # Written through per batch, as Kafka's sink (an unbuffered PrintStream) does per record:
        # the lines are in the file once put returns, not only at the next offset commit.
        self._out.flush()

    def flush(self, offsets: dict[TopicPartition, int]) -> None:
        if self._out is not None:
            self._out.flush()

    def stop(self) -> None:
        out, self._out = self._out, None
        if out is not None and self.filename is not None:
            out.close()
