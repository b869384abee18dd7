"""The JDBC sink's writer against real databases: SQLite files and a real PostgreSQL server."""

from __future__ import annotations

import datetime as dt
import decimal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strom.connect.api.records import SinkRecord
from strom.connect.connectors.jdbc_dialect import dialect_for, postgres_conninfo, sqlite_path
from strom.connect.connectors.jdbc_writer import JdbcWriter, WriterSettings
from strom.connect.data import Decimal, Schema, SchemaBuilder, Struct, Timestamp
from strom.connect.exceptions import ConfigException, ConnectException, DataException

USER_V1 = (SchemaBuilder.struct().name("user").field("id", Schema.INT32_SCHEMA)
           .field("name", Schema.STRING_SCHEMA).field("score", Schema.OPTIONAL_FLOAT64_SCHEMA).build())
USER_V2 = (SchemaBuilder.struct().name("user").field("id", Schema.INT32_SCHEMA)
           .field("name", Schema.STRING_SCHEMA).field("score", Schema.OPTIONAL_FLOAT64_SCHEMA)
           .field("email", Schema.OPTIONAL_STRING_SCHEMA).build())


def user(uid: int, name: str, score: float | None = None, email: str | None = None, *,
         schema: Schema = USER_V1) -> Struct:
    s = Struct(schema).put("id", uid).put("name", name).put("score", score)
    if schema is USER_V2:
        s.put("email", email)
    return s


