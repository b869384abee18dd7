"""JdbcSinkConnector: writes records into SQLite or PostgreSQL tables (Confluent JDBC sink's keys).

Keys: ``connection.url`` (``jdbc:sqlite:<path>`` or ``jdbc:postgresql://host:port/db``),
``connection.user``/``connection.password``, ``insert.mode`` (insert|upsert), ``pk.mode``
(none|kafka|record_key|record_value), ``pk.fields``, ``auto.create``, ``auto.evolve``,
``table.name.format`` (``${topic}`` is replaced), ``batch.size``, ``delete.enabled``,
``max.retries``/``retry.backoff.ms`` (a lost connection is reopened and the batch retried; after
that the task asks the worker to redeliver through ``RetriableException``).

Each ``put`` is one transaction; the worker commits consumer offsets only after ``flush``, which
here has nothing left to do, so a record is acknowledged only once its row is committed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from strom.connect.api.config import ConfigDef, ConfigType, Importance, NonEmptyString, Range, ValidString
from strom.connect.api.connector import SinkConnector
from strom.connect.api.records import SinkRecord, TopicPartition
from strom.connect.api.task import SinkTask, Task
from strom.connect.connectors.jdbc_dialect import dialect_for, is_connection_error
from strom.connect.connectors.jdbc_writer import INSERT_MODES, PK_MODES, JdbcWriter, WriterSettings
from strom.connect.exceptions import ConfigException, RetriableException

log = logging.getLogger(__name__)


def _url_validator(name: str, value: Any) -> None:
    if value is not None:
        dialect_for(str(value))  # raises ConfigException naming connection.url


CONFIG_DEF = (
    ConfigDef()
    .define("connection.url", ConfigType.STRING, validator=_url_validator, importance=Importance.HIGH,
            doc="JDBC-style URL: jdbc:sqlite:<path> or jdbc:postgresql://host:port/db", group="Connection")
    .define("connection.user", ConfigType.STRING, None, importance=Importance.HIGH, doc="Database user",
            group="Connection")
    .define("connection.password", ConfigType.PASSWORD, None, importance=Importance.HIGH,
            doc="Database password", group="Connection")
    .define("insert.mode", ConfigType.STRING, "insert", validator=ValidString.in_(*INSERT_MODES),
            importance=Importance.HIGH, doc="insert: plain INSERT; upsert: INSERT .. ON CONFLICT DO UPDATE",
            group="Writes")
    .define("batch.size", ConfigType.INT, 3000, validator=Range.at_least(1), importance=Importance.MEDIUM,
            doc="Rows per statement batch", group="Writes")
    .define("delete.enabled", ConfigType.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="Delete the row of a null-valued record (tombstone); needs pk.mode=record_key", group="Writes")
    .define("table.name.format", ConfigType.STRING, "${topic}", validator=NonEmptyString(),
            importance=Importance.MEDIUM, doc="Table name; ${topic} is replaced by the record's topic",
            group="Data Mapping")
    .define("pk.mode", ConfigType.STRING, "none", validator=ValidString.in_(*PK_MODES), importance=Importance.HIGH,
            doc="Where the primary key comes from", group="Data Mapping")
    .define("pk.fields", ConfigType.LIST, "", importance=Importance.MEDIUM,
            doc="Primary key column(s); meaning depends on pk.mode", group="Data Mapping")
    .define("auto.create", ConfigType.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="CREATE TABLE when the destination table is missing", group="DDL Support")
    .define("auto.evolve", ConfigType.BOOLEAN, False, importance=Importance.MEDIUM,
            doc="ALTER TABLE ADD COLUMN for fields the table lacks", group="DDL Support")
    .define("max.retries", ConfigType.INT, 10, validator=Range.at_least(0), importance=Importance.MEDIUM,
            doc="Retries of a batch after a connection error", group="Retries")
    .define("retry.backoff.ms", ConfigType.INT, 3000, validator=Range.at_least(0), importance=Importance.MEDIUM,
            doc="Wait before a retry", group="Retries")
)


def writer_settings(parsed: Mapping[str, Any]) -> WriterSettings:
    settings = WriterSettings(
        insert_mode=parsed["insert.mode"], pk_mode=parsed["pk.mode"],
        pk_fields=[f for f in (parsed["pk.fields"] or []) if f], auto_create=parsed["auto.create"],
        auto_evolve=parsed["auto.evolve"], table_name_format=parsed["table.name.format"],
        batch_size=parsed["batch.size"], delete_enabled=parsed["delete.enabled"])
    settings.check()
    return settings


def _password(value: Any) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


class JdbcSinkConnector(SinkConnector):
    """Rows into SQLite/PostgreSQL; tasks share the configuration."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def start(self, props: dict[str, str]) -> None:
        writer_settings(CONFIG_DEF.parse(props))
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return CONFIG_DEF

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        return True  # offsets live in the consumer group only


class JdbcSinkTask(SinkTask):
    """Writes each ``put`` batch in one transaction; reconnects after connection errors."""

    def __init__(self) -> None:
        self._parsed: dict[str, Any] = {}
        self._writer: JdbcWriter | None = None
        self._retries_left = 0
        self._stopping = threading.Event()

    def start(self, props: dict[str, str]) -> None:
        self._parsed = CONFIG_DEF.parse(props)
        self._settings = writer_settings(self._parsed)
        self._retries_left = self._parsed["max.retries"]
        self._stopping.clear()
        # Connect lazily (first put), as Confluent's sink does: a database that is down at start
        # is then a retriable put failure, not a failed task.

    def _open(self) -> JdbcWriter:
        url = self._parsed["connection.url"]
        dialect = dialect_for(url)
        conn = dialect.connect(url, self._parsed["connection.user"], _password(self._parsed["connection.password"]))
        self._writer = JdbcWriter(dialect, conn, self._settings)
        return self._writer

    def _close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.conn.close()
            except Exception:
                log.debug("closing the JDBC connection failed", exc_info=True)

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        try:
            writer = self._writer or self._open()
            writer.write(records)
            self._retries_left = self._parsed["max.retries"]
        except Exception as exc:
            if not is_connection_error(exc):
                raise
            self._close()
            if self._retries_left <= 0:
                raise
            self._retries_left -= 1
            log.warning("JDBC write failed (%s); %d retries left", exc, self._retries_left)
            if self.context is not None:
                self.context.timeout(self._parsed["retry.backoff.ms"])
            raise RetriableException(f"JDBC write failed, will retry: {exc}") from exc

    def flush(self, offsets: dict[TopicPartition, int]) -> None:
        pass  # every put committed its own transaction

    def stop(self) -> None:
        self._stopping.set()
        self._close()


__all__ = ["CONFIG_DEF", "ConfigException", "JdbcSinkConnector", "JdbcSinkTask", "writer_settings"]
