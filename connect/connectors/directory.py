"""DirectorySourceConnector: CSV and JSON-lines files dropped into a directory become records.

Files in ``input.path`` whose names match ``input.file.pattern`` are read one at a time, oldest
name first. CSV rows become Structs of optional STRING fields named by the header row (or
``csv.column.names``); JSON lines become schemaless maps. ``key.field`` picks the record key.

Offsets: the source partition is ``{"path": <file path>, "size": bytes, "modified": ms}`` (size
and mtime keep a new file dropped under a finished file's name from inheriting its offset), the
offset ``{"line": n}`` (the physical line the record ended on), so a restarted task skips what
was already published. Files must be complete when they appear (write elsewhere and rename, or
set ``file.minimum.age.ms``): a file that grows while read is re-read from its start after a
restart. Once every record of a file is acknowledged by Kafka
(``commit_record``), the file is moved to ``finished.path`` (``cleanup.policy=MOVE``), deleted
(DELETE) or left in place (NONE, remembered by its offset). A file that cannot be parsed is
moved to ``error.path`` with an ``.error`` note next to it, unless ``halt.on.error`` is set, in
which case the task fails.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance, NonEmptyString, Range, ValidString
from strom.connect.api.connector import SourceConnector
from strom.connect.api.records import RecordMetadata, SourceRecord
from strom.connect.api.task import SourceTask, Task
from strom.connect.data import Schema, SchemaBuilder, Struct
from strom.connect.exceptions import ConfigException, ConnectException, DataException

log = logging.getLogger(__name__)

PATH_FIELD = "path"
SIZE_FIELD = "size"
MODIFIED_FIELD = "modified"
LINE_FIELD = "line"
FORMATS = ("auto", "csv", "json")
POLICIES = ("MOVE", "DELETE", "NONE")

CONFIG_DEF = (
    ConfigDef()
    .define("input.path", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="Directory to read files from")
    .define("input.file.pattern", ConfigType.STRING, r"^.*\.(csv|jsonl|ndjson|json)$", importance=Importance.HIGH,
            doc="Regular expression the file names must match")
    .define("topic", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            doc="Topic to write to")
    .define("format", ConfigType.STRING, "auto", validator=ValidString.in_(*FORMATS), importance=Importance.MEDIUM,
            doc="csv, json (one JSON object per line) or auto (by extension: .csv is CSV, others JSON lines)")
    .define("cleanup.policy", ConfigType.STRING, "MOVE", validator=ValidString.in_(*POLICIES),
            importance=Importance.MEDIUM, doc="What to do with a file once published: MOVE, DELETE or NONE")
    .define("finished.path", ConfigType.STRING, None, importance=Importance.HIGH,
            doc="Where published files are moved (cleanup.policy=MOVE)")
    .define("error.path", ConfigType.STRING, None, importance=Importance.HIGH,
            doc="Where files that cannot be parsed are moved")
    .define("halt.on.error", ConfigType.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="Fail the task on a bad file instead of moving it to error.path")
    .define("csv.first.row.as.header", ConfigType.BOOLEAN, True, importance=Importance.MEDIUM,
            doc="The first CSV row names the columns")
    .define("csv.column.names", ConfigType.LIST, "", importance=Importance.MEDIUM,
            doc="Column names when the CSV has no header row")
    .define("csv.separator.char", ConfigType.STRING, ",", importance=Importance.LOW, doc="CSV field separator")
    .define("key.field", ConfigType.STRING, None, importance=Importance.MEDIUM,
            doc="Field whose value becomes the record key")
    .define("batch.size", ConfigType.INT, 1000, validator=Range.at_least(1), importance=Importance.LOW,
            doc="Most records per poll")
    .define("poll.interval.ms", ConfigType.LONG, 1000, validator=Range.at_least(0), importance=Importance.LOW,
            doc="Wait when no file is ready")
    .define("file.minimum.age.ms", ConfigType.LONG, 0, validator=Range.at_least(0), importance=Importance.LOW,
            doc="Skip files modified more recently than this (still being written)")
)


def _check(cfg: dict[str, Any]) -> None:
    if not Path(cfg["input.path"]).is_dir():
        raise ConfigException("input.path", cfg["input.path"], "must be an existing directory")
    if cfg["cleanup.policy"] == "MOVE" and not cfg["finished.path"]:
        raise ConfigException("finished.path", None, "is required when cleanup.policy=MOVE")
    if not cfg["halt.on.error"] and not cfg["error.path"]:
        raise ConfigException("error.path", None, "is required unless halt.on.error=true")
    if len(cfg["csv.separator.char"]) != 1:
        raise ConfigException("csv.separator.char", cfg["csv.separator.char"], "must be a single character")
    try:
        re.compile(cfg["input.file.pattern"])
    except re.error as exc:
        raise ConfigException("input.file.pattern", cfg["input.file.pattern"], f"not a regular expression: {exc}") \
            from exc


class DirectorySourceConnector(SourceConnector):
    """One task reads the directory (files are processed in order, so one reader)."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        _check(CONFIG_DEF.parse(props))
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return DirectorySourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF


