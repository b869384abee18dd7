"""Share-group state (__share_group_state) under faults, on a real broker process.

- kill -9 while a share member acknowledges (state writes in flight): after the restart every
  record whose ACCEPT was answered without error stays accepted (never redelivered) and every
  other record is delivered again (nothing lost), except the one ACCEPT in flight at the kill,
  which may have been written before the process died (then it stays accepted, as on Kafka).
- A torn or corrupted tail of the __share_group_state segment at restart: the broker starts, the
  partition is recovered as any topic's log is (the bad batch cut off), and the share state is
  what the valid prefix says: the last write's acknowledgements are gone, so its records come
  back; the earlier write's stay accepted. After a clean shutdown (log trusted, not re-validated)
  the share coordinator's load stops at the bad batch with an ERROR and keeps the prefix.
- A full disk (a 16 MB tmpfs, filled) during state writes: ShareAcknowledge answers
  KAFKA_STORAGE_ERROR, the broker stays up, and once space returns and the broker restarts every
  answered ACCEPT holds and every other record is delivered again. The same acknowledgement
  retried once space is back (before a restart) should succeed; it does not yet (strict xfail,
  the reason names the two causes).
"""

from __future__ import annotations

import errno
import logging
import os
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from diff_wire import WireClient
from kio.schema.errors import ErrorCode
from share_fetch_kit import ACCEPT, ShareMember, acquired, fetch_until, offsets_of, produce, set_group_configs

from strom.core.testing import BrokerProcess

RECORDS = 400


def _topic(broker: BrokerProcess, topic: str) -> uuid.UUID:
    with WireClient(broker.bootstrap) as w:
        w.create_topic(topic, 1)
        w.wait_for_leaders(topic, 1)
        topic_id: uuid.UUID = w.metadata([topic]).topics[0].topic_id
    return topic_id


def _collect_all(broker: BrokerProcess, group: str, topic_id: uuid.UUID, want: int, timeout: float = 60.0
                 ) -> list[int]:
    """Fetch and ACCEPT until ``want`` records came (or nothing more comes); every delivery, in order."""
    m = ShareMember(broker.bootstrap, group, topic_id)
    got: list[int] = []
    deadline = time.monotonic() + timeout
    try:
        acks = None
        idle = 0
        while len(got) < want and idle < 6:
            assert time.monotonic() < deadline, f"{len(got)} of {want} delivered: {sorted(got)[:20]}"
            r = m.fetch(acks, max_wait_ms=500)
            assert r.error_code == 0, r
            new = offsets_of(r)
            got.extend(new)
            idle = 0 if new else idle + 1
            acks = {0: [(a, b, ACCEPT) for a, b, _ in acquired(r).get(0, [])]} if new else None
        if acks:
            m.acknowledge(acks)
    finally:
        m.close()
    return got


