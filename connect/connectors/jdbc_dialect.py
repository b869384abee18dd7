"""SQL dialects of the JDBC-style sink: SQLite (stdlib ``sqlite3``) and PostgreSQL (psycopg 3).

A dialect knows how to open a connection from a JDBC-like ``connection.url``, map Connect
schemas to column types, describe an existing table, and spell CREATE / ALTER / INSERT /
upsert / DELETE statements. Identifiers are always double-quoted, so topic names with dots or
dashes become table names as they are (no schema split).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from strom.connect.data import Schema, Struct
from strom.connect.data.schema import (
    DATE_LOGICAL_NAME,
    DECIMAL_LOGICAL_NAME,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
    Type,
)
from strom.connect.exceptions import ConfigException, ConnectException


@dataclass(frozen=True)
class ColumnSpec:
    """A column the sink wants: name, Connect schema (None = inferred from ``sample``), nullability."""

    name: str
    schema: Schema | None
    nullable: bool
    sample: Any = None


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _naive_utc(value: _dt.datetime) -> _dt.datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(_dt.UTC).replace(tzinfo=None)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Struct):
        return {f.name: _jsonable(value.get(f.name)) for f in value.schema.fields or ()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (decimal.Decimal, _dt.date, _dt.time, _dt.datetime)):
        return str(value)
    return value


class Dialect(ABC):
    """Common SQL; subclasses differ in types, placeholders and catalog queries."""

    name = "generic"
    placeholder = "?"
    types: dict[Type, str] = {}
    logical_types: dict[str, str] = {}
    nested_type = "TEXT"

    @abstractmethod
    def connect(self, url: str, user: str | None, password: str | None) -> Any:
        raise NotImplementedError

    # -- types ---------------------------------------------------------------------------------

    def column_type(self, spec: ColumnSpec) -> str:
        schema = spec.schema
        if schema is None:
            return self.inferred_type(spec.sample)
        if schema.name in self.logical_types:
            if schema.name == DECIMAL_LOGICAL_NAME:
                return "NUMERIC"
            return self.logical_types[schema.name]
        if schema.type in (Type.STRUCT, Type.ARRAY, Type.MAP):
            return self.nested_type
        return self.types[schema.type]

    def inferred_type(self, value: Any) -> str:
        """The column type of a schemaless value (bool before int: bool is an int in Python)."""
        if isinstance(value, bool):
            return self.types[Type.BOOLEAN]
        if isinstance(value, int):
            return self.types[Type.INT64]
        if isinstance(value, float):
            return self.types[Type.FLOAT64]
        if isinstance(value, bytes):
            return self.types[Type.BYTES]
        if isinstance(value, decimal.Decimal):
            return "NUMERIC"
        if isinstance(value, _dt.datetime):
            return self.logical_types[TIMESTAMP_LOGICAL_NAME]
        if isinstance(value, _dt.date):
            return self.logical_types[DATE_LOGICAL_NAME]
        if isinstance(value, (dict, list, Struct)):
            return self.nested_type
        return self.types[Type.STRING]

    def adapt(self, value: Any) -> Any:
        """A Connect value as the driver should bind it."""
        if isinstance(value, (Struct, dict, list)):
            return json.dumps(_jsonable(value))
        if isinstance(value, _dt.datetime):
            return _naive_utc(value)
        return value

    # -- catalog -------------------------------------------------------------------------------

    @abstractmethod
    def table_columns(self, conn: Any, table: str) -> dict[str, bool] | None:
        """Existing columns as ``{name: nullable}``; None when the table does not exist."""
        raise NotImplementedError

    # -- statements ----------------------------------------------------------------------------

    def create_table(self, table: str, columns: Sequence[ColumnSpec], pk: Sequence[str]) -> str:
        defs = []
        for col in columns:
            null = "" if col.nullable and col.name not in pk else " NOT NULL"
            defs.append(f"{quote(col.name)} {self.column_type(col)}{null}")
        if pk:
            defs.append(f"PRIMARY KEY({', '.join(quote(p) for p in pk)})")
        return f"CREATE TABLE {quote(table)} (\n  " + ",\n  ".join(defs) + ")"

    def add_column(self, table: str, column: ColumnSpec) -> str:
        return f"ALTER TABLE {quote(table)} ADD COLUMN {quote(column.name)} {self.column_type(column)}"

    def insert(self, table: str, columns: Sequence[str]) -> str:
        cols = ", ".join(quote(c) for c in columns)
        marks = ", ".join(self.placeholder for _ in columns)
        return f"INSERT INTO {quote(table)} ({cols}) VALUES ({marks})"

    def upsert(self, table: str, columns: Sequence[str], pk: Sequence[str]) -> str:
        non_key = [c for c in columns if c not in pk]
        action = ("DO UPDATE SET " + ", ".join(f"{quote(c)}=EXCLUDED.{quote(c)}" for c in non_key)
                  if non_key else "DO NOTHING")
        return f"{self.insert(table, columns)} ON CONFLICT ({', '.join(quote(p) for p in pk)}) {action}"

    def delete(self, table: str, pk: Sequence[str]) -> str:
        cond = " AND ".join(f"{quote(p)} = {self.placeholder}" for p in pk)
        return f"DELETE FROM {quote(table)} WHERE {cond}"


class SqliteDialect(Dialect):
    name = "sqlite"
    placeholder = "?"
    types = {Type.INT8: "INTEGER", Type.INT16: "INTEGER", Type.INT32: "INTEGER", Type.INT64: "INTEGER",
             Type.FLOAT32: "REAL", Type.FLOAT64: "REAL", Type.BOOLEAN: "INTEGER", Type.STRING: "TEXT",
             Type.BYTES: "BLOB"}
    logical_types = {DECIMAL_LOGICAL_NAME: "NUMERIC", DATE_LOGICAL_NAME: "TEXT", TIME_LOGICAL_NAME: "TEXT",
                     TIMESTAMP_LOGICAL_NAME: "TEXT"}

    def connect(self, url: str, user: str | None, password: str | None) -> Any:
        path = sqlite_path(url)
        conn = sqlite3.connect(path, timeout=30, check_same_thread=False)
        return conn

    def adapt(self, value: Any) -> Any:
        # sqlite3's implicit date adapters are deprecated: bind ISO text, as SQLite stores it.
        if isinstance(value, _dt.datetime):
            return _naive_utc(value).isoformat(sep=" ")
        if isinstance(value, (_dt.date, _dt.time)):
            return value.isoformat()
        if isinstance(value, decimal.Decimal):
            return str(value)
        return super().adapt(value)

    def table_columns(self, conn: Any, table: str) -> dict[str, bool] | None:
        rows = conn.execute(f"PRAGMA table_info({quote(table)})").fetchall()
        if not rows:
            return None
        return {row[1]: not row[3] for row in rows}


class PostgresDialect(Dialect):
    name = "postgresql"
    placeholder = "%s"
    types = {Type.INT8: "SMALLINT", Type.INT16: "SMALLINT", Type.INT32: "INTEGER", Type.INT64: "BIGINT",
             Type.FLOAT32: "REAL", Type.FLOAT64: "DOUBLE PRECISION", Type.BOOLEAN: "BOOLEAN",
             Type.STRING: "TEXT", Type.BYTES: "BYTEA"}
    logical_types = {DECIMAL_LOGICAL_NAME: "NUMERIC", DATE_LOGICAL_NAME: "DATE", TIME_LOGICAL_NAME: "TIME",
                     TIMESTAMP_LOGICAL_NAME: "TIMESTAMP"}
    nested_type = "TEXT"

    def connect(self, url: str, user: str | None, password: str | None) -> Any:
        import psycopg  # optional dependency: only PostgreSQL sinks need it

        conninfo, params = postgres_conninfo(url)
        if user:
            params["user"] = user
        if password:
            params["password"] = password
        # Extra libpq parameters join the conninfo (psycopg.connect's keywords are typed narrowly).
        return psycopg.connect(psycopg.conninfo.make_conninfo(conninfo, **params))

    def table_columns(self, conn: Any, table: str) -> dict[str, bool] | None:
        with conn.cursor() as cur:
            cur.execute("SELECT column_name, is_nullable FROM information_schema.columns "
                        "WHERE table_schema = current_schema() AND table_name = %s", (table,))
            rows = cur.fetchall()
        if not rows:
            return None
        return {row[0]: row[1] == "YES" for row in rows}


def sqlite_path(url: str) -> str:
    """``jdbc:sqlite:/p``, ``jdbc:sqlite::memory:``, ``sqlite:///p`` or ``sqlite:p`` -> path."""
    rest = url[len("jdbc:"):] if url.startswith("jdbc:") else url
    if not rest.startswith("sqlite:"):
        raise ConfigException("connection.url", url, "not an SQLite URL")
    path = rest[len("sqlite:"):]
    if path.startswith("//"):
        path = path[2:]  # sqlite:///abs/path -> /abs/path
    if not path:
        raise ConfigException("connection.url", url, "the SQLite URL names no database file")
    return path


