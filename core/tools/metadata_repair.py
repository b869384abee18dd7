"""``strom storage truncate-metadata``: the explicit way out of a corrupt metadata log.

A broker refuses to start when a batch of ``__cluster_metadata-0`` below its committed offset is
unreadable (:mod:`strom.core.raft.log`); it never trims committed metadata on its own. Kafka has
no tool for this (``kafka-storage.sh`` formats, ``kafka-metadata-shell.sh`` and
``kafka-dump-log.sh`` only read): a Kafka voter would refetch the data from the other voters,
which a single voter does not have. This command is that decision made by an operator:

* without ``--yes`` it lists what truncating at ``--offset`` drops, batch by batch, with each
  metadata record decoded (topics created or deleted, configs changed, brokers registered,
  ...), the damaged bytes that cannot be decoded, and what the latest snapshot keeps;
* with ``--yes`` it truncates the segment holding the offset, deletes the segments after it,
  lowers ``appliedOffset`` in ``quorum-state`` to the new end, and prints what it dropped.

It takes the metadata dir's ``.lock`` first, so it refuses to run beside a broker.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from strom.core.config import BrokerConfig
from strom.core.exceptions import LogDirLockedError
from strom.core.tools.common import ToolError, UsageError, parse_kv_list
from strom.exceptions import StromError

SEGMENT_EXTENSIONS = (".log", ".index", ".timeindex", ".txnindex")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``truncate-metadata`` to the ``strom storage`` subcommands."""
    p = sub.add_parser(
        "truncate-metadata", help="truncate a corrupt metadata log, listing what is dropped",
        description="Truncate the KRaft metadata log (__cluster_metadata-0) at --offset: the way out "
                    "when the broker refuses to start because a committed metadata batch is corrupt. "
                    "Without --yes it only lists what would be dropped (every record decoded); the "
                    "broker must be stopped. Records that the latest snapshot holds are kept.")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--metadata-log-dir", metavar="DIR",
                       help="the metadata.log.dir (as named in the broker's error; for `strom dev` "
                            "it is DATA_DIR/metadata)")
    where.add_argument("--config", "-c", metavar="FILE", help="broker config whose metadata.log.dir to repair")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override one broker config property (with --config); repeatable")
    p.add_argument("--offset", type=int, required=True, metavar="N",
                   help="first offset to drop (the offset the broker's error names); a batch that "
                        "straddles it is dropped whole")
    p.add_argument("--yes", action="store_true", help="truncate (without it nothing is changed)")
    p.set_defaults(func=cmd_truncate_metadata)


@dataclass(frozen=True, slots=True)
class Plan:
    """What truncating at ``offset`` means on disk."""

    offset: int                  # the effective first dropped offset (batch-aligned)
    path: Path                   # segment file cut at ``position``
    position: int
    deleted_segments: tuple[Path, ...]
    lines: tuple[str, ...]       # the listing printed to the operator
    dropped_records: int
    lost_records: int            # dropped and not in the latest snapshot


def cmd_truncate_metadata(args: argparse.Namespace) -> int:
    if args.offset < 0:
        raise UsageError(f"--offset must be >= 0, got {args.offset}")
    if args.config:
        metadata_dir = BrokerConfig.load(args.config, parse_kv_list(args.override, "--override")).metadata_dir
    else:
        metadata_dir = Path(args.metadata_log_dir)
    metadata_dir = Path(metadata_dir)
    from strom.core.log.dir_lock import lock_dirs, release_all
    from strom.core.raft.client import METADATA_PARTITION_DIR

    part_dir = metadata_dir / METADATA_PARTITION_DIR
    if not part_dir.is_dir():
        raise ToolError(f"{part_dir} does not exist: is {metadata_dir} the metadata.log.dir?")
    try:
        locks = lock_dirs([metadata_dir])
    except LogDirLockedError as e:
        raise ToolError(f"cannot repair while a broker runs: {e}") from None
    try:
        plan = plan_truncation(part_dir, args.offset)
        for line in plan.lines:
            print(line)
        if not args.yes:
            print(f"Dry run: nothing was changed. Run again with --yes to truncate {part_dir} at offset "
                  f"{plan.offset}.")
            return 0
        apply_truncation(part_dir, plan)
        print(f"Truncated the metadata log at offset {plan.offset} ({plan.path.name} cut at byte "
              f"{plan.position}, {len(plan.deleted_segments)} later segment(s) deleted): dropped "
              f"{plan.dropped_records} record(s), {plan.lost_records} of them not in the latest snapshot.")
        return 0
    except (StromError, OSError) as e:
        if isinstance(e, ToolError):
            raise
        raise ToolError(str(e)) from None
    finally:
        release_all(locks)


