"""What the broker's Prometheus metrics cost on the produce path: records/s with metrics on vs off.

Two strom brokers from the same code, one with ``strom.metrics.listener`` set (scraped once a
second during its runs, as Prometheus would), one with it empty. confluent-kafka produces
``--records`` records of ``--size`` bytes (acks=1, linger.ms=5) to a topic of each, the brokers
taking turns in ABBA order for ``--rounds`` rounds so slow drift of the shared machine hits both
equally. Small records on purpose: many requests per MiB is the worst case for per-request
recording. Printed: records/s of each run, the totals and on/off, and the broker process's CPU
time per record (user+system from /proc, less sensitive to other load on a shared machine than
wall-clock throughput) with the produce requests the on-broker counted.

Run: ``python bench/metrics_overhead.py [--records 1500000] [--size 100] [--rounds 3] [--linger-ms 5]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.core.testing import BrokerProcess

log = logging.getLogger("bench.metrics_overhead")


def produce(bootstrap: str, topic: str, records: int, size: int, linger_ms: int = 5) -> float:
    """Seconds to produce and deliver ``records`` records."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": 1,
                         "queue.buffering.max.messages": 1000000})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records left undelivered")
    return time.perf_counter() - started


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_requests(url: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('kafka_network_requestmetrics_requests_total{request="Produce"'))


def scraper(url: str, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        with urllib.request.urlopen(url, timeout=10) as resp:
            resp.read()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1500000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--linger-ms", type=int, default=5, help="0: more, smaller produce requests")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory() as tmp, \
            BrokerProcess(Path(tmp) / "on", config={"strom.metrics.listener": "http://127.0.0.1:0"}) as on, \
            BrokerProcess(Path(tmp) / "off", config={"strom.metrics.listener": ""}) as off:
        assert on.wait_for_log("serving metrics on", 30)
        found = re.search(r"serving metrics on (http://\S+)", on.log_text())
        assert found is not None
        url = found.group(1)
        for proc in (on, off):
            admin = AdminClient({"bootstrap.servers": proc.bootstrap})
            for f in admin.create_topics([NewTopic("bench", 1, 1)]).values():
                f.result(15)
            produce(proc.bootstrap, "bench", 1000, args.size)  # warm-up
        totals = {"on": 0.0, "off": 0.0}
        cpu = {"on": 0.0, "off": 0.0}
        requests_before = produce_requests(url)
        order = ["on", "off", "off", "on"]
        for r in range(args.rounds):
            for which in order:
                proc = on if which == "on" else off
                stop = threading.Event()
                t = threading.Thread(target=scraper, args=(url, stop), daemon=True) if which == "on" else None
                if t is not None:
                    t.start()
                cpu_before = cpu_seconds(proc.pid)
                seconds = produce(proc.bootstrap, "bench", args.records, args.size, args.linger_ms)
                cpu[which] += cpu_seconds(proc.pid) - cpu_before
                stop.set()
                if t is not None:
                    t.join()
                totals[which] += seconds
                log.info("round %d metrics %-3s: %8.0f records/s", r + 1, which, args.records / seconds)
        n = args.records * 2 * args.rounds
        rate_on, rate_off = n / totals["on"], n / totals["off"]
        log.info("metrics on : %8.0f records/s", rate_on)
        log.info("metrics off: %8.0f records/s", rate_off)
        log.info("on/off     : %.3f", rate_on / rate_off)
        requests = produce_requests(url) - requests_before
        log.info("broker CPU per record: on %.3f us, off %.3f us (on/off %.3f); %d produce requests in the "
                 "on-broker's runs (%.0f records each)", cpu["on"] / n * 1e6, cpu["off"] / n * 1e6,
                 cpu["on"] / cpu["off"], requests, n / max(requests, 1))


if __name__ == "__main__":
    main()
