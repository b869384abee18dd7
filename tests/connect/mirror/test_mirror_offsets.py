"""PATCH/DELETE /offsets for the MirrorMaker connectors (KIP-875): Kafka's validation of the
partitions and offsets each connector writes; resets always allowed."""

from __future__ import annotations

from typing import Any

import pytest

from strom.connect.exceptions import BadRequestError
from strom.connect.mirror import MirrorCheckpointConnector, MirrorHeartbeatConnector, MirrorSourceConnector

SRC = {"cluster": "A", "topic": "t", "partition": 0}


def test_source_offsets() -> None:
    c = MirrorSourceConnector()
    assert c.alter_offsets({}, [(SRC, {"offset": 41}), ({"junk": 1}, None)]) is True
    bad: list[tuple[dict[str, Any], dict[str, Any]]] = [
        ({"topic": "t", "partition": 0}, {"offset": 1}),        # no cluster
        ({**SRC, "partition": -1}, {"offset": 1}),               # negative partition
        ({**SRC, "partition": "0"}, {"offset": 1}),              # partition not an integer
        (SRC, {"offset": -5}),                                   # negative offset
        (SRC, {"position": 5}),                                  # no offset key
    ]
    for partition, offset in bad:
        with pytest.raises(BadRequestError):
            c.alter_offsets({}, [(partition, offset)])


def test_checkpoint_and_heartbeat_offsets_are_zero() -> None:
    cp = {"group": "g", "topic": "A.t", "partition": 1}
    assert MirrorCheckpointConnector().alter_offsets({}, [(cp, {"offset": 0})])
    with pytest.raises(BadRequestError):
        MirrorCheckpointConnector().alter_offsets({}, [(cp, {"offset": 3})])
    hb = {"sourceClusterAlias": "A", "targetClusterAlias": "B"}
    assert MirrorHeartbeatConnector().alter_offsets({}, [(hb, {"offset": 0}), ({}, None)])
    with pytest.raises(BadRequestError):
        MirrorHeartbeatConnector().alter_offsets({}, [({"sourceClusterAlias": "A"}, {"offset": 0})])