def rec(value: Any, *, offset: int = 0, key: Any = None, key_schema: Schema | None = None,
        topic: str = "users", value_schema: Schema | None = None) -> SinkRecord:
    if value_schema is None and isinstance(value, Struct):
        value_schema = value.schema
    return SinkRecord(topic, 0, key_schema, key, value_schema, value, kafka_offset=offset)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(JDBC URL, open connection) for each dialect."""
    if request.param == "sqlite":
        url = f"jdbc:sqlite:{tmp_path / 'sink.db'}"
    else:
        url = request.getfixturevalue("pg_database")
    conn = dialect_for(url).connect(url, None, None)
    try:
        yield url, conn
    finally:
        conn.close()


def rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(sql)
    out = [tuple(r) for r in cur.fetchall()]
    cur.close()
    conn.commit()
    return out


def test_insert_auto_create_and_evolve(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(auto_create=True, auto_evolve=True))
    assert w.write([rec(user(1, "ann", 1.5), offset=0), rec(user(2, "bob"), offset=1)]) == 2
    assert rows(conn, 'SELECT id, name, score FROM "users" ORDER BY id') == [(1, "ann", 1.5), (2, "bob", None)]
    w.write([rec(user(3, "cy", 2.0, "cy@x", schema=USER_V2), offset=2)])
    assert rows(conn, 'SELECT id, email FROM "users" ORDER BY id') == [(1, None), (2, None), (3, "cy@x")]


def test_missing_table_without_auto_create_fails(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings())
    with pytest.raises(ConnectException, match=r"auto\.create"):
        w.write([rec(user(1, "a"))])


def test_missing_column_without_evolve_fails_and_rolls_back(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(auto_create=True))
    w.write([rec(user(1, "a"))])
    with pytest.raises(ConnectException, match=r"auto\.evolve"):
        w.write([rec(user(2, "b")), rec(user(3, "c", email="e", schema=USER_V2))])
    # The whole batch is one transaction: user 2 was not written either.
    assert rows(conn, 'SELECT id FROM "users"') == [(1,)]


def test_required_field_cannot_be_added(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(auto_create=True, auto_evolve=True))
    w.write([rec(user(1, "a"))])
    v3 = SchemaBuilder.struct().field("id", Schema.INT32_SCHEMA).field("name", Schema.STRING_SCHEMA) \
        .field("age", Schema.INT32_SCHEMA).build()
    with pytest.raises(ConnectException, match="not optional"):
        w.write([rec(Struct(v3).put("id", 2).put("name", "b").put("age", 3))])


def test_upsert_record_value_pk(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(insert_mode="upsert", pk_mode="record_value",
                                                          pk_fields=["id"], auto_create=True))
    w.write([rec(user(1, "a", 1.0)), rec(user(2, "b"))])
    w.write([rec(user(1, "a2", 9.0)), rec(user(3, "c"))])
    assert rows(conn, 'SELECT id, name, score FROM "users" ORDER BY id') == [
        (1, "a2", 9.0), (2, "b", None), (3, "c", None)]


def test_plain_insert_duplicate_pk_fails(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(pk_mode="record_value", pk_fields=["id"],
                                                          auto_create=True))
    w.write([rec(user(1, "a"))])
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        w.write([rec(user(1, "again"))])
    assert rows(conn, 'SELECT name FROM "users"') == [("a",)]


def test_kafka_pk_and_schemaless_values(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(insert_mode="upsert", pk_mode="kafka", auto_create=True,
                                                          table_name_format="kafka_${topic}"))
    w.write([rec({"n": 1, "s": "x", "ok": True}, offset=5, topic="ev"),
             rec({"n": 2, "s": "y", "ok": False}, offset=6, topic="ev")])
    w.write([rec({"n": 3, "s": "z", "ok": True}, offset=5, topic="ev")])  # redelivery of offset 5
    got = rows(conn, 'SELECT "__connect_topic", "__connect_partition", "__connect_offset", n, s '
                     'FROM "kafka_ev" ORDER BY "__connect_offset"')
    assert got == [("ev", 0, 5, 3, "z"), ("ev", 0, 6, 2, "y")]


def test_record_key_pk_and_deletes(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(insert_mode="upsert", pk_mode="record_key",
                                                          pk_fields=["uid"], auto_create=True, delete_enabled=True))
    ks = Schema.INT64_SCHEMA
    w.write([rec({"name": "a"}, key=1, key_schema=ks), rec({"name": "b"}, key=2, key_schema=ks)])
    w.write([rec(None, key=1, key_schema=ks), rec({"name": "b2"}, key=2, key_schema=ks)])
    assert rows(conn, 'SELECT uid, name FROM "users" ORDER BY uid') == [(2, "b2")]


def test_logical_types(db: tuple[str, Any]) -> None:
    url, conn = db
    schema = (SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("amount", Decimal.schema(2))
              .field("at", Timestamp.SCHEMA).build())
    at = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(auto_create=True))
    w.write([rec(Struct(schema).put("id", 1).put("amount", decimal.Decimal("12.34")).put("at", at))])
    (amount, stored_at), = rows(conn, 'SELECT amount, "at" FROM "users"')
    assert decimal.Decimal(str(amount)) == decimal.Decimal("12.34")
    assert str(stored_at).startswith("2024-05-06 07:08:09")


def test_null_value_without_delete_is_an_error(db: tuple[str, Any]) -> None:
    url, conn = db
    w = JdbcWriter(dialect_for(url), conn, WriterSettings(auto_create=True))
    with pytest.raises(DataException, match=r"delete\.enabled"):
        w.write([rec(None)])


def test_settings_and_urls_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigException, match=r"pk\.mode"):
        WriterSettings(insert_mode="upsert").check()
    with pytest.raises(ConfigException, match=r"insert\.mode"):
        WriterSettings(insert_mode="merge").check()
    with pytest.raises(ConfigException, match=r"connection\.url"):
        dialect_for("jdbc:mysql://h/db")
    assert sqlite_path("jdbc:sqlite:/a/b.db") == "/a/b.db"
    assert sqlite_path("sqlite:///a/b.db") == "/a/b.db"
    assert postgres_conninfo("jdbc:postgresql://h:5/db?user=u&ssl=true") == ("postgresql://h:5/db", {"user": "u"})


def test_sqlite_database_is_a_real_file(tmp_path: Path) -> None:
    url = f"jdbc:sqlite:{tmp_path / 'f.db'}"
    conn = dialect_for(url).connect(url, None, None)
    JdbcWriter(dialect_for(url), conn, WriterSettings(auto_create=True)).write([rec(user(7, "z"))])
    conn.close()
    with sqlite3.connect(tmp_path / "f.db") as other:
        assert other.execute('SELECT id, name FROM "users"').fetchall() == [(7, "z")]
