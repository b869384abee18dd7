"""Remote-tier read throughput: the S3 RemoteStorageManager against the raw limit (issue 21, item 8).

Stage 1 (no ``--broker``): segment files are uploaded through the chunked manager to moto's S3
server (in this process's threads), then read back whole, in the same run, two ways:

* ``raw``: boto3 ``GetObject`` of the same ``.log`` objects — what the endpoint can serve;
* ``rsm``: ``fetch_log_segment`` of each segment — ranged GETs by chunk groups, de-chunked (and
  decompressed with ``--compression``).

The figure is rsm/raw (issue 21's goal for the consumer path: >= 0.8x, floor 0.5x).

Stage 2 (``--broker``), issue 21 item 8 itself, on strom's broker process with moto's S3 server
(``--moto-process``: in a process of its own, as a real endpoint is; the recorded runs use it).
Each figure is printed as target / ceiling / result, the ceiling measured in the same run:

* (b) produce throughput, confluent-kafka, ``--size`` MiB to each of: a plain topic, a
  ``remote.storage.enable`` topic (``local.retention.bytes=1``) whose closed segments are copied
  to S3 meanwhile, and the plain topic again while another process copies its closed segments to
  moto with raw boto3 as they close, making the requests strom's copier makes (the ceiling: what
  moving the bytes to S3 costs this machine, nothing of strom's). In rounds of 256 MiB passes
  whose order rotates; each pass starts once the copies of the one before are done. Target
  tiered/plain >= 0.9x; it prints CPU ms per MiB of the broker, moto and the raw uploader,
  copies included.
* (a) once only the tiered topic's active segment is left on disk, a confluent-kafka consumer
  reads it from offset 0 to the local log start (all of it from S3 through the broker), against
  boto3 GETs of the same ``.log`` objects from the same server in the same run: consumer/raw
  (goal >= 0.8x, floor 0.5x). All rates count the same bytes (the remote ``.log`` objects). The
  ceiling is the lower of two rates: the raw GETs of strom's requests (per segment the manifest
  and the ``.log`` object whole: strom's reader makes exactly these for a sequential consumer,
  which needs no offset index; the broker logs its GETs per segment at close and this prints it) and the same records consumed
  from a plain topic on the broker's disk (Fetch, the response and the client without S3). Raw
  GETs run before and after the consumer; the faster counts. The broker runs with a memory chunk
  cache of 256 MiB and 128 MiB of prefetch (``CACHE_DEFAULTS``; ``--no-cache``, ``--rsm
  KEY=VALUE``). The consumer's config: ``max.partition.fetch.bytes`` 16 MiB (``--fetch-mib``),
  ``fetch.max.bytes`` 64 MiB, the same for the remote and the local pass. It prints CPU ms per
  MiB of the broker, this process and moto's: on this 2-CPU machine the remote path is CPU-bound
  (broker + client + moto ~1.5 ms/MiB against ~0.55 for the raw GETs, which use one stream);
  each small GET costs ~2 ms of CPU on each side. ``--warm`` consumes the tiered topic again
  from the chunk cache.

    python bench/tiered_fetch.py                          # 256 MiB in 32 MiB segments
    python bench/tiered_fetch.py --broker --moto-process  # stage 2, the full run (the recorded one)
    python bench/tiered_fetch.py --broker --quick         # stage 2, 256 MiB, no produce comparison
    python bench/tiered_fetch.py --broker --moto-process --no-produce-compare   # (a) alone, moto apart
    python bench/tiered_fetch.py --mib 1024 --segment-mib 64 --chunk-kib 4096 --compression
    python bench/tiered_fetch.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from moto.server import ThreadedMotoServer

from strom.core.testing import BrokerProcess, wait_for
from strom.plugins.hookspecs.storage import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from strom.tiered.chunked_rsm import ChunkedRemoteStorageManager

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("tiered_fetch")
MIB = 1024 * 1024
BUCKET = "bench"


def run(total_mib: int, segment_mib: int, chunk_kib: int, compression: bool, rounds: int) -> dict[str, float]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    key_id, secret = "bench", "bench"  # moto takes any credentials
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                      aws_secret_access_key=secret)
    s3.create_bucket(Bucket=BUCKET)
    rsm = ChunkedRemoteStorageManager({
        "storage.backend.class": "s3", "storage.s3.bucket.name": BUCKET, "storage.s3.region": "us-east-1",
        "storage.s3.endpoint.url": endpoint, "storage.s3.path.style.access.enabled": "true",
        "storage.aws.access.key.id": key_id, "storage.aws.secret.access.key": secret,
        "chunk.size": str(chunk_kib * 1024), "compression.enabled": str(compression).lower()})
    tip = TopicIdPartition(uuid.uuid4(), "bench", 0)
    segments: list[RemoteLogSegmentMetadata] = []
    try:
        with tempfile.TemporaryDirectory(prefix="tiered-fetch-") as tmp:
            base = Path(tmp)
            for i in range(max(1, total_mib // segment_mib)):
                files = {s: base / f"{i:020d}{s}" for s in (".log", ".index", ".timeindex", ".snapshot")}
                # Half random, half repeated: a log that compresses somewhat, as record batches do.
                block = os.urandom(MIB // 2) + bytes(MIB // 2)
                with open(files[".log"], "wb") as f:
                    for _ in range(segment_mib):
                        f.write(block)
                for s in (".index", ".timeindex", ".snapshot"):
                    files[s].write_bytes(b"")
                m = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), i * 1000, i * 1000 + 999, 0, 1, 0,
                                             segment_mib * MIB, {0: i * 1000})
                rsm.copy_log_segment_data(m, LogSegmentData(files[".log"], files[".index"], files[".timeindex"], None,
                                                            files[".snapshot"], b"0\n0\n"))
                files[".log"].unlink()
                segments.append(m)
        total = len(segments) * segment_mib * MIB
        best = {"raw": 0.0, "rsm": 0.0}
        for _ in range(rounds):
            start = time.perf_counter()
            for m in segments:
                body = s3.get_object(Bucket=BUCKET, Key=rsm.object_key(m, "log"))["Body"]
                while body.read(MIB):
                    pass
            best["raw"] = max(best["raw"], total / MIB / (time.perf_counter() - start))
            start = time.perf_counter()
            for m in segments:
                with rsm.fetch_log_segment(m, 0) as stream:
                    while stream.read(MIB):
                        pass
            best["rsm"] = max(best["rsm"], total / MIB / (time.perf_counter() - start))
        return {"mib": total / MIB, "raw_mib_s": best["raw"], "rsm_mib_s": best["rsm"],
                "ratio": best["rsm"] / best["raw"]}
    finally:
        rsm.close()
        server.stop()


def _produce(bootstrap: str, topic: str, total: int, value: bytes) -> float:
    """Produce ``total`` bytes of ``value`` records; returns MiB/s from the first send to the last ack."""
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 262144})
    start = time.perf_counter()
    for _ in range(total // len(value)):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda e, m: errors.append(e) if e else None)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(600) or errors:
        raise RuntimeError(f"produce to {topic} failed: {errors[:3]}")
    rate = total / MIB / (time.perf_counter() - start)
    del producer  # destroyed now, not after the broker stops
    return rate


PASS_MIB = 256  # one produce pass of the (b) comparison

CACHE_DEFAULTS = {  # the chunk cache the broker stage runs with (Aiven's keys, under rsm.config.)
    "fetch.chunk.cache.class": "io.aiven.kafka.tieredstorage.fetch.cache.MemoryChunkCache",
    "fetch.chunk.cache.size": str(256 * MIB),
    # 4 segments of 32 MiB ahead: with 64 MiB a sequential consumer caught up with the GETs in flight
    # on ~1 read in 4 (18 of 64 reads waited for S3 on a 1 GiB run; 5 of 64 with 128 MiB).
    "fetch.chunk.cache.prefetch.max.size": str(128 * MIB),
}


def _consume(bootstrap: str, topic: str, end_offset: int, fetch_mib: int) -> float:
    """Seconds a confluent-kafka consumer takes from offset 0 to ``end_offset`` (exclusive)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 64 * MIB, "max.partition.fetch.bytes": fetch_mib * MIB,
                         "receive.message.max.bytes": 70 * MIB, "queued.max.messages.kbytes": 262144})
    consumer.assign([TopicPartition(topic, 0, 0)])
    last = -1
    start = time.perf_counter()
    try:
        # poll, not consume(n, timeout): consume waits out its timeout for a batch the end of
        # the data cannot fill (1 s counted against a ~1 s read).
        while last < end_offset - 1:
            m = consumer.poll(10.0)
            if m is None:
                raise RuntimeError(f"{topic}: no record for 10 s at offset {last + 1}")
            if m.error() is not None:
                raise RuntimeError(str(m.error()))
            last = m.offset() or 0
        return time.perf_counter() - start
    finally:
        consumer.close()


