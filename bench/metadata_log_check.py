"""What the metadata log check costs at start-up, beside the recovery it runs before.

Every start scans ``__cluster_metadata-0`` (``strom.core.raft.log.check_metadata_log``) before
``Log`` recovery re-validates the same batches; this prints both on one synthetic log of
single-record batches (a controller request is one batch) so the ratio shows what the check
adds::

    python bench/metadata_log_check.py                  # 200,000 batches
    python bench/metadata_log_check.py --batches 50000 --value-bytes 400
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from strom.core.config import LogConfig
from strom.core.log.log import Log
from strom.core.raft.log import check_metadata_log, scan_metadata_log
from strom.core.records.builder import SimpleRecord, build_batch


def build(directory: Path, batches: int, value_bytes: int) -> int:
    directory.mkdir(parents=True)
    value = b"x" * value_bytes
    data = b"".join(build_batch([SimpleRecord(None, value, (), 1_700_000_000_000)], base_offset=i,
                                partition_leader_epoch=1) for i in range(batches))
    (directory / f"{0:020d}.log").write_bytes(data)
    return len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=200_000)
    parser.add_argument("--value-bytes", type=int, default=150)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="strom-bench-") as tmp:
        part = Path(tmp) / "__cluster_metadata-0"
        size = build(part, args.batches, args.value_bytes)
        t0 = time.perf_counter()
        check_metadata_log(part, high_watermark=args.batches, snapshot_end_offset=0)
        check_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        log = Log(part, LogConfig.build(None, {"retention.ms": -1}), recovery_point=0, had_clean_shutdown=False)
        recover_s = time.perf_counter() - t0
        assert log.log_end_offset == args.batches
        log.close()
        # Damage at the very start: the scan then also searches the rest for valid batches.
        seg = part / f"{0:020d}.log"
        data = bytearray(seg.read_bytes())
        data[100] ^= 0xFF
        seg.write_bytes(bytes(data))
        t0 = time.perf_counter()
        scan = scan_metadata_log(part)
        damaged_s = time.perf_counter() - t0
        assert scan.damage is not None and len(scan.damage.later) == args.batches - 1
    mb = size / 1e6
    print(f"metadata log: {args.batches:,} batches, {mb:.1f} MB")
    print(f"check (clean log)           {check_s:7.3f} s  {check_s / args.batches * 1e6:6.2f} us/batch  {mb / check_s:7.1f} MB/s")
    print(f"Log recovery (same log)     {recover_s:7.3f} s  {recover_s / args.batches * 1e6:6.2f} us/batch  "
          f"{mb / recover_s:7.1f} MB/s")
    print(f"check / recovery            {check_s / recover_s:7.2f}x")
    print(f"scan with damage at byte 100 {damaged_s:6.3f} s (resyncs and validates the {args.batches - 1:,} batches after it)")


if __name__ == "__main__":
    main()
