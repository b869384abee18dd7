"""Turns sink records into rows and writes them in batches: the JDBC sink's engine.

Rows come from Struct values (columns from the schema) or schemaless dicts (columns from the
keys, types inferred). The primary key follows Confluent's ``pk.mode``: none, kafka
(``__connect_topic``/``__connect_partition``/``__connect_offset``), record_key (a primitive key
becomes one column, a Struct/dict key its fields) or record_value. Tables are created
(``auto.create``) and widened with nullable columns (``auto.evolve``) on demand; consecutive
records for the same table and column set share one ``executemany``. Each ``write`` call is
one database transaction, so a failed batch leaves nothing half-written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strom.connect.api.records import SinkRecord
from strom.connect.connectors.jdbc_dialect import ColumnSpec, Dialect
from strom.connect.data import Schema, Struct
from strom.connect.data.schema import Type
from strom.connect.exceptions import ConfigException, ConnectException, DataException

log = logging.getLogger(__name__)

PK_MODES = ("none", "kafka", "record_key", "record_value")
INSERT_MODES = ("insert", "upsert")
KAFKA_PK_DEFAULT = ("__connect_topic", "__connect_partition", "__connect_offset")
KAFKA_PK_SCHEMAS = (Schema.STRING_SCHEMA, Schema.INT32_SCHEMA, Schema.INT64_SCHEMA)


@dataclass
class WriterSettings:
    insert_mode: str = "insert"
    pk_mode: str = "none"
    pk_fields: list[str] = field(default_factory=list)
    auto_create: bool = False
    auto_evolve: bool = False
    table_name_format: str = "${topic}"
    batch_size: int = 3000
    delete_enabled: bool = False

    def check(self) -> None:
        if self.insert_mode not in INSERT_MODES:
            raise ConfigException("insert.mode", self.insert_mode, f"must be one of {', '.join(INSERT_MODES)}")
        if self.pk_mode not in PK_MODES:
            raise ConfigException("pk.mode", self.pk_mode, f"must be one of {', '.join(PK_MODES)}")
        if self.insert_mode == "upsert" and self.pk_mode == "none":
            raise ConfigException("insert.mode", self.insert_mode, "upsert needs a primary key: set pk.mode")
        if self.delete_enabled and self.pk_mode != "record_key":
            raise ConfigException("delete.enabled", "true", "deletes need pk.mode=record_key")
        if self.pk_mode == "kafka" and self.pk_fields and len(self.pk_fields) != 3:
            raise ConfigException("pk.fields", ",".join(self.pk_fields),
                                  "pk.mode=kafka takes exactly three names (topic, partition, offset)")
        if self.batch_size < 1:
            raise ConfigException("batch.size", self.batch_size, "must be at least 1")


@dataclass
class Row:
    table: str
    columns: tuple[str, ...]
    values: tuple[Any, ...]
    specs: tuple[ColumnSpec, ...]
    pk: tuple[str, ...]
    delete: bool = False


def _fields_of(schema: Schema | None, value: Any, what: str) -> list[tuple[str, Schema | None, Any]]:
    """(name, schema, value) of every field of a Struct or dict."""
    if isinstance(value, Struct):
        return [(f.name, f.schema, value.get(f.name)) for f in value.schema.fields or ()]
    if isinstance(value, Mapping):
        if schema is not None and schema.type is Type.STRUCT:
            return [(f.name, f.schema, value.get(f.name)) for f in schema.fields or ()]
        return [(str(k), None, v) for k, v in value.items()]
    raise DataException(f"The JDBC sink needs a Struct or map {what}, got {type(value).__name__}")


class JdbcWriter:
    """Writes batches of SinkRecords through one connection."""

    def __init__(self, dialect: Dialect, conn: Any, settings: WriterSettings) -> None:
        settings.check()
        self.dialect = dialect
        self.conn = conn
        self.settings = settings
        self._tables: dict[str, dict[str, bool]] = {}  # known columns per table

    # -- rows ----------------------------------------------------------------------------------

    def table_name(self, record: SinkRecord) -> str:
        return self.settings.table_name_format.replace("${topic}", record.topic)

    def _key_columns(self, record: SinkRecord) -> list[tuple[ColumnSpec, Any]]:
        s = self.settings
        if s.pk_mode == "kafka":
            names = s.pk_fields or list(KAFKA_PK_DEFAULT)
            vals = (record.topic, record.kafka_partition, record.kafka_offset)
            return [(ColumnSpec(n, sch, False), v) for n, sch, v in zip(names, KAFKA_PK_SCHEMAS, vals, strict=True)]
        if s.pk_mode == "record_key":
            key = record.key
            if key is None:
                raise DataException(f"pk.mode=record_key but the record at {record.topic}-{record.kafka_partition}"
                                    f"@{record.kafka_offset} has a null key")
            if isinstance(key, (Struct, Mapping)):
                fields = _fields_of(record.key_schema, key, "key")
                if s.pk_fields:
                    wanted = {n: (sch, v) for n, sch, v in fields}
                    missing = [n for n in s.pk_fields if n not in wanted]
                    if missing:
                        raise DataException(f"pk.fields {missing} are not fields of the record key")
                    fields = [(n, *wanted[n]) for n in s.pk_fields]
                return [(ColumnSpec(n, sch, False, v), v) for n, sch, v in fields]
            if len(s.pk_fields) > 1:
                raise ConfigException("pk.fields", ",".join(s.pk_fields), "a primitive key names one column")
            name = s.pk_fields[0] if s.pk_fields else "__connect_key"
            return [(ColumnSpec(name, record.key_schema, False, key), key)]
        return []

    def row(self, record: SinkRecord) -> Row | None:
        s = self.settings
        table = self.table_name(record)
        keyed = self._key_columns(record)
        if record.value is None:
            if not s.delete_enabled:
                raise DataException(f"Record at {record.topic}-{record.kafka_partition}@{record.kafka_offset} "
                                    "has a null value and delete.enabled is false")
            specs = tuple(spec for spec, _ in keyed)
            return Row(table, tuple(c.name for c in specs), tuple(self.dialect.adapt(v) for _, v in keyed),
                       specs, tuple(c.name for c in specs), delete=True)
        value_fields = _fields_of(record.value_schema, record.value, "value")
        columns: list[tuple[ColumnSpec, Any]] = [kv for kv in keyed]
        pk: list[str] = [c.name for c, _ in columns]
        if s.pk_mode == "record_value":
            names = {n for n, _, _ in value_fields}
            pk = list(s.pk_fields) if s.pk_fields else [n for n, _, _ in value_fields]
            missing = [n for n in pk if n not in names]
            if missing:
                raise DataException(f"pk.fields {missing} are not fields of the record value")
        taken = set(pk) if s.pk_mode != "record_value" else set()
        for name, schema, value in value_fields:
            if name in taken:
                continue
            nullable = schema.optional if schema is not None else True
            if s.pk_mode == "record_value" and name in pk:
                nullable = False
            columns.append((ColumnSpec(name, schema, nullable, value), value))
        specs = tuple(c for c, _ in columns)
        return Row(table, tuple(c.name for c in specs), tuple(self.dialect.adapt(v) for _, v in columns),
                   specs, tuple(pk))

    # -- tables --------------------------------------------------------------------------------

    def _ensure_table(self, row: Row) -> None:
        known = self._tables.get(row.table)
        if known is None:
            known = self.dialect.table_columns(self.conn, row.table)
            if known is None:
                if not self.settings.auto_create:
                    raise ConnectException(f"Table {row.table!r} is missing and auto.create is disabled")
                self._execute(self.dialect.create_table(row.table, row.specs, row.pk))
                log.info("JDBC sink created table %s with columns %s", row.table, list(row.columns))
                known = {c.name: c.nullable and c.name not in row.pk for c in row.specs}
            self._tables[row.table] = known
        missing = [c for c in row.specs if c.name not in known]
        if not missing:
            return
        if not self.settings.auto_evolve:
            raise ConnectException(f"Table {row.table!r} has no column(s) {[c.name for c in missing]} and "
                                   "auto.evolve is disabled")
        for col in missing:
            schema = col.schema
            if schema is not None and not schema.optional and schema.default is None:
                raise ConnectException(f"Cannot ALTER table {row.table!r} to add missing field {col.name!r}: "
                                       "it is not optional and has no default value")
            self._execute(self.dialect.add_column(row.table, ColumnSpec(col.name, schema, True, col.sample)))
            known[col.name] = True
            log.info("JDBC sink added column %s to table %s", col.name, row.table)

    def _execute(self, sql: str) -> None:
        cur = self.conn.cursor()
        try:
            cur.execute(sql)
        finally:
            cur.close()

    # -- writing -------------------------------------------------------------------------------

    def write(self, records: Iterable[SinkRecord]) -> int:
        """Write ``records`` in one transaction; return how many rows were written or deleted."""
        rows = [r for r in (self.row(rec) for rec in records) if r is not None]
        if not rows:
            return 0
        try:
            for row in rows:
                self._ensure_table(row)
            for group in self._groups(rows):
                self._flush_group(group)
            self.conn.commit()
        except BaseException:
            self._tables.clear()  # DDL may have been rolled back with the batch (PostgreSQL)
            try:
                self.conn.rollback()
            except Exception:
                log.debug("rollback failed", exc_info=True)
            raise
        return len(rows)

    def _groups(self, rows: Sequence[Row]) -> Iterable[list[Row]]:
        group: list[Row] = []
        for row in rows:
            if group and (row.table != group[0].table or row.columns != group[0].columns
                          or row.delete != group[0].delete or len(group) >= self.settings.batch_size):
                yield group
                group = []
            group.append(row)
        if group:
            yield group

    def _flush_group(self, group: list[Row]) -> None:
        first = group[0]
        if first.delete:
            sql = self.dialect.delete(first.table, first.pk)
        elif self.settings.insert_mode == "upsert":
            sql = self.dialect.upsert(first.table, first.columns, first.pk)
        else:
            sql = self.dialect.insert(first.table, first.columns)
        cur = self.conn.cursor()
        try:
            cur.executemany(sql, [r.values for r in group])
        finally:
            cur.close()
