"""JdbcSinkConnector/Task run directly: config checks, puts, and a lost PostgreSQL connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from strom.connect.api.records import SinkRecord
from strom.connect.connectors.jdbc_sink import JdbcSinkConnector, JdbcSinkTask
from strom.connect.data import Schema, SchemaBuilder, Struct
from strom.connect.exceptions import ConfigException, RetriableException

ROW = SchemaBuilder.struct().field("id", Schema.INT64_SCHEMA).field("v", Schema.OPTIONAL_STRING_SCHEMA).build()


def recs(ids: range, topic: str = "orders") -> list[SinkRecord]:
    return [SinkRecord(topic, 0, None, None, ROW, Struct(ROW).put("id", i).put("v", f"v{i}"), kafka_offset=i)
            for i in ids]


def test_connector_config_validation(tmp_path: Path) -> None:
    c = JdbcSinkConnector()
    base = {"connection.url": f"jdbc:sqlite:{tmp_path / 'x.db'}", "topics": "t"}
    c.start(base)
    assert len(c.task_configs(3)) == 3
    for bad, key in (({"connection.url": "jdbc:oracle:thin:@h:1521:x"}, "connection.url"),
                     ({"insert.mode": "merge"}, "insert.mode"),
                     ({"insert.mode": "upsert"}, "insert.mode"),
                     ({"pk.mode": "sometimes"}, "pk.mode"),
                     ({"delete.enabled": "true", "pk.mode": "record_value"}, "delete.enabled")):
        with pytest.raises(ConfigException, match=key.replace(".", r"\.")):
            JdbcSinkConnector().start({**base, **bad})
    errors = {v.name: v.errors for v in c.validate({"topics": "t"}).config_values}
    assert errors["connection.url"]


def test_sqlite_sink_task_upserts(tmp_path: Path) -> None:
    db = tmp_path / "sink.db"
    task = JdbcSinkTask()
    task.start({"connection.url": f"jdbc:sqlite:{db}", "insert.mode": "upsert", "pk.mode": "record_value",
                "pk.fields": "id", "auto.create": "true", "table.name.format": "t_${topic}"})
    task.put(recs(range(0, 5)))
    task.put(recs(range(3, 8)))
    task.flush({})
    task.stop()
    import sqlite3
    with sqlite3.connect(db) as conn:
        assert conn.execute('SELECT count(*), min(id), max(id) FROM "t_orders"').fetchone() == (8, 0, 7)


def test_postgres_connection_loss_is_retried(pg_database: str) -> None:
    task = JdbcSinkTask()
    task.start({"connection.url": pg_database, "pk.mode": "kafka", "insert.mode": "upsert", "auto.create": "true",
                "max.retries": "2", "retry.backoff.ms": "10"})
    task.put(recs(range(0, 3)))
    assert task._writer is not None  # connected lazily by the first put
    # Kill the task's backend from the server side, as a database restart would.
    pid = task._writer.conn.info.backend_pid
    dsn = pg_database.removeprefix("jdbc:").split("?")[0]
    with psycopg.connect(dsn, user="postgres", autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(RetriableException):
        task.put(recs(range(3, 6)))
    task.put(recs(range(3, 6)))  # the worker redelivers the batch: a new connection writes it
    task.stop()
    with psycopg.connect(dsn, user="postgres") as conn:
        got: Any = conn.execute('SELECT count(*), max("__connect_offset") FROM "orders"').fetchone()
    assert got == (6, 5)


def test_postgres_gives_up_after_max_retries(pg_database: str) -> None:
    url = pg_database.replace("/t_", "/missing_db_")  # connecting fails every time
    task = JdbcSinkTask()
    task.start({"connection.url": url, "max.retries": "1", "retry.backoff.ms": "0", "auto.create": "true"})
    with pytest.raises(RetriableException):
        task.put(recs(range(1)))
    with pytest.raises(psycopg.OperationalError, match="missing_db_"):
        task.put(recs(range(1)))  # retries used up: the real error fails the task
