"""Herder value types render Kafka Connect's REST JSON shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from strom.connect.exceptions import BadRequestError
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


def test_connector_info_json() -> None:
    info = ConnectorInfo("local-file-source", {"connector.class": "FileStreamSource", "tasks.max": "1"},
                         (ConnectorTaskId("local-file-source", 0),), ConnectorType.SOURCE)
    assert info.to_json() == {
        "name": "local-file-source",
        "config": {"connector.class": "FileStreamSource", "tasks.max": "1"},
        "tasks": [{"connector": "local-file-source", "task": 0}],
        "type": "source",
    }
    json.dumps(info.to_json())


def test_status_json_omits_empty_trace_and_sorts_tasks() -> None:
    status = ConnectorStateInfo(
        "sink", ConnectorState(State.RUNNING, "10.0.0.1:8083"),
        (TaskState(1, State.FAILED, "10.0.0.2:8083", "Traceback ..."), TaskState(0, State.RUNNING, "10.0.0.1:8083")),
        ConnectorType.SINK)
    assert status.to_json() == {
        "name": "sink",
        "connector": {"state": "RUNNING", "worker_id": "10.0.0.1:8083"},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "10.0.0.1:8083"},
                  {"id": 1, "state": "FAILED", "worker_id": "10.0.0.2:8083", "trace": "Traceback ..."}],
        "type": "sink",
    }


def test_task_ids_order_and_string_enums() -> None:
    ids = [ConnectorTaskId("b", 0), ConnectorTaskId("a", 10), ConnectorTaskId("a", 2)]
    assert sorted(ids) == [ConnectorTaskId("a", 2), ConnectorTaskId("a", 10), ConnectorTaskId("b", 0)]
    assert ConnectorTaskId.from_json({"connector": "a", "task": "3"}) == ConnectorTaskId("a", 3)
    assert TargetState.PAUSED == "PAUSED" and State.RUNNING == "RUNNING" and ConnectorType.SINK == "sink"
    assert TaskInfo(ConnectorTaskId("a", 0), {"k": "v"}).to_json() == {
        "id": {"connector": "a", "task": 0}, "config": {"k": "v"}}


def test_offsets_json_round_trip_and_bad_bodies() -> None:
    body = {"offsets": [
        {"partition": {"filename": "/in.txt"}, "offset": {"position": 30}},
        {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None},
    ]}
    parsed = ConnectorOffsets.from_json(body)
    assert parsed.offsets[0] == ConnectorOffset({"filename": "/in.txt"}, {"position": 30})
    assert parsed.offsets[1].offset is None
    assert parsed.to_json() == body
    bads: list[dict[str, Any]] = [{}, {"offsets": {}}, {"offsets": [{"offset": {}}]},
                                  {"offsets": [{"partition": {}, "offset": 5}]}]
    for bad in bads:
        with pytest.raises(BadRequestError):
            ConnectorOffsets.from_json(bad)


def test_herder_protocol_is_runtime_checkable() -> None:
    assert not isinstance(object(), Herder)