def test_kill9_while_acknowledging_keeps_answered_acks(fresh_broker: BrokerProcess) -> None:
    fresh_broker.start()
    topic, group = "share-kill9", "g-kill9"
    topic_id = _topic(fresh_broker, topic)
    set_group_configs(fresh_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(fresh_broker.bootstrap, topic, [b"%d" % i for i in range(RECORDS)])

    accepted: set[int] = set()  # ACCEPTs the broker answered without error
    sent: set[int] = set()  # ACCEPTs sent; the one unanswered at the kill is in doubt
    stop = threading.Event()
    failure: list[BaseException] = []

    def acknowledger() -> None:
        # Small fetches, each record accepted alone: many state writes, one in flight at the kill.
        m = ShareMember(fresh_broker.bootstrap, group, topic_id)
        try:
            while not stop.is_set():
                r = m.fetch(max_wait_ms=200, max_records=5)
                for o in offsets_of(r):
                    sent.add(o)
                    a = m.acknowledge({0: [(o, o, ACCEPT)]})
                    if a.error_code == 0 and a.responses[0].partitions[0].error_code == 0:
                        accepted.add(o)
        except (ConnectionError, OSError):
            pass  # the broker was killed under it
        except BaseException as e:  # handed to the test thread
            failure.append(e)
        finally:
            m.close()

    t = threading.Thread(target=acknowledger, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while len(accepted) < RECORDS // 4:
        assert not failure, failure
        assert time.monotonic() < deadline and t.is_alive(), f"only {len(accepted)} accepted"
        time.sleep(0.01)  # polling the acknowledger's progress, not waiting for a condition by time
    fresh_broker.kill()
    stop.set()
    t.join(30)
    assert not failure, failure
    answered = set(accepted)
    assert RECORDS // 4 <= len(answered) < RECORDS
    # The ACCEPT in flight at the kill may have reached the log before the process died: Kafka
    # then keeps it accepted without having answered it, so it may or may not come back.
    in_doubt = sent - answered
    assert len(in_doubt) <= 1, in_doubt

    fresh_broker.start()
    again = _collect_all(fresh_broker, group, topic_id, RECORDS - len(answered))
    redelivered = answered & set(again)
    assert not redelivered, f"{len(redelivered)} acknowledged records redelivered: {sorted(redelivered)[:10]}"
    lost = set(range(RECORDS)) - answered - set(again) - in_doubt
    assert not lost, f"{len(lost)} records never delivered again: {sorted(lost)[:10]}"


def _batch_starts(segment: bytes) -> list[int]:
    """File positions of the record batches in a .log segment (baseOffset i64, batchLength i32)."""
    pos, starts = 0, []
    while pos + 12 <= len(segment):
        (length,) = struct.unpack_from(">i", segment, pos + 8)
        if length <= 0 or pos + 12 + length > len(segment):
            break
        starts.append(pos)
        pos += 12 + length
    return starts


@pytest.mark.parametrize(("damage", "shutdown"), [("truncate", "kill"), ("flip", "kill"), ("flip", "clean")])
def test_damaged_share_state_tail_recovers_to_the_valid_prefix(fresh_broker: BrokerProcess, damage: str,
                                                               shutdown: str) -> None:
    fresh_broker.start()
    topic, group = f"share-torn-{damage}", f"g-torn-{damage}"
    topic_id = _topic(fresh_broker, topic)
    set_group_configs(fresh_broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(fresh_broker.bootstrap, topic, [b"%d" % i for i in range(20)])
    m = ShareMember(fresh_broker.bootstrap, group, topic_id)
    try:
        fetch_until(m, lambda r: offsets_of(r) == list(range(20)))
        for first, last in ((0, 9), (10, 19)):  # two state writes; the second is the segment's tail
            r = m.acknowledge({0: [(first, last, ACCEPT)]})
            assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0, r
    finally:
        m.close()
    # kill -9: no clean-shutdown marker, so the restart re-validates the log past its recovery
    # point batch by batch, as after any crash. After a clean shutdown the log is trusted (as
    # Kafka's is) and the bad batch reaches the share coordinator's load: it must keep the
    # valid prefix and go on, not stop the broker.
    if shutdown == "kill":
        fresh_broker.kill()
    else:
        fresh_broker.stop()

    logs = sorted((fresh_broker.data_dir / "logs").glob("__share_group_state-*/*.log"),
                  key=lambda p: p.stat().st_size)
    segment: Path = logs[-1]  # the one group's state partition; the others are empty
    data = segment.read_bytes()
    starts = _batch_starts(data)
    assert len(starts) >= 3, f"{segment}: {len(starts)} batches"  # initialize + two writes
    tail = starts[-1]
    if damage == "truncate":
        segment.write_bytes(data[:tail + (len(data) - tail) // 2])  # cut mid-batch
    else:
        body = bytearray(data)
        for i in range(tail + 61, len(body)):  # past the batch header: the records (CRC covers them)
            body[i] ^= 0xFF
        segment.write_bytes(bytes(body))

    fresh_broker.start()
    assert fresh_broker.alive
    again = _collect_all(fresh_broker, group, topic_id, 10)
    assert sorted(again) == list(range(10, 20)), again
    log = fresh_broker.log_text()
    assert "Traceback" not in log, log[-5000:]
    if shutdown == "clean":
        assert "__share_group_state" in "\n".join(ln for ln in log.splitlines() if " ERROR " in ln), log[-3000:]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB tmpfs: filling it is a full disk (as tests/faults/test_disk_full.py does)."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path: Path) -> None:
    """Write ``path`` until the file system has no space left, down to the last byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        size = 1 << 20
        while size:
            try:
                os.write(fd, b"\1" * size)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                size //= 2
    finally:
        os.close(fd)


def _full_disk_scenario(tmpfs: Path, retry_codes: list[int] | None = None) -> str:
    """ShareAcknowledge answers KAFKA_STORAGE_ERROR while __share_group_state cannot be written,
    the broker stays up, and after space returns and a restart every record whose ACCEPT was
    answered stays accepted and every other one is delivered again. Returns the broker's log
    up to the restart."""
    broker = BrokerProcess(tmpfs / "data")
    n = 300
    try:
        broker.start()
        topic, group = "share-full", "g-full"
        topic_id = _topic(broker, topic)
        set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
        produce(broker.bootstrap, topic, [b"%d" % i for i in range(n)])
        m = ShareMember(broker.bootstrap, group, topic_id)
        accepted: set[int] = set()
        try:
            held: set[int] = set()
            deadline = time.monotonic() + 30
            while len(held) < n:
                assert time.monotonic() < deadline, f"{len(held)} of {n} acquired"
                held.update(offsets_of(m.fetch(max_wait_ms=200)))
            _fill(tmpfs / "ballast")
            # One state write per record: the first that needs a new page of the full disk fails.
            full_code, failed_at = 0, -1
            for o in range(n):
                r = m.acknowledge({0: [(o, o, ACCEPT)]})
                code = r.error_code or r.responses[0].partitions[0].error_code
                if code:
                    full_code, failed_at = code, o
                    break
                accepted.add(o)
            assert full_code == ErrorCode.kafka_storage_error, (full_code, len(accepted))
            assert broker.alive
            (tmpfs / "ballast").unlink()
            # Space is back: the same acknowledgement, retried.
            r = m.acknowledge({0: [(failed_at, failed_at, ACCEPT)]})
            retried = r.error_code or r.responses[0].partitions[0].error_code
            # strom keeps the failed log dir offline until a restart (Kafka, with its only log dir
            # failed, halts): the retry is refused with an error code, never UNKNOWN_SERVER_ERROR.
            assert retried != ErrorCode.unknown_server_error
            log_ = logging.getLogger(__name__)
            log_.info("acknowledgement retried after space returned: error code %d", int(retried))
            if retry_codes is not None:
                retry_codes.append(int(retried))
            if retried == 0:
                accepted.add(failed_at)
        finally:
            m.close()
        log = broker.log_text()
        broker.stop()
        broker.start()
        again = _collect_all(broker, group, topic_id, n - len(accepted))
        assert sorted(again) == sorted(set(range(n)) - accepted), (len(again), n - len(accepted))
        return log
    finally:
        broker.kill()


def test_full_disk_during_share_state_writes(tmpfs: Path) -> None:
    log = _full_disk_scenario(tmpfs)
    errors = [ln for ln in log.splitlines() if " ERROR " in ln]
    # One ERROR: the log dir going offline (as tests/faults/test_disk_full.py expects).
    assert len(errors) == 1 and "is now offline" in errors[0], errors


def test_full_disk_share_state_write_logs_no_traceback(tmpfs: Path) -> None:
    log = _full_disk_scenario(tmpfs)
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.xfail(strict=True, reason=(
    "the retry after space returns is refused with UNKNOWN_TOPIC_OR_PARTITION: "
    "SharePartitionManager._persist drops the in-memory share partition (with the member's "
    "acquisitions) on any failed state write, and the log dir stays offline until a restart "
    "(core/log/dir_failure.py), so even a kept partition would get KAFKA_STORAGE_ERROR"))
def test_full_disk_acknowledgement_retry_succeeds_once_space_is_back(tmpfs: Path) -> None:
    codes: list[int] = []
    _full_disk_scenario(tmpfs, codes)
    assert codes == [0], [ErrorCode(c).name for c in codes]
