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
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import txn_broker_cpu  # noqa: E402


def test_one_round_sends_and_stores_what_it_claims() -> None:
    idem, txn = asyncio.run(txn_broker_cpu.one_round(transactions=6, slices=3))
    per_txn = txn_broker_cpu.TXN_RECORDS // txn_broker_cpu.PARTITIONS // txn_broker_cpu.TXN_BATCH
    assert txn.records == 6 * per_txn * txn_broker_cpu.PARTITIONS * txn_broker_cpu.TXN_BATCH
    assert txn.requests == 6 * (per_txn + 1)  # the Produce requests and one EndTxn each
    per_request = txn_broker_cpu.PARTITIONS * txn_broker_cpu.IDEMPOTENT_BATCH
    assert idem.records == idem.requests * per_request
    assert idem.records == 6 * txn_broker_cpu.TXN_RECORDS // per_request * per_request
    assert set(txn.parts_us) == set(txn_broker_cpu.Transactional.PARTS)
    assert all(us > 0 for us in txn.parts_us.values())
    assert idem.cpu_s > 0 and txn.cpu_s > 0


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
                txn_broker_cpu.check_produce(await client.send(txn.plan[2][0][0]))
                opened = txn.round.records + txn_broker_cpu.PARTITIONS * txn_broker_cpu.TXN_BATCH
                with pytest.raises(RuntimeError, match="last stable offset"):
                    txn_broker_cpu.verify(broker, idem.round.records, opened, 2)
            finally:
                await broker.stop()

    asyncio.run(body())


@pytest.mark.parametrize("transport", ["in-process", "socket"])
def test_command_line_writes_json(tmp_path: Path, transport: str) -> None:
    out = tmp_path / "cpu.json"
    proc = subprocess.run([sys.executable, str(BENCH / "txn_broker_cpu.py"), "--transactions", "4", "--repeat", "1",
                           "--slices", "2", "--transport", transport, "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "idempotent / transactional broker CPU" in proc.stdout
    assert ("where a transaction's broker CPU goes" in proc.stdout) == (transport == "in-process")
    data = json.loads(out.read_text())
    assert data["transport"] == transport
    (rnd,) = data["rounds"]
    assert rnd["transactional"]["records"] == 4 * 999 and rnd["transactional"]["requests"] == 16


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
                txn_broker_cpu.check_produce(await client.send(txn.plan[2][0][0]))  # a transaction left open
                opened = txn.round.records + txn_broker_cpu.PARTITIONS * txn_broker_cpu.TXN_BATCH
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
