"""Storage errors through the LogDirFailureChannel, a roll's flush, and the dir locks, on real files.

The full disk is a real one: a small tmpfs (root only; skipped otherwise).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strom.core.config import BrokerConfig, LogConfig
from strom.core.errors import KafkaStorageError, UnknownTopicOrPartitionError
from strom.core.exceptions import LogDirLockedError
from strom.core.log.dir_lock import DirLock
from strom.core.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from strom.core.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.replica.manager import ReplicaManager
from strom.core.server.purgatory import Purgatory


def broker(dirs: list[Path], **extra: str) -> BrokerConfig:
    return BrokerConfig.from_mapping({"log.dirs": ",".join(map(str, dirs)), "node.id": "1", **extra})


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_dir_goes_offline_once_and_keeps_serving_reads(small_disk: Path, tmp_path: Path, appender: Any,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    full, spare = small_disk / "logs", tmp_path / "spare"
    (small_disk / "ballast").write_bytes(b"\1" * 200_000)  # stands for the rest of the disk
    dirs = [full, spare]
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    first = mgr.get_or_create_log("a", 0)
    other = mgr.get_or_create_log("a", 1)
    assert first.dir.parent == full and other.dir.parent == spare
    neighbour = mgr.get_or_create_log("a", 2)  # the least loaded dir again: the small one
    assert neighbour.dir.parent == full
    caplog.set_level(logging.INFO)
    value = b"v" * 4000
    acked = 0
    with pytest.raises(KafkaStorageError, match=re.escape(str(full))):
        for _ in range(1000):
            appender(first, [SimpleRecord(None, value)])
            acked += 1
    assert acked > 10
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and str(full) in errors[0].getMessage(), [r.getMessage() for r in errors]
    assert mgr.offline_dirs() == [full] and first.offline and neighbour.offline
    # Every log of the dir refuses appends now, without another ERROR; the other dir works.
    with pytest.raises(KafkaStorageError):
        appender(neighbour, [SimpleRecord(None, b"x")])
    appender(other, [SimpleRecord(None, b"fine")])
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    # What was acknowledged is read back; the refused append left nothing behind.
    assert first.log_end_offset == acked
    data = first.read(0, 10**8)
    assert data.first_batch_offset == 0 and len(data.records) > acked * 4000
    assert first.active_segment.size == os.path.getsize(first.active_segment.log_path)
    # New partitions go to the online dir; maintenance and checkpoints skip the failed one.
    assert mgr.get_or_create_log("b", 0).dir.parent == spare
    mgr.run_maintenance(force=True)
    mgr.shutdown()
    assert not (full / CLEAN_SHUTDOWN_FILE).exists() and (spare / CLEAN_SHUTDOWN_FILE).exists()

    # A restart with the disk still full is refused with a message naming the dir; once space
    # is freed, it recovers the failed dir's logs and nothing acknowledged is lost.
    mgr = LogManager(dirs, broker(dirs))
    with pytest.raises(KafkaStorageError, match=f"Error while loading log dir {re.escape(str(full))}.*free space"):
        mgr.startup()
    mgr.release_locks()
    (small_disk / "ballast").unlink()
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    assert not mgr.had_clean_shutdown[full]
    again = mgr.get_log("a", 0)
    assert again is not None and again.log_end_offset == acked
    mgr.shutdown()


def test_all_dirs_offline_refuses_new_logs(small_disk: Path, appender: Any) -> None:
    dirs = [small_disk / "logs"]
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    log = mgr.get_or_create_log("a", 0)
    with pytest.raises(KafkaStorageError):
        for _ in range(1000):
            appender(log, [SimpleRecord(None, b"v" * 4000)])
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        mgr.get_or_create_log("b", 0)
    mgr.shutdown()


def test_roll_flushes_below_the_new_segment(tmp_path: Path, appender: Any) -> None:
    """Kafka flushes the rolled segments after a roll: the recovery point follows the rolls, so a
    crash recovers the active segment only."""
    dirs = [tmp_path / "d"]
    mgr = LogManager(dirs, broker(dirs))
    mgr.startup()
    config = LogConfig.build(broker(dirs), {"segment.bytes": "2000"})
    log = mgr.get_or_create_log("r", 0, config=config)
    for i in range(30):
        appender(log, [SimpleRecord(None, b"%03d" % i + b"x" * 300)])
    assert log.num_segments > 3 and log.recovery_point == 0
    mgr.run_maintenance()
    assert log.recovery_point == log.active_segment.base_offset
    text = (dirs[0] / "recovery-point-offset-checkpoint").read_text()
    assert f"r 0 {log.active_segment.base_offset}" in text
    mgr.shutdown()


def test_a_second_manager_on_a_dir_is_refused_until_the_first_shuts_down(tmp_path: Path) -> None:
    dirs = [tmp_path / "logs"]
    meta = tmp_path / "meta"
    mgr = LogManager(dirs, broker(dirs, **{"metadata.log.dir": str(meta)}))
    assert (meta / ".lock").read_text().strip() == str(os.getpid())
    for locked in (dirs, [tmp_path / "other"]):
        config = broker(locked, **{"metadata.log.dir": str(meta)})
        with pytest.raises(LogDirLockedError, match=r"Failed to acquire lock on file \.lock in"):
            LogManager(locked, config)
    # The refused attempt on "other" released what it had taken before reaching "meta".
    DirLock.acquire(tmp_path / "other").release()
    mgr.startup()
    mgr.shutdown()
    LogManager(dirs, broker(dirs, **{"metadata.log.dir": str(meta)})).shutdown()


_FILL_AND_APPEND = """
import errno, sys
from pathlib import Path
from strom.core.log.index import OffsetIndex, TimeIndex
disk = Path(sys.argv[1])
offsets = OffsetIndex(disk / "0.index", 0, 1 << 20)
times = TimeIndex(disk / "0.timeindex", 0, 1 << 20)
try:
    with open(disk / "ballast", "wb") as f:
        while True:
            f.write(b"\\1" * 65536)
            f.flush()