class _MotoServer:
    """moto's S3 server on a free port: in threads of this process (as the tests run it), or in a
    process of its own (``--moto-process``: S3 apart from the consumer, as a real endpoint is; in
    this process it shares the interpreter lock with the consumer's poll loop)."""

    def __init__(self, own_process: bool) -> None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.process: subprocess.Popen[str] | None = None
        self.threaded: ThreadedMotoServer | None = None
        if own_process:
            self.process = subprocess.Popen([sys.executable, "-c", _MOTO_MAIN], stdout=subprocess.PIPE, text=True)
            assert self.process.stdout is not None
            port = int(self.process.stdout.readline())
            self.endpoint = f"http://127.0.0.1:{port}"
        else:
            self.threaded = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            self.threaded.start()
            host, port = self.threaded.get_host_and_port()
            self.endpoint = f"http://{host}:{port}"

    def stop(self) -> None:
        if self.threaded is not None:
            self.threaded.stop()
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)


_MOTO_MAIN = """
import logging, threading
logging.getLogger("werkzeug").setLevel(logging.WARNING)
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
threading.Event().wait()  # until terminated
"""


_UPLOADER_MAIN = """
import sys, threading, time
from pathlib import Path
import boto3
from botocore.config import Config
endpoint, key_id, secret, bucket, partition_dir = sys.argv[1:6]
# The client options strom's S3Storage uses (no SHA-256 of the body for the signature).
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                  aws_secret_access_key=secret, config=Config(s3={"payload_signing_enabled": False}))
directory = Path(partition_dir)
PART = 25 * 1024 * 1024  # storage.s3.multipart.upload.part.size's default, as strom's copier uses it
def put(path):  # the requests strom's copier makes for a segment, with raw boto3
    data = path.read_bytes()
    key = f"ceiling/{path.name}.put"
    if len(data) <= PART:
        s3.put_object(Bucket=bucket, Key=key, Body=data)
    else:  # multipart: parts of PART, the last one up to two parts' worth less one byte
        upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        parts, at = [], 0
        while at < len(data):
            n = len(data) - at if len(data) - at < 2 * PART else PART
            etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=len(parts) + 1,
                                  Body=data[at:at + n])["ETag"]
            parts.append({"ETag": etag, "PartNumber": len(parts) + 1})
            at += n
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts})
    indexes = b"".join(path.with_suffix(s).read_bytes() for s in (".index", ".timeindex")
                       if path.with_suffix(s).exists())
    s3.put_object(Bucket=bucket, Key=key + ".indexes", Body=indexes)
    s3.put_object(Bucket=bucket, Key=key + ".manifest", Body=b"{}" * 512)
def closed():  # the segment files of the partition but the active (last) one
    return sorted(directory.glob("*.log"))[:-1]
print("ready", flush=True)
for line in sys.stdin:  # "go": upload what closes from now on, until "stop" on the next line
    done = set(closed())
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    sent = 0
    while True:
        stopping = stop.is_set()
        new = [p for p in closed() if p not in done]
        for path in new:
            put(path)
            done.add(path)
            sent += path.stat().st_size
        if stopping and not new:
            break
        if not new:
            time.sleep(0.01)  # polling the directory (a bench helper, not a test)
    print(f"done {sent}", flush=True)
"""


