"""Garbage in a state file gives one error line naming that file, or a WARNING and Kafka's fallback.

A real broker writes a data directory once (a topic with acknowledged records, a clean stop);
each case copies it, puts garbage into one state file and starts ``strom dev`` on the copy.
Files the node cannot start without (``meta.properties``, ``quorum-state``,
``partition.metadata``) stop it with exit code 1 and one ``error:`` line naming the file and the
way out, no traceback, the file left as it was. Offset checkpoints and the leader-epoch
checkpoint are ignored with a WARNING naming the file, as Kafka does, and every acknowledged
record is still there.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from ck_helpers import create_topic, make_producer, produce_all, read_partition
from confluent_kafka.admin import AdminClient

from strom.core.testing import BrokerProcess

TOPIC = "state"
RECORDS = [f"v{i}".encode() for i in range(10)]
QUORUM_STATE = "metadata/__cluster_metadata-0/quorum-state"

BAD_UTF8 = b"\xff\xfe\x00garbage \xc3\x28\n"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir a real broker wrote: topic ``state`` with 10 acknowledged records, clean stop."""
    data = tmp_path_factory.mktemp("pristine") / "data"
    broker = BrokerProcess(data).start()
    try:
        create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), TOPIC)
        produce_all(make_producer(broker.bootstrap, acks="all"), TOPIC, [{"value": v} for v in RECORDS])
    finally:
        assert broker.stop() == 0
    return data


def _copy(pristine: Path, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(pristine, data)
    return data


def _run_dev(data: Path, timeout: float = 90.0) -> tuple[int, list[str]]:
    """`strom dev` on ``data`` to its end; a broker that becomes ready fails the test at once."""
    proc = subprocess.Popen([sys.executable, "-m", "strom.core.cli", "dev", "--data-dir", str(data),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
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


def _replace_field(path: Path, key: str, value: str) -> bytes:
    lines = [ln if not ln.startswith(f"{key}=") else f"{key}={value}" for ln in path.read_text().splitlines()]
    return ("\n".join(lines) + "\n").encode()


# (file relative to the data dir, garbage from the original bytes, what the error must say)
REFUSED: dict[str, tuple[str, Callable[[Path], bytes], str]] = {
    "metadata-meta.properties-utf8": ("metadata/meta.properties", lambda p: BAD_UTF8, "is not UTF-8"),
    "metadata-meta.properties-version": ("metadata/meta.properties",
                                         lambda p: _replace_field(p, "version", "9"), "version '9'"),
    "metadata-meta.properties-node.id": ("metadata/meta.properties",
                                         lambda p: _replace_field(p, "node.id", "one"), "node.id must be an integer"),
    "logs-meta.properties-utf8": ("logs/meta.properties", lambda p: BAD_UTF8, "is not UTF-8"),
    "quorum-state-utf8": (QUORUM_STATE, lambda p: BAD_UTF8, "is not UTF-8"),
    "quorum-state-truncated-json": (QUORUM_STATE, lambda p: p.read_bytes()[:40], "not a quorum-state JSON object"),
    "quorum-state-data-version": (QUORUM_STATE, lambda p: p.read_bytes().replace(b'"data_version":0',
                                                                                 b'"data_version":7'),
                                  "data_version 7"),
    "partition.metadata-utf8": (f"logs/{TOPIC}-0/partition.metadata", lambda p: BAD_UTF8, "is not UTF-8"),
    "partition.metadata-bad-id": (f"logs/{TOPIC}-0/partition.metadata",
                                  lambda p: b"version: 0\ntopic_id: not-a-uuid\n", "does not decode to 16 bytes"),
}

WAY_OUT = {"meta.properties": "restore it from a backup", "quorum-state": "move it aside",
           "partition.metadata": "move the file aside and restart"}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_garbage_in_a_required_state_file_stops_the_node_with_one_line(pristine: Path, tmp_path: Path,
                                                                       case: str) -> None:
    rel, garbage, what = REFUSED[case]
    data = _copy(pristine, tmp_path)
    path = data / rel
    damaged = garbage(path)
    assert damaged != path.read_bytes()
    path.write_bytes(damaged)

    code, lines = _run_dev(data)
    text = "\n".join(lines)
    assert code == 1, text
    assert "Traceback" not in text, text
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1], text
    assert str(path) in errors[0] and what in errors[0], errors[0]
    assert WAY_OUT[path.name] in errors[0], errors[0]
    assert path.read_bytes() == damaged  # left for the operator, not rewritten
    assert (data / "logs" / f"{TOPIC}-0").is_dir()


FALLBACK = ["logs/recovery-point-offset-checkpoint", "logs/log-start-offset-checkpoint",
            "logs/replication-offset-checkpoint", f"logs/{TOPIC}-0/leader-epoch-checkpoint"]


@pytest.mark.parametrize("rel", FALLBACK)
def test_garbage_in_a_checkpoint_is_ignored_with_a_warning_naming_it(pristine: Path, tmp_path: Path,
                                                                     rel: str) -> None:
    data = _copy(pristine, tmp_path)
    path = data / rel
    assert path.exists()
    path.write_bytes(BAD_UTF8)

    broker = BrokerProcess(data).start()
    try:
        warnings = [ln for ln in broker.output if "WARNING" in ln and str(path) in ln]
        assert warnings and "is not UTF-8" in warnings[0], list(broker.output)
        assert not any("Traceback" in ln for ln in broker.output)
        got = read_partition(broker.bootstrap, TOPIC, 0, len(RECORDS))
        assert [m.value() for m in got] == RECORDS
    finally:
        assert broker.stop() == 0


def _new_directory_id(path: Path) -> None:
    from strom.core.metadata.bootstrap import random_uuid

    lines = [ln if not ln.startswith("directory.id=") else f"directory.id={random_uuid()}"
             for ln in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("rel", ["metadata/meta.properties", QUORUM_STATE, f"logs/{TOPIC}-0/partition.metadata"])
def test_the_way_out_the_error_names_works(pristine: Path, tmp_path: Path, rel: str) -> None:
    data = _copy(pristine, tmp_path)
    path = data / rel
    path.write_bytes(BAD_UTF8)
    code, lines = _run_dev(data)
    assert code == 1 and str(path) in lines[-1], lines

    if path.name == "meta.properties":
        # "copy meta.properties from another log dir of this node (... directory.id from random-uuid)"
        shutil.copyfile(data / "logs" / "meta.properties", path)
        _new_directory_id(path)
    else:
        path.rename(path.with_name(path.name + ".bad"))  # "move it aside"
    broker = BrokerProcess(data).start()
    try:
        got = read_partition(broker.bootstrap, TOPIC, 0, len(RECORDS))
        assert [m.value() for m in got] == RECORDS
    finally:
        assert broker.stop() == 0