@dataclass
class _OpenFile:
    path: Path
    partition: dict[str, Any]
    rows: Iterator[tuple[int, Any, Schema | None]]  # (end line, value, value schema)
    handle: io.TextIOBase
    last_line: int = 0


class DirectorySourceTask(SourceTask):
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._current: _OpenFile | None = None
        # Records handed out but not yet acknowledged, per file; a file read to its end waits in
        # _eof until its count drops to zero (acks may arrive out of order across partitions).
        self._outstanding: dict[str, int] = {}
        self._eof: dict[str, Path] = {}
        self._lock = threading.Lock()  # guards the ack bookkeeping (commit_record runs on other threads)
        self._io_lock = threading.Lock()  # guards the open file against stop()
        self._done: set[str] = set()  # cleanup.policy=NONE: files already published

    def start(self, props: dict[str, str]) -> None:
        cfg = CONFIG_DEF.parse(props)
        _check(cfg)
        self.cfg = cfg
        self.input = Path(cfg["input.path"])
        self.pattern = re.compile(cfg["input.file.pattern"])
        self.topic: str = cfg["topic"]
        self.batch_size: int = cfg["batch.size"]
        self.key_field: str | None = cfg["key.field"]
        self._stop.clear()

    # -- files ---------------------------------------------------------------------------------

    def _candidates(self) -> list[Path]:
        min_age = self.cfg["file.minimum.age.ms"] / 1000.0
        now = time.time()
        out = []
        for entry in sorted(os.scandir(self.input), key=lambda e: e.name):
            if not entry.is_file() or not self.pattern.match(entry.name):
                continue
            key = str(Path(entry.path))
            if key in self._eof or key in self._done:
                continue
            if min_age and now - entry.stat().st_mtime < min_age:
                continue
            out.append(Path(entry.path))
        return out

    def _format(self, path: Path) -> str:
        fmt = self.cfg["format"]
        if fmt != "auto":
            return str(fmt)
        return "csv" if path.suffix.lower() == ".csv" else "json"

    def _open(self, path: Path) -> _OpenFile:
        st = path.stat()
        # Size and modification time tell a new file dropped under an old name from the old one,
        # whose offset must not make us skip the new file's lines.
        partition = {PATH_FIELD: str(path), SIZE_FIELD: st.st_size, MODIFIED_FIELD: st.st_mtime_ns // 1_000_000}
        stored = self.context.offset_storage_reader.offset(partition) if self.context else None
        skip_to = int(stored.get(LINE_FIELD, 0)) if stored else 0
        handle = open(path, encoding="utf-8", newline="")  # noqa: SIM115 - closed when the file is done
        rows = self._csv_rows(handle) if self._format(path) == "csv" else self._json_rows(handle)
        opened = _OpenFile(path, partition, rows, handle, last_line=skip_to)
        if skip_to:
            log.info("Resuming %s after line %d", path, skip_to)
        return opened

    def _csv_rows(self, handle: io.TextIOBase) -> Iterator[tuple[int, Any, Schema | None]]:
        # strict: a quote left open at the end of the file means a truncated file, not a value.
        reader = csv.reader(handle, delimiter=self.cfg["csv.separator.char"], strict=True)
        names = [n for n in (self.cfg["csv.column.names"] or []) if n]
        if self.cfg["csv.first.row.as.header"]:
            header = next(reader, None)
            if header is None:
                return
            names = names or [h.strip() for h in header]
        if not names:
            raise DataException("CSV file has no header and csv.column.names is empty")
        if len(set(names)) != len(names):
            raise DataException(f"CSV header has duplicate column names: {names}")
        builder = SchemaBuilder.struct().name("strom.connect.directory.CsvRow")
        for n in names:
            builder.field(n, Schema.OPTIONAL_STRING_SCHEMA)
        schema = builder.build()
        for row in reader:
            if not row:
                continue
            if len(row) != len(names):
                raise DataException(f"line {reader.line_num}: {len(row)} fields, header has {len(names)}")
            struct = Struct(schema)
            for n, v in zip(names, row, strict=True):
                struct.put(n, v)
            yield reader.line_num, struct, schema

    def _json_rows(self, handle: io.TextIOBase) -> Iterator[tuple[int, Any, Schema | None]]:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise DataException(f"line {number}: not JSON: {exc}") from exc
            if not isinstance(value, dict):
                raise DataException(f"line {number}: expected a JSON object, got {type(value).__name__}")
            yield number, value, None

    def _finish(self, path: Path) -> None:
        """Every record of ``path`` is in Kafka: apply the cleanup policy."""
        policy = self.cfg["cleanup.policy"]
        try:
            if policy == "MOVE":
                target = Path(self.cfg["finished.path"])
                target.mkdir(parents=True, exist_ok=True)
                shutil.move(str(path), str(_unique(target / path.name)))
            elif policy == "DELETE":
                path.unlink(missing_ok=True)
            else:
                self._done.add(str(path))
        except OSError as exc:
            raise ConnectException(f"Could not clean up finished file {path}: {exc}") from exc
        log.info("Finished %s (%s)", path, policy)

    def _fail_file(self, opened: _OpenFile, exc: Exception) -> None:
        opened.handle.close()
        if self.cfg["halt.on.error"]:
            raise ConnectException(f"Bad input file {opened.path}: {exc}") from exc
        target = Path(self.cfg["error.path"])
        target.mkdir(parents=True, exist_ok=True)
        dest = _unique(target / opened.path.name)
        shutil.move(str(opened.path), str(dest))
        dest.with_name(dest.name + ".error").write_text(f"{exc}\n", encoding="utf-8")
        log.error("Moved bad file %s to %s: %s", opened.path, dest, exc)

    # -- polling -------------------------------------------------------------------------------

    def poll(self) -> list[SourceRecord] | None:
        # stop() may run on another thread: reading and closing share a lock, waits happen outside it.
        with self._io_lock:
            if self._stop.is_set():
                return None
            records = self._poll_locked()
        if records is None:
            self._stop.wait(self.cfg["poll.interval.ms"] / 1000.0)
        return records

    def _poll_locked(self) -> list[SourceRecord] | None:
        if self._current is None:
            for path in self._candidates():
                try:
                    self._current = self._open(path)
                    break
                except OSError as exc:  # vanished or unreadable: try the next one
                    log.warning("Cannot open %s: %s", path, exc)
            if self._current is None:
                return None
        opened = self._current
        out: list[SourceRecord] = []
        key_field, topic = self.key_field, self.topic
        try:
            for line, value, schema in opened.rows:
                if line <= opened.last_line:
                    continue  # published before a restart
                key = _field(value, key_field) if key_field else None
                key_schema = Schema.OPTIONAL_STRING_SCHEMA if key_field and schema is not None else None
                out.append(SourceRecord(opened.partition, {LINE_FIELD: line}, topic, None, key_schema, key,
                                        schema, value, int(time.time() * 1000)))
                opened.last_line = line
                if len(out) >= self.batch_size:
                    break
            else:
                self._end_of_file(opened, out)
                return out or None
        except (DataException, csv.Error, UnicodeDecodeError) as exc:
            # Records of this poll before the bad line were never handed out; drop them too so the
            # file is all-or-error from this point (what was published earlier stays published).
            self._current = None
            self._fail_file(opened, exc)
            return None
        if out:
            with self._lock:
                key = str(opened.path)
                self._outstanding[key] = self._outstanding.get(key, 0) + len(out)
        return out or None

    def _end_of_file(self, opened: _OpenFile, out: list[SourceRecord]) -> None:
        opened.handle.close()
        self._current = None
        key = str(opened.path)
        with self._lock:
            # This poll's records are handed out when poll returns; count them now.
            pending = self._outstanding.get(key, 0) + len(out)
            if pending:
                self._outstanding[key] = pending
                self._eof[key] = opened.path
                return
            self._outstanding.pop(key, None)
        # Nothing of this file is in flight: every record is already in Kafka.
        self._finish(opened.path)

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        partition = record.source_partition
        if partition is None:
            return
        key = partition.get(PATH_FIELD)
        if not isinstance(key, str):
            return  # not a partition of this task's files
        with self._lock:
            left = self._outstanding.get(key, 0) - 1
            if left > 0:
                self._outstanding[key] = left
                return
            self._outstanding.pop(key, None)
            path = self._eof.pop(key, None)
        if path is not None:
            self._finish(path)

    def stop(self) -> None:
        self._stop.set()
        with self._io_lock:
            current, self._current = self._current, None
            if current is not None:
                current.handle.close()


def _field(value: Any, name: str) -> Any:
    got = value.get(name) if isinstance(value, (Struct, dict)) else None
    if got is None:
        return None
    return got if isinstance(got, str) else json.dumps(got) if isinstance(got, (dict, list)) else str(got)


def _unique(path: Path) -> Path:
    """``path``, or ``path.1``, ``path.2``... if a file of that name is already there."""
    candidate, n = path, 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate
