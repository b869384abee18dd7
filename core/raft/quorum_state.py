"""The ``quorum-state`` file: the raft election state that must survive a restart.

Kafka's ``FileQuorumStateStore`` writes one JSON object (``QuorumStateData`` plus a
``data_version`` field) to ``quorum-state.tmp``, fsyncs it and renames it over ``quorum-state``.
strom writes data version 0 (static voters, ``kraft.version`` 0), as Kafka 4.x does for a
quorum configured with ``controller.quorum.voters``::

    {"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1}],"data_version":0}

Version 1 files (``votedDirectoryId``, no voters) are read too. The epoch is persisted before a
node acts in it (votes, leads), so a restart never reuses an epoch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from strom.core.exceptions import BrokerError
from strom.core.log.checkpoint import write_atomically

QUORUM_STATE_FILE = "quorum-state"


class QuorumStateError(BrokerError):
    """The quorum-state file is unreadable or has an unsupported data version."""


@dataclass(frozen=True, slots=True)
class ElectionState:
    """epoch, the leader (-1 unknown), whom this node voted for (-1 none), the voter set."""

    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    voters: tuple[int, ...] = field(default_factory=tuple)

    def to_json(self) -> str:
        data = {"clusterId": "", "leaderId": self.leader_id, "leaderEpoch": self.epoch,
                "votedId": self.voted_id, "appliedOffset": 0,
                "currentVoters": [{"voterId": v} for v in self.voters], "data_version": 0}
        return json.dumps(data, separators=(",", ":"))


class QuorumStateStore:
    """Reads and atomically writes ``<partition dir>/quorum-state``."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / QUORUM_STATE_FILE

    def read(self) -> ElectionState | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            version = data["data_version"]
            if version not in (0, 1):
                raise QuorumStateError(f"{self.path}: data_version {version} is not within 0..1")
            voters = tuple(int(v["voterId"]) for v in data.get("currentVoters") or ())
            return ElectionState(int(data.get("leaderEpoch", -1)), int(data.get("leaderId", -1)),
                                 int(data.get("votedId", -1)), voters)
        except (ValueError, KeyError, TypeError) as e:
            raise QuorumStateError(f"{self.path}: malformed quorum state ({e!r}): {text[:200]!r}") from None

    def write(self, state: ElectionState) -> None:
        write_atomically(self.path, state.to_json())
