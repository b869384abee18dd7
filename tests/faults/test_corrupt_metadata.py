"""A corrupt metadata log is refused, not trimmed; a torn tail is still truncated.

A real broker writes ``__cluster_metadata-0``; the test damages the segment file between runs
and starts ``strom dev`` on it again. Damage below the committed offset must stop the node with
one line naming the file, the byte and the offset, touching nothing; ``strom storage
truncate-metadata`` lists what truncating drops and, with ``--yes``, drops exactly that.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from ck_helpers import create_topic, make_producer, produce_all, read_partition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from strom.core.metadata.records import TopicRecord, decode_record
from strom.core.records.batch import BatchHeader, iter_headers
from strom.core.records.builder import decode_batch
from strom.core.testing import BrokerProcess

SEGMENT = Path("metadata") / "__cluster_metadata-0" / f"{0:020d}.log"


def _run_cli(args: list[str], timeout: float = 90.0) -> tuple[int, list[str]]:
    """Run ``strom ARGS`` to its end; (exit code, non-empty output lines). A broker that
    becomes ready instead of refusing is killed at once and fails the test."""
    proc = subprocess.Popen([sys.executable, "-m", "strom.core.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))
    timer.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("bootstrap.servers="):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise AssertionError("the broker started:\n" + "\n".join(lines))
        code = proc.wait()
    finally:
        timer.cancel()
    return code, [ln for ln in lines if ln.strip()]


def _refused(data_dir: Path) -> str:
    """Start `strom dev` on ``data_dir``: it must exit non-zero with one error line, no traceback."""
    code, lines = _run_cli(["dev", "--data-dir", str(data_dir), "--port", "0"])
    text = "\n".join(lines)
    assert code == 1, text
    assert "Traceback" not in text, text
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1], text
    return errors[0]


def _topic_batch(segment: Path, topic: str) -> tuple[int, BatchHeader]:
    """(byte position, header) of the metadata batch that created ``topic``."""
    data = segment.read_bytes()
    for pos, header in iter_headers(data):
        if header.is_control:
            continue
        for rec in decode_batch(data, pos).records:
            if rec.value is not None:
                record = decode_record(rec.value)
                if isinstance(record, TopicRecord) and record.name == topic:
                    return pos, header
    raise AssertionError(f"no TopicRecord for {topic} in {segment}")


def _damage(segment: Path, pos: int, header: BatchHeader, kind: str) -> None:
    data = bytearray(segment.read_bytes())
    if kind == "crc":
        data[pos + header.size - 2] ^= 0x5A                      # a record byte: CRC-32C mismatch
    elif kind == "length":
        data[pos + 8:pos + 12] = struct.pack(">i", 0x7FFF0000)   # batch_length past the file end
    else:
        data[pos:pos + header.size] = os.urandom(header.size)  # the whole batch is garbage
    segment.write_bytes(bytes(data))


def _topics(bootstrap: str) -> set[str]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return {name for name in md.topics if not name.startswith("__")}


def _populate(broker: BrokerProcess, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name in names:
        create_topic(admin, name, partitions=2)
    produce_all(make_producer(broker.bootstrap, acks="all"), names[0],
                [{"value": f"v{i}".encode(), "partition": 0} for i in range(20)])


@pytest.mark.parametrize("kind", ["crc", "length", "garbage"])
def test_damaged_committed_batch_is_refused_not_trimmed(fresh_broker: BrokerProcess, kind: str) -> None:
    fresh_broker.start()
    _populate(fresh_broker, ["keep", "hit", "after"])
    fresh_broker.stop()
    segment = fresh_broker.data_dir / SEGMENT
    pos, header = _topic_batch(segment, "hit")
    _damage(segment, pos, header, kind)
    damaged = segment.read_bytes()
    dirs_before = sorted(p.name for p in (fresh_broker.data_dir / "logs").iterdir())

    error = _refused(fresh_broker.data_dir)

    assert f"metadata log {segment} is corrupt at byte {pos} (the batch at offset {header.base_offset})" in error
    assert (f"strom storage truncate-metadata --metadata-log-dir {fresh_broker.data_dir / 'metadata'} "
            f"--offset {header.base_offset}") in error
    # Nothing was cut or deleted: not the metadata log, not a topic's data directory.
    assert segment.read_bytes() == damaged
    assert sorted(p.name for p in (fresh_broker.data_dir / "logs").iterdir()) == dirs_before
    assert {"keep-0", "hit-0", "after-0"} <= set(dirs_before)


def _retention(bootstrap: str, topic: str) -> str:
    resource = ConfigResource("topic", topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = admin.describe_configs([resource])[resource].result(20)
    return str(configs["retention.ms"].value)


def test_repair_drops_exactly_what_it_lists(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    _populate(fresh_broker, ["keep", "hit", "after"])
    # A config change after the damaged batch: dropped (and listed) with it.
    change = ConfigResource("topic", "keep", incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": fresh_broker.bootstrap})
    admin.incremental_alter_configs([change])[change].result(20)
    assert _retention(fresh_broker.bootstrap, "keep") == "123456"
    before = _topics(fresh_broker.bootstrap)
    metadata_dir = fresh_broker.data_dir / "metadata"
    code, lines = _run_cli(["storage", "truncate-metadata", "--metadata-log-dir", str(metadata_dir),
                            "--offset", "0"])
    assert code == 1 and lines[-1].startswith("error: cannot repair while a broker runs"), lines
    fresh_broker.stop()
    segment = fresh_broker.data_dir / SEGMENT
    pos, header = _topic_batch(segment, "hit")
    _damage(segment, pos, header, "crc")
    damaged = segment.read_bytes()
    repair = ["storage", "truncate-metadata", "--metadata-log-dir", str(metadata_dir),
              "--offset", str(header.base_offset)]

    code, listing = _run_cli(repair)
    text = "\n".join(listing)
    assert code == 0, text
    assert "Dry run: nothing was changed" in text
    assert segment.read_bytes() == damaged
    assert f"byte {pos} of {segment.name}" in text and "CRC mismatch" in text
    listed = set(re.findall(r"topic (\S+) created", text))
    assert listed == {"hit", "after"}  # "hit" read from the damaged batch, unverified
    assert "config retention.ms=123456 set on topic keep" in text

    code, done = _run_cli([*repair, "--yes"])
    assert code == 0, "\n".join(done)
    assert [ln for ln in done if ln.startswith("  ")] == [ln for ln in listing if ln.startswith("  ")]
    assert segment.stat().st_size == pos

    fresh_broker.start()
    after = _topics(fresh_broker.bootstrap)
    assert before - after == listed
    assert _retention(fresh_broker.bootstrap, "keep") != "123456"
    got = read_partition(fresh_broker.bootstrap, "keep", 0, 20)
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(20)]


def test_torn_tail_is_truncated_but_a_committed_last_batch_is_not(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    _populate(fresh_broker, ["keep"])
    fresh_broker.kill()
    segment = fresh_broker.data_dir / SEGMENT
    data = segment.read_bytes()
    last_pos, last = list(iter_headers(data))[-1]
    # What kill -9 in the middle of an append leaves: the start of a batch after the last one.
    with open(segment, "ab") as f:
        f.write(data[last_pos:last_pos + 40])

    fresh_broker.start()
    assert any("WARNING" in ln and segment.name in ln for ln in fresh_broker.output), list(fresh_broker.output)
    assert "keep" in _topics(fresh_broker.bootstrap)
    fresh_broker.stop()

    # After a clean stop the high watermark is recorded: the last batch is committed data.
    data = segment.read_bytes()
    last_pos, last = list(iter_headers(data))[-1]
    _damage(segment, last_pos, last, "crc")
    error = _refused(fresh_broker.data_dir)
    assert f"{segment} is corrupt at byte {last_pos} (the batch at offset {last.base_offset})" in error


def test_missing_committed_batches_are_refused(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    _populate(fresh_broker, ["keep", "gone"])
    fresh_broker.stop()
    segment = fresh_broker.data_dir / SEGMENT
    pos, header = _topic_batch(segment, "gone")
    with open(segment, "r+b") as f:
        f.truncate(pos)                                          # cut exactly at a batch boundary

    error = _refused(fresh_broker.data_dir)
    assert f"metadata log {segment} ends at offset {header.base_offset}" in error
    assert "committed metadata records are missing" in error
    assert segment.stat().st_size == pos