def plan_truncation(part_dir: Path, offset: int) -> Plan:
    """Work out (without changing anything) what truncating ``part_dir``'s log at ``offset`` drops."""
    from strom.core.raft.log import scan_metadata_log, segment_files
    from strom.core.raft.snapshot import list_snapshots

    scan = scan_metadata_log(part_dir)
    damage = scan.damage
    if damage is not None and offset > damage.offset:
        raise ToolError(f"--offset {offset} keeps the corrupt batch at offset {damage.offset} "
                        f"(byte {damage.position} of {damage.path}); truncate at {damage.offset} or below")
    if damage is None and offset >= scan.end_offset:
        raise ToolError(f"the metadata log in {part_dir} ends at offset {scan.end_offset} and has no damage: "
                        f"nothing at or after --offset {offset} to drop")
    kept = [b for b in scan.batches if b.header.last_offset < offset]
    dropped = [b for b in scan.batches if b.header.last_offset >= offset]
    if dropped:
        path, position, effective = dropped[0].path, dropped[0].position, dropped[0].header.base_offset
    else:
        assert damage is not None
        path, position, effective = damage.path, damage.position, damage.offset
    if kept:
        effective = max(effective, kept[-1].header.last_offset + 1)
    files = segment_files(part_dir)
    deleted = tuple(p for p in files if int(p.stem) > int(path.stem))
    snapshots = list_snapshots(part_dir)
    snapshot_end = snapshots[-1].end_offset if snapshots else 0
    names = _topic_names(scan.batches, damage.later if damage else ())

    lines = [f"Metadata log {part_dir}: truncating at offset {effective} "
             f"(byte {position} of {path.name}"
             + (f", deleting {', '.join(p.name for p in deleted)}" if deleted else "") + ") drops:"]
    dropped_records = lost_records = 0
    later = list(damage.later) if damage else []
    for batch in dropped:
        n, lost = _describe_batch(batch, names, snapshot_end, lines)
        dropped_records += n
        lost_records += lost
    if damage is not None:
        end_of_damage = later[0].position if later and later[0].path == damage.path else None
        size = (end_of_damage if end_of_damage is not None else damage.path.stat().st_size) - damage.position
        guessed = _guess_damaged(damage.path, damage.position, size, names)
        lines.append(f"  {size} byte(s) at byte {damage.position} of {damage.path.name}: not a valid batch "
                     f"({damage.reason}); " + ("what its records still read as, unverified:" if guessed
                                               else "its records cannot be decoded"))
        lines.extend(f"    ?: {text}" for text in guessed)
        for batch in later:
            n, lost = _describe_batch(batch, names, snapshot_end, lines)
            dropped_records += n
            lost_records += lost
    if snapshot_end > effective:
        lines.append(f"Records below offset {snapshot_end} are kept: the latest snapshot "
                     f"({snapshots[-1].file_name}) holds them.")
    elif snapshots:
        lines.append(f"The latest snapshot ({snapshots[-1].file_name}) ends at offset {snapshot_end}: it keeps none "
                     "of the dropped records.")
    return Plan(effective, path, position, deleted, tuple(lines), dropped_records, lost_records)


def apply_truncation(part_dir: Path, plan: Plan) -> None:
    """Cut the segment, delete later segments, lower the stored high watermark; fsync all of it."""
    from strom.core.log.checkpoint import fsync_dir
    from strom.core.raft.quorum_state import QuorumStateStore

    with open(plan.path, "r+b") as f:
        f.truncate(plan.position)
        f.flush()
        os.fsync(f.fileno())
    for seg in plan.deleted_segments:
        for ext in SEGMENT_EXTENSIONS:
            seg.with_suffix(ext).unlink(missing_ok=True)
    # The offset and time indexes of the cut segment are rebuilt at the next start: the metadata
    # log is always recovered from offset 0.
    store = QuorumStateStore(part_dir)
    state = store.read()
    if state is not None and state.high_watermark > plan.offset:
        import dataclasses

        store.write(dataclasses.replace(state, high_watermark=plan.offset))
    fsync_dir(part_dir)