except OSError:
    pass
for n in range(1, 100_000):
    try:
        offsets.append(n, n * 100)
    except OSError as e:
        print("offset index", errno.errorcode[e.errno], n)
        break
for n in range(1, 100_000):
    try:
        times.maybe_append(n, n)
    except OSError as e:
        print("time index", errno.errorcode[e.errno], n)
        break
"""


def test_index_appends_on_a_full_disk_raise_enospc_instead_of_sigbus(small_disk: Path) -> None:
    """A store through the map into an unallocated page of a full disk would kill the process
    (SIGBUS); the index reserves each page first, so the append raises ENOSPC."""
    done = subprocess.run([sys.executable, "-c", _FILL_AND_APPEND, str(small_disk)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    assert [ln.split()[:3] for ln in lines] == [["offset", "index", "ENOSPC"], ["time", "index", "ENOSPC"]], lines


def test_partitions_that_cannot_get_a_log_answer_storage_error(small_disk: Path, appender: Any) -> None:
    """The replica manager (a metadata publisher) meets a new partition while every dir is
    offline: the partition answers KAFKA_STORAGE_ERROR and the rest of the image is applied."""
    dirs = [small_disk / "logs"]
    config = broker(dirs)
    mgr = LogManager(dirs, config)
    mgr.startup()
    rm = ReplicaManager(config, mgr, fetch_purgatory=Purgatory("fetch"), produce_purgatory=Purgatory("produce"))
    reg = PartitionRegistration(replicas=(1,), isr=(1,), leader=1, leader_epoch=0, partition_epoch=0)
    old = TopicImage("old", uuid.uuid4(), {0: reg})
    rm.on_metadata_update(None, MetadataImage(topics={"old": old}))
    with pytest.raises(KafkaStorageError):
        for _ in range(1000):
            rm.append_records("old", 0, build_batch([SimpleRecord(None, b"v" * 4000)]), -1)
    new = TopicImage("new", uuid.uuid4(), {0: reg, 1: reg})
    rm.on_metadata_update(None, MetadataImage(topics={"old": old, "new": new}))
    for p in (0, 1):
        with pytest.raises(KafkaStorageError, match="offline"):
            rm.get_partition("new", p)
    assert rm.get_partition("old", 0).log.offline
    rm.on_metadata_update(None, MetadataImage(topics={"old": old}))  # "new" deleted: forgotten
    with pytest.raises(UnknownTopicOrPartitionError):
        rm.get_partition("new", 0)
    mgr.shutdown()


def test_a_lock_on_a_deleted_dir_does_not_block_a_new_dir(tmp_path: Path) -> None:
    """A manager never shut down keeps its lock; once its dir is deleted, a new dir that gets
    the same inode number must not be taken for it."""
    old = tmp_path / "old"
    lock = DirLock.acquire(old)
    assert not lock.stale
    (old / ".lock").unlink()
    old.rmdir()
    assert lock.stale  # what lets a new dir with the deleted one's inode number be locked
    old.mkdir()
    new = DirLock.acquire(old)
    assert new.held and not new.stale
    with pytest.raises(LogDirLockedError, match="this process"):
        DirLock.acquire(old)
    new.release()
    lock.release()
