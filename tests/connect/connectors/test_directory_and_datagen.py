"""Directory source (CSV, JSON lines, finished/error handling, restarts) and datagen, run directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from strom.connect.connectors.datagen import DatagenConnector, DatagenTask, generate
from strom.connect.connectors.directory import DirectorySourceConnector, DirectorySourceTask
from strom.connect.data import Struct
from strom.connect.exceptions import ConfigException, ConnectException
from strom.connect.runtime.offsets import FileOffsetBackingStore


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    out = {n: tmp_path / n for n in ("in", "done", "err")}
    out["in"].mkdir()
    return out


def props(dirs: dict[str, Path], **extra: str) -> dict[str, str]:
    return {"input.path": str(dirs["in"]), "finished.path": str(dirs["done"]), "error.path": str(dirs["err"]),
            "topic": "files", "poll.interval.ms": "10", **extra}


def test_csv_rows_become_structs_and_file_moves_when_acked(dirs: dict[str, Path], harness: Any) -> None:
    (dirs["in"] / "a.csv").write_text('id,name,note\n1,ann,"multi\nline"\n2,bob,\n')
    h = harness(DirectorySourceTask, props(dirs, **{"key.field": "id"}))
    records = h.poll(ack=False)
    assert [r.value.get("name") for r in records] == ["ann", "bob"]
    assert isinstance(records[0].value, Struct) and records[0].value.get("note") == "multi\nline"
    assert [r.key for r in records] == ["1", "2"]
    assert [r.source_offset for r in records] == [{"line": 3}, {"line": 4}]
    st = (dirs["in"] / "a.csv").stat()
    assert records[0].source_partition == {"path": str(dirs["in"] / "a.csv"), "size": st.st_size,
                                           "modified": st.st_mtime_ns // 1_000_000}
    assert (dirs["in"] / "a.csv").exists()  # not acknowledged yet
    h.task.commit_record(records[0], None)
    assert (dirs["in"] / "a.csv").exists()
    h.task.commit_record(records[1], None)
    assert not (dirs["in"] / "a.csv").exists() and (dirs["done"] / "a.csv").exists()


def test_json_lines_in_name_order_and_batches(dirs: dict[str, Path], harness: Any) -> None:
    (dirs["in"] / "b.jsonl").write_text('{"n": 3}\n\n{"n": 4, "nested": {"x": [1]}}\n')
    (dirs["in"] / "a.jsonl").write_text("".join(f'{{"n": {i}}}\n' for i in range(3)))
    (dirs["in"] / "ignored.txt").write_text("not matched\n")
    h = harness(DirectorySourceTask, props(dirs, **{"batch.size": "2"}))
    values = [r.value for r in h.drain()]
    assert [v["n"] for v in values] == [0, 1, 2, 3, 4]
    assert values[-1]["nested"] == {"x": [1]}
    assert sorted(p.name for p in dirs["done"].iterdir()) == ["a.jsonl", "b.jsonl"]
    assert (dirs["in"] / "ignored.txt").exists()


def test_bad_file_goes_to_error_path_and_others_continue(dirs: dict[str, Path], harness: Any) -> None:
    (dirs["in"] / "1.jsonl").write_text('{"ok": 1}\n{broken\n')
    (dirs["in"] / "2.jsonl").write_text('{"ok": 2}\n')
    h = harness(DirectorySourceTask, props(dirs))
    got = h.drain()
    assert [r.value["ok"] for r in got] == [2]
    assert (dirs["err"] / "1.jsonl").exists()
    assert "line 2" in (dirs["err"] / "1.jsonl.error").read_text()
    assert (dirs["done"] / "2.jsonl").exists()


def test_halt_on_error_fails_task(dirs: dict[str, Path], harness: Any) -> None:
    (dirs["in"] / "x.csv").write_text("a,b\n1,2,3\n")
    h = harness(DirectorySourceTask, props(dirs, **{"halt.on.error": "true"}))
    with pytest.raises(ConnectException, match="3 fields"):
        h.poll()


def test_restart_resumes_mid_file_without_duplicates(dirs: dict[str, Path], harness: Any, tmp_path: Path) -> None:
    (dirs["in"] / "big.csv").write_text("n\n" + "".join(f"{i}\n" for i in range(10)))
    store = tmp_path / "offsets.dat"
    p = props(dirs, **{"batch.size": "4"})
    first = harness(DirectorySourceTask, p, FileOffsetBackingStore(store))
    assert [r.value.get("n") for r in first.poll()] == ["0", "1", "2", "3"]
    first.poll(commit=False)  # in flight, never committed
    first.stop()
    first.store.stop()
    second = harness(DirectorySourceTask, p, FileOffsetBackingStore(store))
    assert [r.value.get("n") for r in second.drain()] == [str(i) for i in range(4, 10)]
    assert (dirs["done"] / "big.csv").exists()


def test_fully_published_file_left_behind_is_just_moved(dirs: dict[str, Path], harness: Any, tmp_path: Path) -> None:
    (dirs["in"] / "f.jsonl").write_text('{"a": 1}\n')
    store = tmp_path / "offsets.dat"
    first = harness(DirectorySourceTask, props(dirs), FileOffsetBackingStore(store))
    assert len(first.poll(ack=False)) == 1  # crash before the ack moved the file
    first.stop()
    first.store.stop()
    second = harness(DirectorySourceTask, props(dirs), FileOffsetBackingStore(store))
    assert second.poll() == []
    assert (dirs["done"] / "f.jsonl").exists()


def test_cleanup_delete_and_none(dirs: dict[str, Path], harness: Any) -> None:
    (dirs["in"] / "d.jsonl").write_text('{"a": 1}\n')
    h = harness(DirectorySourceTask, props(dirs, **{"cleanup.policy": "DELETE"}))
    assert len(h.drain()) == 1 and not (dirs["in"] / "d.jsonl").exists()
    (dirs["in"] / "k.jsonl").write_text('{"a": 2}\n')
    keep = harness(DirectorySourceTask, props(dirs, **{"cleanup.policy": "NONE"}))
    assert len(keep.drain()) == 1 and (dirs["in"] / "k.jsonl").exists()
    assert keep.poll() == []  # remembered, not re-read


def test_directory_config_checks(dirs: dict[str, Path], tmp_path: Path) -> None:
    c = DirectorySourceConnector()
    with pytest.raises(ConfigException, match=r"input\.path"):
        c.start({**props(dirs), "input.path": str(tmp_path / "missing")})
    with pytest.raises(ConfigException, match=r"finished\.path"):
        c.start({k: v for k, v in props(dirs).items() if k != "finished.path"})
    with pytest.raises(ConfigException, match=r"error\.path"):
        c.start({k: v for k, v in props(dirs).items() if k != "error.path"})
    c.start(props(dirs))
    assert c.task_configs(4) == [props(dirs)]


def dg_props(**extra: str) -> dict[str, str]:
    return {"kafka.topic": "dg", "max.interval": "0", "iterations": "25", "random.seed": "42", **extra}


@pytest.mark.parametrize("quickstart", ["users", "pageviews", "orders"])
def test_datagen_is_deterministic_and_bounded(quickstart: str, harness: Any) -> None:
    a = harness(DatagenTask, dg_props(quickstart=quickstart, **{"batch.size": "10"}))
    b = harness(DatagenTask, dg_props(quickstart=quickstart))
    ra, rb = a.drain(), b.drain()
    assert len(ra) == 25 and [r.value for r in ra] == [r.value for r in rb]
    assert [r.value.to_dict() for r in ra] == generate(quickstart, 25, 42)
    assert ra[-1].source_offset == {"current.iteration": 25} and ra[0].source_partition == {"task.id": 0}
    key_field = {"users": "userid", "pageviews": "viewtime", "orders": "orderid"}[quickstart]
    assert all(r.key == r.value.get(key_field) for r in ra)
    for r in ra:
        r.value.validate()


def test_datagen_resume_continues_the_same_sequence(harness: Any, tmp_path: Path) -> None:
    store = tmp_path / "off.dat"
    p = dg_props(**{"batch.size": "10"})
    first = harness(DatagenTask, p, FileOffsetBackingStore(store))
    head = first.poll()
    first.stop()
    first.store.stop()
    second = harness(DatagenTask, p, FileOffsetBackingStore(store))
    tail = second.drain()
    whole = generate("users", 25, 42)
    assert [r.value.to_dict() for r in head + tail] == whole


def test_datagen_tasks_and_rate(harness: Any) -> None:
    c = DatagenConnector()
    c.start(dg_props())
    cfgs = c.task_configs(3)
    assert [t["task.id"] for t in cfgs] == ["0", "1", "2"]
    t0 = harness(DatagenTask, cfgs[0]).drain()
    t1 = harness(DatagenTask, cfgs[1]).drain()
    assert [r.value for r in t0] != [r.value for r in t1]  # each task its own seed
    assert t1[0].source_partition == {"task.id": 1}
    # rate=5/s: one poll hands out only what is due, not the whole batch.
    paced = harness(DatagenTask, dg_props(rate="5"))
    assert 1 <= len(paced.poll()) <= 2
    with pytest.raises(ConfigException, match="quickstart"):
        DatagenConnector().start(dg_props(quickstart="nope"))


def test_corrupt_and_truncated_files_go_to_error_path(dirs: dict[str, Path], harness: Any) -> None:
    (dirs["in"] / "a_bad_utf8.jsonl").write_bytes(b'{"a": "ok"}\n{"a": "\xff\xfe"}\n')
    (dirs["in"] / "b_truncated.csv").write_text('id,name\n1,"unterminated\n')
    (dirs["in"] / "c_not_object.jsonl").write_text('[1, 2]\n')
    (dirs["in"] / "d_good.jsonl").write_text('{"a": "fine"}\n')
    h = harness(DirectorySourceTask, props(dirs))
    got = h.drain()
    assert [r.value["a"] for r in got] == ["fine"]
    errors = sorted(p.name for p in dirs["err"].iterdir() if not p.name.endswith(".error"))
    assert errors == ["a_bad_utf8.jsonl", "b_truncated.csv", "c_not_object.jsonl"]
    assert "utf-8" in (dirs["err"] / "a_bad_utf8.jsonl.error").read_text()
    assert "end of data" in (dirs["err"] / "b_truncated.csv.error").read_text()
    assert "expected a JSON object" in (dirs["err"] / "c_not_object.jsonl.error").read_text()


def test_new_file_under_a_finished_name_is_read_in_full(dirs: dict[str, Path], harness: Any) -> None:
    import os
    (dirs["in"] / "daily.jsonl").write_text('{"day": 1}\n{"day": 1}\n')
    h = harness(DirectorySourceTask, props(dirs, **{"cleanup.policy": "DELETE"}))
    assert len(h.drain()) == 2
    new = dirs["in"] / "daily.jsonl"
    new.write_text('{"day": 2}\n{"day": 2}\n{"day": 2}\n')
    os.utime(new, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    assert [r.value["day"] for r in h.drain()] == [2, 2, 2]


def test_file_moves_only_after_every_record_is_acked(dirs: dict[str, Path], harness: Any) -> None:
    (dirs["in"] / "e.jsonl").write_text("".join(f'{{"i": {i}}}\n' for i in range(4)))
    h = harness(DirectorySourceTask, props(dirs, **{"batch.size": "2"}))
    first, second = h.poll(ack=False), h.poll(ack=False)
    assert len(first) == 2 and len(second) == 2
    assert h.poll(ack=False) == []  # end of file reached with all four records in flight
    for r in [*second, first[1]]:  # acks in any order (several partitions)
        h.task.commit_record(r, None)
    assert (dirs["in"] / "e.jsonl").exists()
    h.task.commit_record(first[0], None)
    assert not (dirs["in"] / "e.jsonl").exists() and (dirs["done"] / "e.jsonl").exists()
