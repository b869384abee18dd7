"""Committed offsets of every group of this coordinator, and transactional offsets pending a marker.

Offsets are ``OffsetCommitKey``/``OffsetCommitValue`` records in ``__consumer_offsets``; this
store is their in-memory image. A commit is applied here only after its records are appended
(or while replaying them at start-up). Transactional commits (TxnOffsetCommit) stay in
``pending`` under their producer id until the transaction's COMMIT or ABORT marker lands in
the partition; OffsetFetch with ``require_stable`` reports UNSTABLE_OFFSET_COMMIT meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


class OffsetStore:
    """group id -> partition -> committed offset, plus pending transactional offsets."""

    def __init__(self) -> None:
        self.committed: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        # producer id -> group id -> partition -> offset
        self.pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}

    # -- committed ----------------------------------------------------------------------------

    def put(self, group_id: str, tp: TopicPartition, value: OffsetAndMetadata | None) -> None:
        """Apply one commit (``None`` = tombstone)."""
        if value is None:
            offsets = self.committed.get(group_id)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self.committed[group_id]
            return
        self.committed.setdefault(group_id, {})[tp] = value

    def get(self, group_id: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self.committed.get(group_id, {}).get(tp)

    def of_group(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self.committed.get(group_id, {}))

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.committed.get(group_id)) or self.has_pending(group_id)

    def delete_group(self, group_id: str) -> list[TopicPartition]:
        """Forget every committed offset of a group; returns the partitions it had."""
        return list(self.committed.pop(group_id, {}))

    def delete_topics(self, topics: set[str]) -> list[tuple[str, TopicPartition]]:
        """Forget the offsets of deleted topics; returns (group, partition) of each one removed."""
        removed = []
        for group_id, offsets in list(self.committed.items()):
            for tp in [tp for tp in offsets if tp[0] in topics]:
                del offsets[tp]
                removed.append((group_id, tp))
            if not offsets:
                del self.committed[group_id]
        return removed

    # -- transactional ------------------------------------------------------------------------

    def put_pending(self, producer_id: int, group_id: str, tp: TopicPartition, value: OffsetAndMetadata) -> None:
        self.pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = value

    def has_pending(self, group_id: str, tp: TopicPartition | None = None) -> bool:
        for groups in self.pending.values():
            offsets = groups.get(group_id)
            if offsets and (tp is None or tp in offsets):
                return True
        return False

    def complete_transaction(self, producer_id: int, commit: bool) -> list[str]:
        """Apply (commit) or drop (abort) a producer's pending offsets; returns the groups touched."""
        groups = self.pending.pop(producer_id, {})
        if commit:
            for group_id, offsets in groups.items():
                for tp, value in offsets.items():
                    self.put(group_id, tp, value)
        return list(groups)
