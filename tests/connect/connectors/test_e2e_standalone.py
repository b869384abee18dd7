"""Bundled connectors end to end through the StandaloneHerder on the bundled broker.

FileStreamSource -> topic -> FileStreamSink, and datagen -> topic (JSON with schemas) -> JDBC sink
into SQLite and into a real PostgreSQL server; the directory source -> topic -> JDBC sink.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from strom.connect.connectors.datagen import generate
from strom.connect.plugins import PluginRegistry
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.standalone import StandaloneHerder
from strom.core.testing import BrokerProcess, wait_for

JSON = "org.apache.kafka.connect.json.JsonConverter"


wait_for = functools.partial(wait_for, timeout=90.0, interval=0.25, ignore=(sqlite3.OperationalError, psycopg.errors.UndefinedTable))


@pytest.fixture
def herder(broker: BrokerProcess, tmp_path: Path) -> Iterator[StandaloneHerder]:
    config = WorkerConfig.from_mapping({
        "bootstrap.servers": broker.bootstrap, "offset.storage.file.filename": str(tmp_path / "offsets.dat"),
        "offset.flush.interval.ms": "200", "key.converter": JSON, "value.converter": JSON,
        "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true",
    })
    h = StandaloneHerder(config, PluginRegistry())
    h.start()
    try:
        yield h
    finally:
        h.stop()


def test_file_source_to_file_sink(herder: StandaloneHerder, tmp_path: Path, topic_name: str) -> None:
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"record {i} é" for i in range(1000)]
    src.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    herder.put_connector_config("fs-src", {"name": "fs-src", "connector.class": "FileStreamSource",
                                           "file": str(src), "topic": topic_name, "batch.size": "100"}, False)
    herder.put_connector_config("fs-sink", {"name": "fs-sink", "connector.class": "FileStreamSink",
                                            "file": str(dst), "topics": topic_name}, False)
    wait_for(lambda: dst.exists() and len(dst.read_text(encoding="utf-8").splitlines()) >= len(lines),
             what="all lines in the sink file")
    with src.open("a", encoding="utf-8") as f:  # appended lines keep flowing
        f.write("tail line\n")
    wait_for(lambda: dst.read_text(encoding="utf-8").splitlines() == [*lines, "tail line"], what="tail line")


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_datagen_to_jdbc_sink(db: str, herder: StandaloneHerder, tmp_path: Path, topic_name: str,
                              request: pytest.FixtureRequest) -> None:
    if db == "sqlite":
        url = f"jdbc:sqlite:{tmp_path / 'dg.db'}"

        def count() -> Any:
            with sqlite3.connect(tmp_path / "dg.db") as conn:
                return conn.execute(f'SELECT count(*), sum(orderid) FROM "{topic_name}"').fetchone()

        def rows() -> list[tuple[Any, ...]]:
            with sqlite3.connect(tmp_path / "dg.db") as conn:
                return conn.execute(f'SELECT orderid, itemid, orderunits FROM "{topic_name}" ORDER BY orderid').fetchall()
    else:
        url = request.getfixturevalue("pg_database")
        dsn = url.removeprefix("jdbc:").split("?")[0]

        def count() -> Any:
            with psycopg.connect(dsn, user="postgres") as conn:
                return conn.execute(f'SELECT count(*), sum(orderid) FROM "{topic_name}"').fetchone()

        def rows() -> list[tuple[Any, ...]]:
            with psycopg.connect(dsn, user="postgres") as conn:
                return conn.execute(f'SELECT orderid, itemid, orderunits FROM "{topic_name}" ORDER BY orderid').fetchall()

    n = 300
    herder.put_connector_config("dg", {"name": "dg", "connector.class": "Datagen", "kafka.topic": topic_name,
                                       "quickstart": "orders", "iterations": str(n), "max.interval": "0",
                                       "random.seed": "7"}, False)
    herder.put_connector_config("jdbc", {"name": "jdbc", "connector.class": "JdbcSink", "topics": topic_name,
                                         "connection.url": url, "auto.create": "true", "insert.mode": "upsert",
                                         "pk.mode": "record_value", "pk.fields": "orderid",
                                         "transforms": "flat",
                                         "transforms.flat.type": "org.apache.kafka.connect.transforms.Flatten$Value"},
                                False)
    wait_for(lambda: (c := count()) and c[0] == n and c, what=f"{n} rows in {db}")
    expected = [(r["orderid"], r["itemid"], r["orderunits"]) for r in generate("orders", n, 7)]
    assert rows() == expected
    status = herder.connector_status("jdbc").to_json()
    assert status["tasks"][0]["state"] == "RUNNING"


def test_directory_source_to_jdbc_sink(herder: StandaloneHerder, tmp_path: Path, topic_name: str) -> None:
    inbox, done, err = tmp_path / "in", tmp_path / "done", tmp_path / "err"
    inbox.mkdir()
    (inbox / "01.csv").write_text("sku,qty\na,1\nb,2\n")
    (inbox / "02.jsonl").write_text('{"sku": "c", "qty": "3"}\n')
    (inbox / "03.jsonl").write_text('{"sku": "d", "qty": "4"}\nnot json\n')
    db = tmp_path / "dir.db"
    herder.put_connector_config("dir", {"name": "dir", "connector.class": "DirectorySource",
                                        "input.path": str(inbox), "finished.path": str(done),
                                        "error.path": str(err), "topic": topic_name, "poll.interval.ms": "100",
                                        "key.field": "sku"}, False)
    herder.put_connector_config("dir-jdbc", {"name": "dir-jdbc", "connector.class": "JdbcSink", "topics": topic_name,
                                             "connection.url": f"jdbc:sqlite:{db}", "auto.create": "true",
                                             "auto.evolve": "true", "insert.mode": "upsert",
                                             "pk.mode": "record_value", "pk.fields": "sku"}, False)

    def got() -> list[tuple[Any, ...]]:
        with sqlite3.connect(db) as conn:
            return conn.execute(f'SELECT sku, qty FROM "{topic_name}" ORDER BY sku').fetchall()

    wait_for(lambda: got() == [("a", "1"), ("b", "2"), ("c", "3")], what="rows from both good files")
    wait_for(lambda: sorted(p.name for p in done.iterdir()) == ["01.csv", "02.jsonl"], what="files moved")
    assert (err / "03.jsonl").exists() and (err / "03.jsonl.error").exists()