def _guess_damaged(path: Path, position: int, size: int, names: dict[uuid.UUID, str]) -> list[str]:
    """Best effort: the records of a damaged batch whose framing is intact (a CRC mismatch
    usually means one bad byte), so the operator sees what the batch probably held."""
    from strom.core.metadata.records import decode_record
    from strom.core.records.builder import decode_batch

    with open(path, "rb") as f:
        data = os.pread(f.fileno(), size, position)
    try:
        batch = decode_batch(data, 0, check_crc=False)
    except Exception:  # garbage framing: nothing trustworthy to show
        return []
    if batch.header.is_control:
        return ["control batch (leader change)"]
    from strom.core.metadata.records import TopicRecord

    decoded: list[object] = []
    for rec in batch.records:
        if rec.value is None:
            continue
        try:
            decoded.append(decode_record(rec.value))
        except Exception as e:  # the damaged byte is in this record
            decoded.append(f"undecodable record ({e})")
    names = {**names, **{r.topic_id: r.name for r in decoded if isinstance(r, TopicRecord)}}
    return [r if isinstance(r, str) else describe_record(r, names) for r in decoded]


def _topic_names(*groups: Iterable[object]) -> dict[uuid.UUID, str]:
    from strom.core.metadata.records import TopicRecord

    names: dict[uuid.UUID, str] = {}
    for group in groups:
        for batch in group:
            for _offset, record in _records(batch):
                if isinstance(record, TopicRecord):
                    names[record.topic_id] = record.name
    return names


def _records(batch: object) -> list[tuple[int, object]]:
    from strom.core.metadata.records import decode_record
    from strom.core.raft.log import ScannedBatch
    from strom.core.records.builder import decode_batch

    assert isinstance(batch, ScannedBatch)
    h = batch.header
    if h.is_control:
        return []
    with open(batch.path, "rb") as f:
        data = os.pread(f.fileno(), h.size, batch.position)
    out: list[tuple[int, object]] = []
    for rec in decode_batch(data, 0, check_crc=False).records:
        if rec.value is None:
            continue
        try:
            record: object = decode_record(rec.value)
        except Exception as e:  # listing only: an undecodable record is named, not fatal
            record = f"undecodable record ({e})"
        out.append((h.base_offset + rec.offset_delta, record))
    return out


def _describe_batch(batch: object, names: dict[uuid.UUID, str], snapshot_end: int, lines: list[str]) -> tuple[int, int]:
    """Append the lines for one dropped batch; return (records, records not in the snapshot)."""
    from strom.core.raft.log import ScannedBatch

    assert isinstance(batch, ScannedBatch)
    h = batch.header
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(h.max_timestamp / 1000)) if h.max_timestamp > 0 else "?"
    kept = " (in the snapshot: kept)" if h.last_offset < snapshot_end else ""
    if h.is_control:
        lines.append(f"  offsets {h.base_offset}..{h.last_offset} (epoch {h.partition_leader_epoch}, {when} UTC): "
                     f"control batch (leader change){kept}")
        return 0, 0
    records = _records(batch)
    lines.append(f"  offsets {h.base_offset}..{h.last_offset} (epoch {h.partition_leader_epoch}, {when} UTC), "
                 f"{len(records)} record(s){kept}:")
    lost = 0
    for offset, record in records:
        lines.append(f"    {offset}: {describe_record(record, names)}")
        if offset >= snapshot_end:
            lost += 1
    return len(records), lost


def describe_record(record: object, names: dict[uuid.UUID, str]) -> str:
    """One line an operator reads: what the metadata record did."""
    from strom.core.metadata import records as r

    def topic(topic_id: uuid.UUID) -> str:
        return names.get(topic_id, f"topic id {topic_id}")

    resource = {2: "topic", 4: "broker", 8: "broker logger", 16: "client metrics", 32: "group"}
    if isinstance(record, r.TopicRecord):
        return f"topic {record.name} created (id {record.topic_id})"
    if isinstance(record, r.PartitionRecord):
        return (f"partition {topic(record.topic_id)}-{record.partition_id} created (replicas {record.replicas}, "
                f"leader {record.leader})")
    if isinstance(record, r.PartitionChangeRecord):
        return f"partition {topic(record.topic_id)}-{record.partition_id} changed (leader {record.leader}, isr {record.isr})"
    if isinstance(record, r.RemoveTopicRecord):
        return f"topic {topic(record.topic_id)} deleted"
    if isinstance(record, r.ConfigRecord):
        kind = resource.get(record.resource_type, f"resource type {record.resource_type}")
        target = f"{kind} {record.resource_name or '(default)'}"
        if record.value is None:
            return f"config {record.name} removed from {target}"
        return f"config {record.name}={record.value} set on {target}"
    if isinstance(record, r.RegisterBrokerRecord):
        return f"broker {record.broker_id} registered (broker epoch {record.broker_epoch})"
    if isinstance(record, r.FeatureLevelRecord):
        return f"feature {record.name} finalized at level {record.feature_level}"
    if isinstance(record, r.ProducerIdsRecord):
        return f"producer ids allocated up to {record.next_producer_id} (broker {record.broker_id})"
    text = repr(record)
    return text if len(text) <= 160 else text[:157] + "..."
