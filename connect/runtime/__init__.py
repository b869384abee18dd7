"""The Connect runtime: worker, herders (standalone, distributed), offset/config/status stores.

The herder protocol and its value types are re-exported here from
:mod:`strom.connect.runtime.herder`; everything else is imported from its own module.
"""

from __future__ import annotations

from strom.connect.runtime.herder import (
    ConnectorInfo,
    ConnectorOffset,
    ConnectorOffsets,
    ConnectorState,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorType,
    Herder,
    State,
    TargetState,
    TaskInfo,
    TaskState,
)

__all__ = [
    "ConnectorInfo",
    "ConnectorOffset",
    "ConnectorOffsets",
    "ConnectorState",
    "ConnectorStateInfo",
    "ConnectorTaskId",
    "ConnectorType",
    "Herder",
    "State",
    "TargetState",
    "TaskInfo",
    "TaskState",
]
