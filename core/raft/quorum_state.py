"""The ``quorum-state`` file: the raft election state that must survive a restart.

Kafka's ``FileQuorumStateStore`` writes one JSON object (``QuorumStateData`` plus a
``data_version`` field) to ``quorum-state.tmp``, fsyncs it and renames it over ``quorum-state``.
strom writes data version 0 (static voters, ``kraft.version`` 0), as Kafka 4.x does for a
quorum configured with ``controller.quorum.voters``::

    {"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1}],"data_version":0}

Version 1 files (``votedDirectoryId``, no voters) are read too. The epoch is persisted before a
node acts in it (votes, leads), so a restart never reuses an epoch.

``appliedOffset``: Kafka writes 0 there and ignores it on read. strom writes the high watermark
it knows durable (the end offset of the committed, fsynced metadata log: at election, after a
snapshot, at shutdown), so the next start can tell a torn tail past it (truncated, as Kafka
does) from a corrupt committed batch below it (refused: see :mod:`strom.core.raft.log`).

A file that is not this JSON (bad UTF-8, truncated JSON, a wrong ``data_version``) raises
:class:`QuorumStateError` naming the file and the way out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from strom.core.exceptions import CorruptStateError
from strom.core.log.checkpoint import CheckpointError, read_state_text, write_atomically

QUORUM_STATE_FILE = "quorum-state"


QUORUM_STATE_WAY_OUT = ("restore it from a backup, or (single-voter quorum only) move it aside: the node "
                        "then starts a new epoch above the last epoch in its metadata log")


class QuorumStateError(CorruptStateError):
    """The quorum-state file is unreadable or has an unsupported data version."""


class _UnreadableQuorumState(CheckpointError):
    pass


@dataclass(frozen=True, slots=True)
class ElectionState:
    """epoch, the leader (-1 unknown), whom this node voted for (-1 none), the voter set."""

    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    voters: tuple[int, ...] = field(default_factory=tuple)
    # The durable high watermark when the file was written (Kafka's ``appliedOffset``, which
    # Kafka itself leaves at 0).
    high_watermark: int = 0

    def to_json(self) -> str:
        data = {"clusterId": "", "leaderId": self.leader_id, "leaderEpoch": self.epoch,
                "votedId": self.voted_id, "appliedOffset": self.high_watermark,
                "currentVoters": [{"voterId": v} for v in self.voters], "data_version": 0}
        return json.dumps(data, separators=(",", ":"))


class QuorumStateStore:
    """Reads and atomically writes ``<partition dir>/quorum-state``."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / QUORUM_STATE_FILE

    def read(self) -> ElectionState | None:
        try:
            text = read_state_text(self.path, _UnreadableQuorumState)
        except _UnreadableQuorumState as e:
            raise QuorumStateError(f"{e}; {QUORUM_STATE_WAY_OUT}") from None
        if text is None:
            return None
        try:
            data = json.loads(text)
            if not isinstance(data, dict):
                raise TypeError(f"expected a JSON object, got {type(data).__name__}")
            version = data["data_version"]
            if version not in (0, 1):
                raise QuorumStateError(f"{self.path}: data_version {version!r} is not within 0..1 "
                                       f"(written by a newer Kafka?); {QUORUM_STATE_WAY_OUT}")
            voters = tuple(int(v["voterId"]) for v in data.get("currentVoters") or ())
            state = ElectionState(int(data.get("leaderEpoch", -1)), int(data.get("leaderId", -1)),
                                  int(data.get("votedId", -1)), voters, int(data.get("appliedOffset") or 0))
        except (ValueError, KeyError, TypeError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise QuorumStateError(f"{self.path}: not a quorum-state JSON object ({what}): {text[:120]!r}; "
                                   f"{QUORUM_STATE_WAY_OUT}") from None
        if state.epoch < 0 or state.high_watermark < 0:
            raise QuorumStateError(f"{self.path}: negative leaderEpoch or appliedOffset in {text[:120]!r}; "
                                   f"{QUORUM_STATE_WAY_OUT}")
        return state

    def write(self, state: ElectionState) -> None:
        write_atomically(self.path, state.to_json())