class _RawUploader:
    """A process copying the plain topic's segments to moto with raw boto3 as they close (read
    from the broker's disk, as the copier does), while the plain topic is produced to: the produce
    ceiling of a broker whose closed segments go to S3, with nothing of strom's tier. It makes the
    requests strom's copier makes per segment (a multipart upload in 25 MiB parts above 25 MiB,
    else ``put_object``; a PUT of the indexes and one of a ~1 KiB manifest): moto's cost differs
    by request shape (a multipart completion joins and checksums the parts)."""

    def __init__(self, endpoint: str, key_id: str, secret: str, partition_dir: Path) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _UPLOADER_MAIN, endpoint, key_id, secret, BUCKET,
                                         str(partition_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout is not None and self.process.stdin is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        if self.stdout.readline().strip() != "ready":
            raise RuntimeError("the raw uploader did not start")

    def start(self) -> None:
        self.stdin.write("go\n")
        self.stdin.flush()

    def finish(self) -> int:
        """Stop after the segments closed so far; the bytes uploaded."""
        self.stdin.write("stop\n")
        self.stdin.flush()
        line = self.stdout.readline().split()
        if not line or line[0] != "done":
            raise RuntimeError("the raw uploader failed")
        return int(line[1])

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(60)


class _CpuMeter:
    """CPU seconds (user + system) of the broker process, of this one, of moto's server when it
    runs in a process of its own (else 0: its CPU is this process's) and of any other process
    given, lap by lap."""

    def __init__(self, broker_pid: int, moto_pid: int | None, *others: int) -> None:
        self.pids = (broker_pid, moto_pid, *others)
        self.last = self._now()

    @staticmethod
    def _of(pid: int | None) -> float:
        if pid is None:
            return 0.0
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _now(self) -> tuple[float, ...]:
        own = os.times()
        return (self._of(self.pids[0]), own.user + own.system, *(self._of(p) for p in self.pids[1:]))

    def lap(self) -> tuple[float, ...]:
        now = self._now()
        lap = tuple(a - b for a, b in zip(now, self.last, strict=True))
        self.last = now
        return lap


def _raw_gets(s3: S3Client, keys: list[str], same_requests: bool = False) -> tuple[int, float]:
    """boto3 GETs of the whole ``.log`` objects, read in 1 MiB pieces: (bytes, seconds). With
    ``same_requests`` each segment's ``.rsm-manifest`` object is read whole first, as strom's
    reader does for a sequential consumer (its GETs per segment: the manifest, the ``.log``
    object in one request): the raw cost of strom's requests. Only the ``.log`` bytes are
    counted, as for the consumer."""
    start = time.perf_counter()
    n = 0
    for key in keys:
        if same_requests:
            s3.get_object(Bucket=BUCKET, Key=key.removesuffix(".log") + ".rsm-manifest")["Body"].read()
        body = s3.get_object(Bucket=BUCKET, Key=key)["Body"]
        while piece := body.read(MIB):
            n += len(piece)
    return n, time.perf_counter() - start


def broker_run(size_mib: int, segment_mib: int, chunk_kib: int, fetch_mib: int = 16, *,
               compare_produce: bool = True, rsm_extra: dict[str, str] | None = None,
               moto_process: bool = False, warm: bool = False) -> dict[str, float]:
    """Stage 2: strom's broker with the S3 tier on moto's server (see the module docstring)."""
    server = _MotoServer(own_process=moto_process)
    endpoint = server.endpoint
    key_id, secret = "bench", "bench"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                      aws_secret_access_key=secret)
    s3.create_bucket(Bucket=BUCKET)
    config = {
        "remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "500",
        "log.retention.check.interval.ms": "1000",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager",
        "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
        "rsm.config.storage.s3.bucket.name": BUCKET, "rsm.config.storage.s3.region": "us-east-1",
        "rsm.config.storage.s3.endpoint.url": endpoint, "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.aws.access.key.id": key_id, "rsm.config.storage.aws.secret.access.key": secret,
        "rsm.config.chunk.size": str(chunk_kib * 1024),
        **{f"rsm.config.{k}": v for k, v in (rsm_extra or {}).items()},
    }
    segment = str(segment_mib * MIB)
    total = size_mib * MIB
    value = os.urandom(64 * 1024)  # incompressible, as a log of already-compressed batches
    try:
        with tempfile.TemporaryDirectory(prefix="tiered-broker-") as tmp, \
                BrokerProcess(Path(tmp) / "broker", config=config, startup_timeout=60) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for f in admin.create_topics([
                    NewTopic("plain", 1, 1, config={"segment.bytes": segment}),
                    NewTopic("tiered", 1, 1, config={"segment.bytes": segment, "remote.storage.enable": "true",
                                                     "local.retention.bytes": "1"})]).values():
                f.result(60)
            if compare_produce:
                _produce(broker.bootstrap, "plain", total // 8, value)  # warm-up: the first producer pays for it
                # Rounds of three passes of PASS_MIB each, the order rotating (plain, tiered,
                # ceiling; tiered, ceiling, plain; ...): the shared machine's drift falls on all
                # three alike. The ceiling: the plain topic while another process copies its
                # closed segments to moto with raw boto3 (what moving the bytes to S3 costs this
                # machine, nothing of strom's). Each pass starts with the copies of the one before
                # done (neither the copier nor the raw uploader runs into the next pass).
                kinds = ("plain", "tiered", "ceiling")
                rates: dict[str, list[float]] = {k: [] for k in kinds}
                uploader = _RawUploader(endpoint, key_id, secret, Path(tmp) / "broker" / "logs" / "plain-0")
                tiered_dir = Path(tmp) / "broker" / "logs" / "tiered-0"
                piece = min(PASS_MIB * MIB, total)
                # CPU of each kind's passes, copies included (to the end of the wait below): the
                # broker, moto and the raw uploader (the copy's cost outside the broker).
                meter = _CpuMeter(broker.pid, server.process.pid if server.process is not None else None,
                                  uploader.process.pid)
                spent = {k: [0.0, 0.0, 0.0] for k in kinds}
                try:
                    for r in range(max(1, total // piece)):
                        for kind in kinds[r % 3:] + kinds[:r % 3]:
                            log.debug("produce pass: %s (broker pid %d)", kind, broker.pid)
                            if kind == "ceiling":
                                uploader.start()
                                rates[kind].append(_produce(broker.bootstrap, "plain", piece, value))
                                uploader.finish()
                            else:
                                rates[kind].append(_produce(broker.bootstrap, kind, piece, value))
                            wait_for(lambda: len(list(tiered_dir.glob("*.log"))) <= 1, 600, "the tiered copies")
                            broker_s, _, moto_s, uploader_s = meter.lap()
                            spent[kind] = [a + b for a, b in zip(spent[kind], (broker_s, moto_s, uploader_s),
                                                                 strict=True)]
                finally:
                    uploader.close()
                # Each kind's rate: its bytes over its time (the harmonic mean of its passes).
                plain, tiered, ceiling = (len(rates[k]) / sum(1 / r for r in rates[k]) for k in kinds)
                log.info("produce: plain %.0f MiB/s, tiered %.0f MiB/s, plain while raw boto3 copies the same "
                         "segments %.0f MiB/s (passes of %d MiB: %s)", plain, tiered, ceiling, piece // MIB,
                         "; ".join(f"{k} {' '.join(f'{r:.0f}' for r in rates[k])}" for k in kinds))
                produced_mib = len(rates["plain"]) * piece / MIB
                log.info("produce: CPU ms per MiB (broker, moto, raw uploader), copies included: %s",
                         "; ".join(f"{k} " + ", ".join(f"{1000 * x / produced_mib:.2f}" for x in spent[k])
                                   for k in kinds))
            else:
                tiered = _produce(broker.bootstrap, "tiered", total, value)
                plain = _produce(broker.bootstrap, "plain", total, value)
                ceiling = float("nan")
            partition_dir = Path(tmp) / "broker" / "logs" / "tiered-0"
            wait_for(lambda: len(list(partition_dir.glob("*.log"))) == 1, 600, "the tiered topic copied to S3")
            local_start = int(next(partition_dir.glob("*.log")).name[:20])
            keys = sorted(o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
                          for o in page.get("Contents", []) if o["Key"].endswith(".log"))
            # The raw GETs before and after the consumer (the shared machine drifts); the better counts.
            cpu = _CpuMeter(broker.pid, server.process.pid if server.process is not None else None)
            remote_bytes, raw_s = _raw_gets(s3, keys)
            raw_cpu = cpu.lap()
            same_s = _raw_gets(s3, keys, same_requests=True)[1]
            same_cpu = cpu.lap()
            log.info("consuming %d MiB from S3 through the broker (pid %d)", remote_bytes // MIB, broker.pid)
            consumed_s = _consume(broker.bootstrap, "tiered", local_start, fetch_mib)
            consumed_cpu = cpu.lap()
            if warm:
                # Again, with what the chunk cache kept: the remote path's cost without S3 GETs.
                warm_s = _consume(broker.bootstrap, "tiered", local_start, fetch_mib)
                warm_cpu = cpu.lap()
                log.info("consumer from S3 again (chunk cache warm): %.0f MiB/s, broker CPU %.2f ms/MiB",
                         remote_bytes / MIB / warm_s, 1000 * warm_cpu[0] / (remote_bytes / MIB))
            raw_s = min(raw_s, _raw_gets(s3, keys)[1])
            same_s = min(same_s, _raw_gets(s3, keys, same_requests=True)[1])
            cpu.lap()
            # What the broker serves from its own disk, the same records, in the same run: the
            # bound the remote path cannot pass (Fetch, the response and the client are the same).
            local_s = _consume(broker.bootstrap, "plain", local_start, fetch_mib)
            local_cpu = cpu.lap()
            mib = remote_bytes / MIB
            log.info("CPU ms per MiB (broker process, this process (the client, and moto's server without "
                     "--moto-process), moto's process): raw GET %.2f, %.2f, %.2f; raw GETs of strom's requests %.2f, "
                     "%.2f, %.2f; consumer from S3 %.2f, %.2f, %.2f; consumer from the broker's disk %.2f, %.2f, %.2f",
                     *(1000 * x / mib for x in (*raw_cpu, *same_cpu, *consumed_cpu, *local_cpu)))
            raw, same, consumed, local = (remote_bytes / MIB / t for t in (raw_s, same_s, consumed_s, local_s))
            for line in broker.log_text().splitlines():
                if " WARNING " in line or " ERROR " in line:
                    log.warning("broker: %s", line)
            log.info("fetch from S3: raw GET %.0f MiB/s (with each segment's manifest GET, as strom "
                     "requests them: %.0f MiB/s), consumer through the broker %.0f MiB/s, the same records "
                     "from the broker's disk %.0f MiB/s (%d MiB, %d segments)",
                     raw, same, consumed, local, remote_bytes // MIB, len(keys))
            figures = {"remote_mib": remote_bytes / MIB, "raw_mib_s": raw, "raw_same_requests_mib_s": same,
                       "fetch_ceiling_mib_s": min(same, local), "consumer_mib_s": consumed,
                       "fetch_ratio": consumed / raw, "local_consumer_mib_s": local, "remote_local_ratio": consumed / local,
                       "produce_plain_mib_s": plain, "produce_tiered_mib_s": tiered, "produce_ratio": tiered / plain,
                       "produce_ceiling_mib_s": ceiling, "produce_ceiling_ratio": ceiling / plain}
        # The broker logs at close how its remote reads went (from memory on the event loop, or pooled).
        for line in broker.log_text().splitlines():
            if "remote reads: " in line or "S3 requests: " in line:
                log.info("broker: %s", line)
        return figures
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--segment-mib", type=int, default=32)
    parser.add_argument("--chunk-kib", type=int, default=4096)
    parser.add_argument("--compression", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--broker", action="store_true", help="stage 2: through strom's broker")
    parser.add_argument("--size", type=int, default=1024, help="stage 2: MiB produced to each topic")
    parser.add_argument("--fetch-mib", type=int, default=16, help="stage 2: the consumer's max.partition.fetch.bytes")
    parser.add_argument("--no-produce-compare", action="store_true",
                        help="stage 2: produce only to the tiered topic (no plain-vs-tiered figure)")
    parser.add_argument("--rsm", action="append", default=[], metavar="KEY=VALUE",
                        help="stage 2: an rsm.config. key over the defaults (e.g. fetch.chunk.cache.size=268435456)")
    parser.add_argument("--no-cache", action="store_true", help="stage 2: without the chunk cache and prefetch")
    parser.add_argument("--moto-process", action="store_true",
                        help="stage 2: moto's server in a process of its own (not in the consumer's)")
    parser.add_argument("--warm", action="store_true",
                        help="stage 2: consume the tiered topic a second time, from what the chunk cache kept")
    parser.add_argument("--quick", action="store_true",
                        help="stage 2: 256 MiB and no produce comparison (the full run: 1 GiB, --size 1024)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.broker:
        extra = {} if args.no_cache else dict(CACHE_DEFAULTS)
        extra.update(kv.split("=", 1) for kv in args.rsm)
        size = 256 if args.quick else args.size
        fig = broker_run(size, args.segment_mib, args.chunk_kib, args.fetch_mib,
                         compare_produce=not (args.quick or args.no_produce_compare), rsm_extra=extra,
                         moto_process=args.moto_process, warm=args.warm)
        log.info("consume %.0f MiB from S3: target 0.8x (floor 0.5x) of raw GET %.0f MiB/s = %.0f MiB/s; ceiling "
                 "%.0f MiB/s = %.2fx (the lower of: raw GETs of strom's requests %.0f, the broker's local disk %.0f); "
                 "result: consumer %.0f MiB/s = %.2fx of raw GET, %.2fx of the ceiling",
                 fig["remote_mib"], fig["raw_mib_s"], 0.8 * fig["raw_mib_s"], fig["fetch_ceiling_mib_s"],
                 fig["fetch_ceiling_mib_s"] / fig["raw_mib_s"], fig["raw_same_requests_mib_s"],
                 fig["local_consumer_mib_s"], fig["consumer_mib_s"], fig["fetch_ratio"],
                 fig["consumer_mib_s"] / fig["fetch_ceiling_mib_s"])
        if not (args.quick or args.no_produce_compare):
            log.info("produce: target 0.9x of plain %.0f MiB/s; ceiling (plain while raw boto3 PUTs the same bytes) "
                     "%.0f MiB/s = %.2fx; result: tiered %.0f MiB/s = %.2fx",
                     fig["produce_plain_mib_s"], fig["produce_ceiling_mib_s"], fig["produce_ceiling_ratio"],
                     fig["produce_tiered_mib_s"], fig["produce_ratio"])
        if args.json:
            args.json.write_text(json.dumps({**fig, "size": size, "segment_mib": args.segment_mib,
                                             "rsm": extra}, indent=2))
        return
    figures = run(args.mib, args.segment_mib, args.chunk_kib, args.compression, args.rounds)
    log.info("tiered_fetch: %.0f MiB from moto S3, chunk %d KiB, compression %s: raw GET %.0f MiB/s, "
             "RemoteStorageManager %.0f MiB/s, ratio %.2fx", figures["mib"], args.chunk_kib,
             "on" if args.compression else "off", figures["raw_mib_s"], figures["rsm_mib_s"], figures["ratio"])
    if args.json:
        args.json.write_text(json.dumps({**figures, **vars(args), "json": str(args.json)}, indent=2))


if __name__ == "__main__":
    main()
