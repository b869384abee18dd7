"""Share sessions (KIP-932): Kafka's ``ShareSessionCache`` and ``ShareSession``.

A share consumer keeps one share session per broker: ShareFetch with epoch 0 opens it (a full
request naming every partition), each later ShareFetch / ShareAcknowledge carries the next
epoch (1, 2, ... wrapping to 1) and may add or forget partitions, epoch -1 closes it. The cache
is keyed by (group id, member id) and holds at most ``group.share.max.share.sessions`` sessions;
beyond that a new session is SHARE_SESSION_LIMIT_REACHED, as Kafka's ``maybeCreateSession``.

Errors as Kafka's ``SharePartitionManager.newContext`` / ``acknowledgeSessionUpdate``: an epoch
> 0 with no session is SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH,
acknowledgements on an opening fetch INVALID_REQUEST, and ShareAcknowledge cannot open a session
(epoch 0: INVALID_SHARE_SESSION_EPOCH). Event-loop only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from strom.core.errors import (
    InvalidRequestError,
    InvalidShareSessionEpochError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
)

logger = logging.getLogger(__name__)

# ShareRequestMetadata's epochs.
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# Kafka's default of group.share.max.share.sessions.
DEFAULT_MAX_SHARE_SESSIONS = 2000

TopicIdPartition = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch: 0 and -1 are reserved, so the epoch wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


@dataclass(slots=True)
class ShareSession:
    """One member's share session: its partitions (in request order) and the epoch expected next."""

    group_id: str
    member_id: str
    epoch: int
    connection_id: str
    # dict as an ordered set: fetches go round the partitions in the order they were added.
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)
    # Fetches so far: each one starts at the next partition, so the max_records budget of a
    # fetch does not always go to the first partitions (Kafka rotates them the same way).
    fetches: int = 0

    def fetch_order(self) -> list[TopicIdPartition]:
        """The session's partitions, starting one further along at each call."""
        order = list(self.partitions)
        if order:
            k = self.fetches % len(order)
            order = order[k:] + order[:k]
        self.fetches += 1
        return order

    def update(self, added: Iterable[TopicIdPartition], forgotten: Iterable[TopicIdPartition]) -> None:
        for tp in added:
            self.partitions.setdefault(tp, None)
        for tp in forgotten:
            self.partitions.pop(tp, None)


class ShareSessionCache:
    """Every share session on this broker, keyed by (group id, member id)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_SHARE_SESSIONS) -> None:
        self.max_entries = max_entries
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def remove_connection(self, connection_id: str) -> list[ShareSession]:
        """Remove the sessions last used on a connection that closed (Kafka evicts a share
        session when its consumer's connection drops). A session a member re-opened on another
        connection is not this connection's any more, so it stays."""
        gone = [k for k, s in self._sessions.items() if s.connection_id == connection_id]
        return [self._sessions.pop(k) for k in gone]

    def fetch_session(self, group_id: str, member_id: str, epoch: int, *, added: Iterable[TopicIdPartition],
                      forgotten: Iterable[TopicIdPartition], has_acknowledgements: bool,
                      connection_id: str) -> tuple[ShareSession, ShareSession | None]:
        """The session a ShareFetch of ``epoch`` works in: ``(session, replaced)``.

        Epoch 0 opens a new session (``replaced``: the member's previous one; as Kafka, its
        records stay acquired until acknowledged or their locks expire); -1 returns the existing
        session for closing; any other epoch must be the session's next, which this call then
        advances.
        """
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            return self._existing(key), None
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise InvalidRequestError("Acknowledge data present in initial share fetch request")
            replaced = self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_entries:
                if replaced is not None:
                    self._sessions[key] = replaced
                raise ShareSessionLimitReachedError(
                    f"the broker holds group.share.max.share.sessions={self.max_entries} share sessions")
            session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection_id)
            session.update(added, ())
            self._sessions[key] = session
            return session, replaced
        session = self._advance(key, epoch)
        session.update(added, forgotten)
        session.connection_id = connection_id
        return session, None

    def acknowledge_session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a ShareAcknowledge of ``epoch`` works in (advanced, unless -1 closes it)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            raise InvalidShareSessionEpochError("a share acknowledge request cannot open a share session (epoch 0)")
        if epoch == FINAL_EPOCH:
            return self._existing(key)
        return self._advance(key, epoch)

    def _existing(self, key: tuple[str, str]) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionNotFoundError(f"no share session for group {key[0]} member {key[1]}")
        return session

    def _advance(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self._existing(key)
        if session.epoch != epoch:
            logger.debug("share session %s: expected epoch %d, got %d", key, session.epoch, epoch)
            raise InvalidShareSessionEpochError(f"expected share session epoch {session.epoch}, got {epoch}")
        session.epoch = next_epoch(session.epoch)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)


__all__ = ["DEFAULT_MAX_SHARE_SESSIONS", "FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessionCache",
           "TopicIdPartition", "next_epoch"]
