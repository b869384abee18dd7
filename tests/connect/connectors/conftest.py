"""A real PostgreSQL server for the JDBC sink tests: initdb + pg_ctl into a temp dir, free port.

Uses Debian's ``postgresql`` package binaries (``initdb``/``pg_ctl`` on PATH or under
/usr/lib/postgresql/*/bin). PostgreSQL refuses to run as root, so as root the server runs as
the ``postgres`` user (created by the package) through ``runuser``. The server lives for the
test session and is stopped (``pg_ctl stop -m immediate``) at the end.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    port: int
    data_dir: Path

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


def _run(cmd: list[str], as_postgres: bool) -> subprocess.CompletedProcess[str]:
    if as_postgres:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.fail("PostgreSQL is not installed: apt-get install postgresql (scripts/setup-test-deps.sh)")
    as_postgres = os.geteuid() == 0
    base = Path(tempfile.mkdtemp(prefix="strom-pg-"))
    data, sock, logfile = base / "data", base / "sock", base / "server.log"
    sock.mkdir()
    if as_postgres:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
    res = _run([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync",
                "--no-instructions"], as_postgres)
    if res.returncode != 0:
        pytest.fail(f"initdb failed:\n{res.stdout}\n{res.stderr}")
    port = _free_port()
    opts = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
    res = _run([pg_ctl, "-D", str(data), "-o", opts, "-l", str(logfile), "-w", "-t", "60", "start"], as_postgres)
    if res.returncode != 0:
        log = logfile.read_text() if logfile.exists() else ""
        pytest.fail(f"pg_ctl start failed:\n{res.stdout}\n{res.stderr}\n{log}")
    try:
        yield PostgresServer(port, data)
    finally:
        _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], as_postgres)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_database(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh database of the test's own; yields its JDBC URL."""
    import psycopg

    name = f"t_{os.urandom(5).hex()}"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"jdbc:postgresql://127.0.0.1:{postgres_server.port}/{name}?user=postgres"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class SourceHarness:
    """Runs a source task the way the worker does, minus Kafka: real offset store and reader
    (strom.connect.runtime.offsets), offsets committed after each poll when ``commit`` is set."""

    def __init__(self, task_cls: type, props: dict[str, str], store: Any = None, namespace: str = "conn") -> None:
        from strom.connect.runtime.offsets import (
            MemoryOffsetBackingStore,
            OffsetStorageReaderImpl,
            OffsetStorageWriter,
        )
        from strom.connect.runtime.worker_source_task import WorkerSourceTaskContext

        self.store = store if store is not None else MemoryOffsetBackingStore()
        self.store.start()
        self.writer = OffsetStorageWriter(self.store, namespace)
        self.task = task_cls()
        self.task.initialize(WorkerSourceTaskContext(props, OffsetStorageReaderImpl(self.store, namespace), None))
        self.task.start(props)

    def poll(self, commit: bool = True, ack: bool = True) -> list[Any]:
        records = self.task.poll() or []
        for r in records:
            if ack:
                self.task.commit_record(r, None)
            if commit:
                self.writer.offset(r.source_partition, r.source_offset)
        if commit and self.writer.begin_flush():
            self.writer.do_flush()
        return records

    def drain(self, polls: int = 50) -> list[Any]:
        out: list[Any] = []
        for _ in range(polls):
            got = self.poll()
            if not got and out:
                break
            out.extend(got)
        return out

    def stop(self) -> None:
        self.task.stop()


@pytest.fixture
def harness() -> Iterator[Any]:
    """Builds SourceHarness instances and stops them at the end of the test."""
    made: list[SourceHarness] = []

    def build(task_cls: type, props: dict[str, str], store: Any = None) -> SourceHarness:
        h = SourceHarness(task_cls, props, store)
        made.append(h)
        return h

    yield build
    for h in made:
        h.stop()
