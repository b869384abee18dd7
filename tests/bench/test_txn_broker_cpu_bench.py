"""The broker-CPU benchmark (bench/txn_broker_cpu.py), in process and over a socket, scaled down.

Timing never decides a test. What is checked is what the figure rests on: every request the
script sends is answered without error, each workload sends the records and requests it claims,
and the final check of the partition logs (every record, one COMMIT marker per transaction,
nothing left unstable) passes, and fails when the logs do not hold what was sent.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import txn_broker_cpu

from strom.core.protocol import codec
from strom.core.records.batch import read_header

BENCH = Path(__file__).resolve().parents[2] / "bench"

JAVA = txn_broker_cpu.SHAPES["java"]


@pytest.mark.parametrize(("client", "requests_per_txn", "idempotent_per_request"), [
    ("java", 3 + 1, 3 * 148),            # 3 Produces of a 111-record batch per partition, EndTxn
    ("librdkafka", 1 + 3 + 1, 333),      # AddPartitionsToTxn, 3 Produces of one 333-record batch, EndTxn
])
def test_one_round_sends_and_stores_what_it_claims(client: str, requests_per_txn: int,
                                                   idempotent_per_request: int) -> None:
    shape = txn_broker_cpu.SHAPES[client]
    idem, txn = asyncio.run(txn_broker_cpu.one_round(transactions=6, slices=3, shape=shape))
    assert txn.records == 6 * 999 == 6 * shape.records_per_txn
    assert txn.requests == 6 * requests_per_txn
    assert idem.records == idem.requests * idempotent_per_request
    assert idem.records >= 6 * txn_broker_cpu.TXN_RECORDS - 3 * idempotent_per_request
    assert set(txn.parts_us) == set(shape.parts)
    assert all(us > 0 for us in txn.parts_us.values())
    assert idem.cpu_s > 0 and txn.cpu_s > 0


def test_librdkafka_shape_keeps_the_epoch_and_goes_on_with_sequences() -> None:
    """TV1 (EndTxn v1): one epoch for every transaction and each partition's sequence going on,
    one partition per Produce; the broker refuses anything else, and this says which part is wrong."""
    shape = txn_broker_cpu.SHAPES["librdkafka"]
    topic = txn_broker_cpu.Topic("t", uuid.uuid4())
    txn = txn_broker_cpu.Transactional(None, None, topic, 2, (7, 3), shape=shape)  # type: ignore[arg-type]
    for t, steps in enumerate(txn.plan):
        assert [kind for kind, _, _ in steps] == ["add", "produce", "produce", "produce", "end"]
        seen = []
        for _, _, frame in steps[1:4]:
            header, body_pos = codec.parse_header(frame)
            request = codec.decode_request(header, frame, body_pos)
            assert (header.api_version, request.topic_data[0].name) == (10, "t")
            (part,) = request.topic_data[0].partition_data
            h = read_header(part.records)
            seen.append((part.index, h.producer_id, h.producer_epoch, h.base_sequence, h.records_count))
        assert seen == [(p, 7, 3, t * 333, 333) for p in range(3)]


def test_verification_fails_on_logs_that_do_not_match() -> None:
    async def body() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            broker = await txn_broker_cpu.start_broker(Path(tmp))
            try:
                client = txn_broker_cpu.InProcessClient(broker)
                idem_topic = await txn_broker_cpu.create_topic(broker, txn_broker_cpu.TOPIC + "-idem")
                txn_topic = await txn_broker_cpu.create_topic(broker, txn_broker_cpu.TOPIC + "-txn")
                txn = txn_broker_cpu.Transactional(broker, client, txn_topic, 3,
                                                   await txn_broker_cpu.init_producer(client, txn_broker_cpu.TXN_ID))
                await txn.run(2)
                idem = txn_broker_cpu.Idempotent(client, idem_topic, 1000,
                                                 await txn_broker_cpu.init_producer(client, None))
                await idem.run(len(idem.frames))
                txn_broker_cpu.verify(broker, idem.round.records, txn.round.records, 2)
                with pytest.raises(RuntimeError, match="log end"):
                    txn_broker_cpu.verify(broker, idem.round.records, txn.round.records, 3)  # a marker short
                # A transaction left open keeps the last stable offset behind the log end.
                txn_broker_cpu.check_produce(await client.send(txn.first_produce(2)))
                opened = txn.round.records + JAVA.partitions_per_request * JAVA.txn_batch
                with pytest.raises(RuntimeError, match="last stable offset"):
                    txn_broker_cpu.verify(broker, idem.round.records, opened, 2)
            finally:
                await broker.stop()

    asyncio.run(body())


@pytest.mark.parametrize(("transport", "client", "gap_us", "requests"), [
    ("in-process", "java", 0, 16), pytest.param("socket", "java", 0, 16, marks=pytest.mark.broker),
    ("in-process", "librdkafka", 200, 20), pytest.param("socket", "librdkafka", 200, 20, marks=pytest.mark.broker),
])
def test_command_line_writes_json(tmp_path: Path, transport: str, client: str, gap_us: int, requests: int) -> None:
    out = tmp_path / "cpu.json"
    proc = subprocess.run([sys.executable, str(BENCH / "txn_broker_cpu.py"), "--transactions", "4", "--repeat", "1",
                           "--slices", "2", "--transport", transport, "--client", client, "--gap-us", str(gap_us),
                           "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "idempotent / transactional broker CPU" in proc.stdout
    assert f"{client}'s requests" in proc.stdout and ("idle before each request" in proc.stdout) == (gap_us > 0)
    assert ("where a transaction's broker CPU goes" in proc.stdout) == (transport == "in-process")
    data = json.loads(out.read_text())
    assert (data["transport"], data["client"], data["gap_us"]) == (transport, client, gap_us)
    (rnd,) = data["rounds"]
    assert rnd["transactional"]["records"] == 4 * 999 and rnd["transactional"]["requests"] == requests


@pytest.mark.broker  # a broker process
def test_socket_transport_counts_the_broker_process_and_checks_its_logs() -> None:
    """The same frames to a broker process over TCP: its CPU is read from its process CPU clock,
    the logs are checked with ListOffsets, and the check fails when they do not hold what was sent."""
    async def body() -> None:
        rounds = txn_broker_cpu.SocketRounds()
        try:
            client, names, idem, txn = await rounds.open_round(3)
            try:
                await txn_broker_cpu.alternate(idem, txn, 2, 2)
                assert txn.done == 2 and txn.round.requests == 8 and txn.round.parts_us == {}
                assert idem.round.cpu_s > 0 and txn.round.cpu_s > 0  # the broker's, not this process's
                await txn_broker_cpu.verify_over_socket(client, names, idem.round.records, txn.round.records, 2)
                with pytest.raises(RuntimeError, match="log end"):
                    await txn_broker_cpu.verify_over_socket(client, names, idem.round.records, txn.round.records, 3)
                txn_broker_cpu.check_produce(await client.send(txn.first_produce(2)))  # a transaction left open
                opened = txn.round.records + JAVA.partitions_per_request * JAVA.txn_batch
                with pytest.raises(RuntimeError, match="last stable offset"):
                    await txn_broker_cpu.verify_over_socket(client, names, idem.round.records, opened, 2)
            finally:
                client.close()
        finally:
            rounds.stop()

    asyncio.run(body())


def test_process_cpu_counts_every_thread_of_another_process() -> None:
    """A child whose worker thread has ended: that thread's CPU is still in the reading."""
    code = ("import threading, time, sys\n"
            "def work():\n"
            "    t = time.thread_time()\n"
            "    while time.thread_time() - t < 0.3: pass\n"  # far more than the interpreter's start
            "    print(time.thread_time() - t, flush=True)\n"
            "w = threading.Thread(target=work); w.start(); w.join()\n"
            "sys.stdin.readline()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        worker_cpu = float(child.stdout.readline())
        assert txn_broker_cpu.process_cpu_s(child.pid) >= 0.8 * worker_cpu > 0
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(30)