# libpq parameters a JDBC URL may carry in its query string; other JDBC-only ones are dropped.
_LIBPQ_PARAMS = {"user", "password", "sslmode", "connect_timeout", "application_name", "options",
                 "sslrootcert", "sslcert", "sslkey", "target_session_attrs"}


def postgres_conninfo(url: str) -> tuple[str, dict[str, str]]:
    """``jdbc:postgresql://h:p/db?user=u`` (or ``postgresql://...``) -> (libpq URL, extra params)."""
    rest = url[len("jdbc:"):] if url.startswith("jdbc:") else url
    parts = urlsplit(rest)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ConfigException("connection.url", url, "not a PostgreSQL URL")
    params = {k: v for k, v in parse_qsl(parts.query) if k in _LIBPQ_PARAMS}
    return f"postgresql://{parts.netloc}{parts.path}", params


def dialect_for(url: str) -> Dialect:
    """The dialect of a ``connection.url``."""
    rest = url[len("jdbc:"):] if url.startswith("jdbc:") else url
    if rest.startswith("sqlite:"):
        return SqliteDialect()
    if rest.startswith(("postgresql:", "postgres:")):
        return PostgresDialect()
    raise ConfigException("connection.url", url,
                          "expected jdbc:sqlite:<path> or jdbc:postgresql://host:port/db")


def is_connection_error(exc: BaseException) -> bool:
    """Errors worth reconnecting for (the database went away), as opposed to bad data."""
    if isinstance(exc, sqlite3.OperationalError):
        return "locked" in str(exc) or "busy" in str(exc)
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, psycopg.OperationalError)


__all__ = ["ColumnSpec", "ConnectException", "Dialect", "PostgresDialect", "SqliteDialect", "dialect_for",
           "is_connection_error", "postgres_conninfo", "quote", "sqlite_path"]
