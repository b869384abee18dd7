"""Validation of user-supplied Connect offsets for the MirrorMaker connectors (Kafka's
``alterOffsets`` of MirrorSourceConnector, MirrorCheckpointConnector and
MirrorHeartbeatConnector, KIP-875): a partition must carry the keys the connector writes, an
offset must be ``{"offset": <non-negative integer>}``; a reset (None) is always accepted, so
garbage can be cleaned up through the REST API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from strom.connect.exceptions import BadRequestError

OffsetPairs = Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]


def validate_offsets(offsets: OffsetPairs, string_keys: Sequence[str], partition_key: str | None,
                     offset_must_be_zero: bool = False) -> bool:
    """Raise :class:`BadRequestError` naming what is wrong; True when every pair is valid."""
    for partition, offset in offsets:
        if offset is None:
            continue
        if partition is None:
            raise BadRequestError("Source partitions may not be null")
        for key in string_keys:
            value = partition.get(key)
            if not isinstance(value, str):
                raise BadRequestError(f"Source partition {dict(partition)} must contain the string key '{key}'")
        if partition_key is not None:
            value = partition.get(partition_key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise BadRequestError(f"Source partition {dict(partition)} must contain a non-negative integer "
                                      f"'{partition_key}'")
        value = offset.get("offset")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadRequestError(f"Source offset {dict(offset)} for {dict(partition)} must be "
                                  "{\"offset\": <non-negative integer>}")
        if offset_must_be_zero and value != 0:
            raise BadRequestError(f"Source offset {dict(offset)} for {dict(partition)} must be {{\"offset\": 0}}")
    # MirrorMaker's consumers commit nothing: validating the format is all there is to do.
    return True
