"""One process owns a data directory: a second broker or a format on it is refused, touching nothing.

The first broker is frozen (SIGSTOP) while the second process runs, so every file's presence,
size and mtime can be compared before and after: whatever changed was changed by the second
process. The frozen broker still holds its locks (a stopped process keeps them).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ck_helpers import create_topic, make_producer, produce_all, read_partition
from confluent_kafka.admin import AdminClient

from strom.core.testing import BrokerProcess

Snapshot = dict[str, tuple[int, int]]


def _snapshot(root: Path) -> Snapshot:
    """Every file and dir under ``root``: (size, mtime in ns)."""
    out: Snapshot = {}
    for path in [root, *root.rglob("*")]:
        st = path.stat()
        out[str(path.relative_to(root))] = (st.st_size if path.is_file() else 0, st.st_mtime_ns)
    return out


def _run_cli(args: list[str], timeout: float = 60.0) -> tuple[int, list[str]]:
    """Run ``strom ARGS``; (exit code, non-empty output lines). Fails if it is still running."""
    proc = subprocess.Popen([sys.executable, "-m", "strom.core.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"`strom {' '.join(args)}` was still running after {timeout}s:\n{out}") from None
    return proc.returncode, [ln for ln in out.splitlines() if ln.strip()]


def test_second_broker_and_format_refused_without_touching_the_dirs(fresh_broker: BrokerProcess,
                                                                    topic_name: str, tmp_path: Path) -> None:
    fresh_broker.start()
    assert fresh_broker.proc is not None
    holder = fresh_broker.proc.pid
    create_topic(AdminClient({"bootstrap.servers": fresh_broker.bootstrap}), topic_name)
    acked = produce_all(make_producer(fresh_broker.bootstrap, acks="all"), topic_name,
                        [{"value": f"v{i}".encode()} for i in range(50)])
    data = fresh_broker.data_dir
    config = tmp_path / "second.properties"
    # A third, unformatted log dir makes `storage format --ignore-formatted` want to write.
    config.write_text(f"node.id=1\nprocess.roles=broker,controller\nlisteners=PLAINTEXT://127.0.0.1:0\n"
                      f"controller.quorum.voters=1@127.0.0.1:0\nlog.dirs={data / 'logs'},{data / 'extra'}\n"
                      f"metadata.log.dir={data / 'metadata'}\n")

    os.kill(holder, signal.SIGSTOP)
    try:
        before = _snapshot(data)
        started = time.monotonic()
        code, lines = _run_cli(["dev", "--data-dir", str(data), "--port", "0"])
        took = time.monotonic() - started
        after_dev = _snapshot(data)
        fmt_code, fmt_lines = _run_cli(["storage", "format", "--config", str(config), "--ignore-formatted"])
        after_format = _snapshot(data)
    finally:
        os.kill(holder, signal.SIGCONT)

    # One line, Kafka's words, naming the directory and the process that holds it.
    assert code == 1, (code, lines)
    assert len(lines) == 1, lines
    assert "Failed to acquire lock on file .lock in" in lines[0], lines
    assert str(data / "logs") in lines[0] and f"process {holder}" in lines[0], lines
    assert took < 30, f"the refused broker took {took:.1f}s to exit"  # generous: python start-up on a busy CI
    assert after_dev == before, {k: (before.get(k), after_dev.get(k))
                                 for k in set(before) | set(after_dev) if before.get(k) != after_dev.get(k)}

    assert fmt_code == 1, (fmt_code, fmt_lines)
    assert any("cannot format" in ln and "Failed to acquire lock" in ln for ln in fmt_lines), fmt_lines
    assert after_format == before, sorted(set(after_format) ^ set(before))
    assert not (data / "extra").exists()

    # The first broker never noticed: it keeps its data and keeps appending.
    assert fresh_broker.alive
    more = produce_all(make_producer(fresh_broker.bootstrap, acks="all"), topic_name, [{"value": b"after"}])
    assert more[0].offset == len(acked)
    got = read_partition(fresh_broker.bootstrap, topic_name, 0, len(acked) + 1, 0)
    assert [m.value() for m in got] == [r.value for r in acked] + [b"after"]

    # A clean stop releases the dirs: the next broker on them starts.
    assert fresh_broker.stop() == 0
    fresh_broker.start()
    assert read_partition(fresh_broker.bootstrap, topic_name, 0, 1, len(acked))[0].value() == b"after"
