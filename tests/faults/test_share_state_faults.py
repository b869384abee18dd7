"""Share-group state (__share_group_state) under faults, on a real broker process.

- kill -9 while a share member acknowledges (state writes in flight): after the restart every
  record whose ACCEPT was answered without error stays accepted (never redelivered) and every
  other record is delivered again (nothing lost).
- A torn or corrupted tail of the __share_group_state segment at restart: the broker starts, the
  partition is recovered as any topic's log is (the bad batch cut off), and the share state is
  what the valid prefix says: the last write's acknowledgements are gone, so its records come
  back; the earlier write's stay accepted. After a clean shutdown (log trusted, not re-validated)
  the share coordinator's load stops at the bad batch with an ERROR and keeps the prefix.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from pathlib import Path

import pytest
from diff_wire import WireClient
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
    stop = threading.Event()
    failure: list[BaseException] = []

    def acknowledger() -> None:
        # Small fetches, each record accepted alone: many state writes, one in flight at the kill.
        m = ShareMember(fresh_broker.bootstrap, group, topic_id)
        try:
            while not stop.is_set():
                r = m.fetch(max_wait_ms=200, max_records=5)
                for o in offsets_of(r):
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

    fresh_broker.start()
    again = _collect_all(fresh_broker, group, topic_id, RECORDS - len(answered))
    redelivered = answered & set(again)
    assert not redelivered, f"{len(redelivered)} acknowledged records redelivered: {sorted(redelivered)[:10]}"
    lost = set(range(RECORDS)) - answered - set(again)
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
