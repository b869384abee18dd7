"""Apache Kafka 4.3.1's ``kafka-dump-log`` (DumpLogSegments) finds nothing wrong in strom's files.

strom's broker writes the interchange workload (tests/helpers/interchange.py: a plain topic
from an idempotent producer, a compacted topic after compaction, a transactional topic with
committed and aborted transactions, a classic and a KIP-848 group's offsets, a finished
transaction) and stops cleanly. Then Kafka's own tool reads every file of the data directory,
one JVM per mode: ``--deep-iteration`` over every segment, index, transaction index and
producer snapshot of the user topics, ``--verify-index-only`` and ``--index-sanity-check``
over every index (the check a Kafka broker runs at start-up to decide on a rebuild),
``--offsets-decoder`` over ``__consumer_offsets``, ``--transaction-log-decoder`` over
``__transaction_state`` and ``--cluster-metadata-decoder`` over ``__cluster_metadata``
(segments and snapshots). A test fails on a non-zero exit, on anything on stderr, and on any
output line that reports a problem (an invalid batch, a mismatch, an index offset not found in
the log, trailing bytes, a record a decoder cannot read).

One report is not a problem: Kafka 4.3.1's tool says "Non-consecutive offsets ... -1 is
followed by N" for every segment whose first record is not offset 0, Kafka's own segments
included (its previous-offset starts at -1); only that exact pair is let through.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from interchange import dump_log, write_workload
from ref_fixtures import SHARED_BROKER_CONFIG, skip_without_java

from strom.core.testing import BrokerProcess

# Words of DumpLogSegments' reports: "isvalid: false", "Mismatches in", "The following indexed
# offsets are not found", "Found N invalid bytes", "Error at offset", "Non-consecutive offsets",
# "Found out of order timestamp", a decoder's "Unknown ..." or an exception.
PROBLEM = re.compile(r"isvalid: false|mismatch|not found|invalid bytes|error|exception|unknown|corrupt|"
                     r"non-consecutive|out of order|failed", re.IGNORECASE)
# Kafka 4.3.1's own files produce this pair for each segment not starting at offset 0.
_QUIRK_HEADER = re.compile(r"^Non-consecutive offsets in \S+$")
_QUIRK_PAIR = re.compile(r"^\s+-1 is followed by \d+$")


def problems(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of a DumpLogSegments run that report something wrong (the quirk left out)."""
    found = [f"exit code {result.returncode}"] if result.returncode != 0 else []
    err = result.stderr.splitlines()
    n = 0
    while n < len(err):
        line = err[n]
        if _QUIRK_HEADER.match(line):
            n += 1
            while n < len(err) and _QUIRK_PAIR.match(err[n]):
                n += 1
            continue
        if line.strip():
            found.append(f"stderr: {line}")
        n += 1
    found += [f"stdout: {line[:400]}" for line in result.stdout.splitlines()
              if PROBLEM.search(line) and not _QUIRK_HEADER.match(line)]
    return found


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A strom data directory (``logs/``, ``metadata/``) holding the workload, stopped cleanly."""
    skip_without_java()
    data = tmp_path_factory.mktemp("strom-dump")
    with BrokerProcess(data, config=SHARED_BROKER_CONFIG) as broker:
        write_workload(broker.bootstrap)
    yield data


def _files(root: Path, pattern: str, *suffixes: str) -> list[Path]:
    files = sorted(p for p in root.glob(pattern) if p.suffix in suffixes)
    assert files, f"no {suffixes} files under {root}/{pattern}"
    return files


SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def test_deep_iteration_of_user_topics(written: Path) -> None:
    files = _files(written / "logs", "ix-*/*", *SEGMENT_FILES)
    result = dump_log(files, "--deep-iteration")
    assert problems(result) == [], result.stdout[-3000:]
    # The transactional topic's markers were read as what they are.
    assert "endTxnMarker: COMMIT" in result.stdout and "endTxnMarker: ABORT" in result.stdout


def test_verify_index_only(written: Path) -> None:
    files = _files(written, "*/*/*", ".index", ".timeindex")
    result = dump_log(files, "--verify-index-only")
    assert problems(result) == [], result.stdout[-3000:]


def test_index_sanity_check(written: Path) -> None:
    files = _files(written, "*/*/*", ".index", ".timeindex", ".txnindex")
    result = dump_log(files, "--index-sanity-check")
    assert problems(result) == [], result.stdout[-3000:]
    indexes = [f for f in files if f.suffix != ".txnindex"]
    passed = result.stdout.count("passed sanity check.") + result.stdout.count(" is empty.")
    assert passed >= len(indexes), result.stdout[-3000:]


def test_offsets_decoder(written: Path) -> None:
    result = dump_log(_files(written / "logs", "__consumer_offsets-*/*", ".log"), "--offsets-decoder")
    assert problems(result) == [], result.stdout[-3000:]
    # Both groups' offsets decode as Kafka's OffsetCommit records.
    assert '"group":"ix-classic","topic":"ix-plain","partition":2}} payload: {"version":"3","data":{"offset":70' \
        in result.stdout
    assert '"group":"ix-kip848","topic":"ix-txn","partition":1}} payload: {"version":"3","data":{"offset":9' \
        in result.stdout


def test_transaction_log_decoder(written: Path) -> None:
    result = dump_log(_files(written / "logs", "__transaction_state-*/*", ".log"), "--transaction-log-decoder")
    assert problems(result) == [], result.stdout[-3000:]
    # The last state of the transactional id: transactionStatus 4 is CompleteCommit.
    last = [line for line in result.stdout.splitlines() if '"transactionalId":"ix-tx"' in line][-1]
    assert '"transactionStatus":4' in last, last


def test_cluster_metadata_decoder(written: Path) -> None:
    # The segments with their indexes and producer snapshots, any metadata snapshot
    # (<offset>-<epoch>.checkpoint) and the bootstrap snapshot.
    files = _files(written / "metadata", "__cluster_metadata-0/*", *SEGMENT_FILES, ".checkpoint")
    files += sorted((written / "metadata").glob("bootstrap.checkpoint"))
    result = dump_log(files, "--cluster-metadata-decoder")
    assert problems(result) == [], result.stdout[-3000:]
    assert '"type":"TOPIC_RECORD"' in result.stdout and '"name":"ix-compacted"' in result.stdout
    assert "KRaft bootstrap snapshot" in result.stdout


def test_partition_metadata_is_kafkas(written: Path) -> None:
    # Kafka's PartitionMetadataFile: "version: 0", a newline, "topic_id: " and the id, nothing after.
    files = sorted((written / "logs").glob("*/partition.metadata"))
    assert len(files) > 6
    for f in files:
        assert re.fullmatch(rb"version: 0\ntopic_id: [A-Za-z0-9_-]{22}", f.read_bytes()), (f, f.read_bytes())
