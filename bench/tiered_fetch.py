"""Remote-tier read throughput: the S3 RemoteStorageManager against the raw limit (issue 21, item 8).

Stage 1 (this script today): segment files are uploaded through the chunked manager to moto's S3
server (in this process's threads), then read back whole, in the same run, two ways:

* ``raw``: boto3 ``GetObject`` of the same ``.log`` objects — what the endpoint can serve;
* ``rsm``: ``fetch_log_segment`` of each segment — ranged GETs by chunk groups, de-chunked (and
  decompressed with ``--compression``).

The figure is rsm/raw (issue 21's goal for the consumer path: >= 0.8x, floor 0.5x). Stage 2,
consuming the same data through strom's broker with confluent-kafka, needs the broker's remote
fetch path (not wired yet) and will be added here.

    python bench/tiered_fetch.py                          # 256 MiB in 32 MiB segments
    python bench/tiered_fetch.py --mib 1024 --segment-mib 64 --chunk-kib 4096 --compression
    python bench/tiered_fetch.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
import uuid
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

from strom.plugins.hookspecs.storage import (
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from strom.tiered.chunked_rsm import ChunkedRemoteStorageManager

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--segment-mib", type=int, default=32)
    parser.add_argument("--chunk-kib", type=int, default=4096)
    parser.add_argument("--compression", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    figures = run(args.mib, args.segment_mib, args.chunk_kib, args.compression, args.rounds)
    print(f"tiered_fetch: {figures['mib']:.0f} MiB from moto S3, chunk {args.chunk_kib} KiB, "
          f"compression {'on' if args.compression else 'off'}: raw GET {figures['raw_mib_s']:.0f} MiB/s, "
          f"RemoteStorageManager {figures['rsm_mib_s']:.0f} MiB/s, ratio {figures['ratio']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({**figures, **vars(args), "json": str(args.json)}, indent=2))


if __name__ == "__main__":
    main()
