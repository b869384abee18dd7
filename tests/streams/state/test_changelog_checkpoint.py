"""Change-logging wrappers (records, Kafka key layouts), restore equals the original store,
and the ``.checkpoint`` file format including corrupt files."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from strom.streams.exceptions import CheckpointError
from strom.streams.state import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingWindowStore,
    changelog_topic,
    read_checkpoint,
    store_path,
    task_dir,
    write_checkpoint,
)

Factory = Any  # conftest.Factory (conftest is not importable under --import-mode=importlib)
TP = ("app-s-changelog", 0)


def _with_offsets(records: list[tuple[bytes, bytes | None]]) -> list[tuple[int, bytes, bytes | None]]:
    return [(i, k, v) for i, (k, v) in enumerate(records)]


def test_kv_changelog_and_restore(stores: Factory) -> None:
    src = ChangeLoggingKeyValueStore(stores.kv("src"))
    for i in range(250):
        src.put(f"k{i % 97}".encode(), str(i).encode())
    src.delete(b"k3")
    src.put_if_absent(b"k4", b"ignored")  # present: nothing logged
    src.put_if_absent(b"new", b"n")
    src.put_all([(b"x", b"1"), (b"k5", None)])
    records = src.drain_changelog()
    assert src.drain_changelog() == []
    assert records[0] == (b"k0", b"0")
    assert (b"k3", None) in records and (b"k4", b"ignored") not in records
    assert records[-3:] == [(b"new", b"n"), (b"x", b"1"), (b"k5", None)]

    dst = ChangeLoggingKeyValueStore(stores.kv("dst"))
    progress: list[int] = []
    n = dst.restore(_with_offsets(records), TP, batch_size=100, on_progress=progress.append)
    assert n == len(records) == 254
    assert progress == [100, 200, 254]
    assert list(dst.all()) == list(src.all())
    assert dst.committed_offsets() == {TP: 254}
    assert dst.drain_changelog() == []  # restoring does not log again


def test_window_changelog_uses_kafka_key_layout(stores: Factory) -> None:
    src = ChangeLoggingWindowStore(stores.window("src", retention=1000, size=10))
    src.put(b"k", b"v", 5)
    src.put(b"k", b"w", -1)
    src.put(b"j", b"z", 2000)  # expires the others
    src.put(b"k", b"late", 0)  # expired: dropped, nothing logged
    recs = src.drain_changelog()
    assert recs[0] == (b"k" + struct.pack(">qi", 5, 0), b"v")
    assert recs[1] == (b"k" + struct.pack(">qi", -1, 0), b"w")
    assert len(recs) == 3
    dst = ChangeLoggingWindowStore(stores.window("dst", retention=1000, size=10))
    dst.restore(_with_offsets(recs), TP)
    assert list(dst.all()) == list(src.all()) == [((b"j", 2000, 2010), b"z")]


def test_window_duplicates_restore(stores: Factory) -> None:
    src = ChangeLoggingWindowStore(stores.window("src", retention=1000, size=10, dups=True))
    src.put(b"k", b"1", 5)
    src.put(b"k", b"2", 5)
    recs = src.drain_changelog()
    assert [k[-4:] for k, _ in recs] == [b"\x00\x00\x00\x01", b"\x00\x00\x00\x02"]
    dst = ChangeLoggingWindowStore(stores.window("dst", retention=1000, size=10, dups=True))
    dst.restore(_with_offsets(recs), TP)
    assert list(dst.fetch(b"k", 0, 10)) == [(5, b"1"), (5, b"2")]


def test_session_changelog_and_restore(stores: Factory) -> None:
    src = ChangeLoggingSessionStore(stores.session("src", retention=10_000))
    src.put(b"u", 0, 10, b"a")
    src.put(b"u", 20, 30, b"b")
    src.remove(b"u", 0, 10)
    src.put(b"v\x00", 5, 5, b"c")
    recs = src.drain_changelog()
    assert recs[0] == (b"u" + struct.pack(">qq", 10, 0), b"a")  # key + end + start, as Kafka
    assert recs[2] == (b"u" + struct.pack(">qq", 10, 0), None)
    dst = ChangeLoggingSessionStore(stores.session("dst", retention=10_000))
    dst.restore(_with_offsets(recs), TP)
    assert list(dst.all()) == list(src.all())
    assert len(list(dst.all())) == 2


def test_restore_is_resumable_from_committed_offset(rocks: Factory) -> None:
    records = [(i, f"k{i}".encode(), b"v") for i in range(50)]
    dst = ChangeLoggingKeyValueStore(rocks.kv("dst"))

    def interrupted() -> Any:
        for r in records:
            if r[0] == 35:
                raise RuntimeError("consumer died")
            yield r

    with pytest.raises(RuntimeError):
        dst.restore(interrupted(), TP, batch_size=10)
    dst.close()
    dst2 = ChangeLoggingKeyValueStore(rocks.kv("dst"))
    # the three full batches (30 records) were committed with their offset; the rest was not
    assert dst2.committed_offsets() == {TP: 30}
    assert len(list(dst2.all())) == 30
    start = dst2.committed_offsets()[TP]
    dst2.restore(records[start:], TP, batch_size=10)
    assert len(list(dst2.all())) == 50 and dst2.committed_offsets() == {TP: 50}


def test_names_and_layout(tmp_path: Path) -> None:
    assert changelog_topic("wordcount", "word-counts") == "wordcount-word-counts-changelog"
    assert task_dir(tmp_path, "app", "0_1") == tmp_path / "app" / "0_1"
    assert store_path(tmp_path, "app", "0_1", "counts") == tmp_path / "app" / "0_1" / "rocksdb" / "counts"


def test_checkpoint_file_format(tmp_path: Path) -> None:
    offsets = {("app-b-changelog", 1): 42, ("app-a-changelog", 0): 7}
    path = write_checkpoint(tmp_path / "0_1", offsets)
    assert path.name == ".checkpoint"
    assert path.read_text() == "0\n2\napp-a-changelog 0 7\napp-b-changelog 1 42\n"
    assert read_checkpoint(tmp_path / "0_1") == offsets
    assert read_checkpoint(tmp_path / "missing") == {}
    write_checkpoint(tmp_path / "0_1", {})
    assert read_checkpoint(tmp_path / "0_1") == {}
    assert not (tmp_path / "0_1" / ".checkpoint.tmp").exists()


@pytest.mark.parametrize(
    "content",
    ["", "0\n", "1\n0\n", "0\n2\nt 0 1\n", "0\nx\n", "0\n1\nt 0\n", "0\n1\nt zero 1\n"],
    ids=["empty", "no-count", "version", "short", "bad-count", "fields", "partition"],
)
def test_corrupt_checkpoint_is_an_error(tmp_path: Path, content: str) -> None:
    (tmp_path / ".checkpoint").write_text(content)
    with pytest.raises(CheckpointError, match=r"checkpoint|entries|entry|count"):
        read_checkpoint(tmp_path)
