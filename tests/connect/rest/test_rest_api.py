"""Kafka Connect REST shapes and status codes, over HTTP with a real client (requests).

``MemoryHerder`` is a small in-memory implementation of the Herder protocol that lives only in
this test: it exercises every route's JSON and status code, including forwarding from a
follower to a leader (two real servers) and 409 during a rebalance. Tests against the real
``StandaloneHerder`` are in test_rest_standalone.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from strom.connect import exceptions as cx
from strom.connect.rest import RestServer, parse_listeners
from strom.connect.runtime.herder import (
    ConnectorInfo,
    ConnectorOffset,
    ConnectorOffsets,
    ConnectorState,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorType,
    State,
    TargetState,
    TaskInfo,
    TaskState,
)


class MemoryHerder:
    """Connectors as dicts; two tasks each; offsets and topics in memory."""

    def __init__(self, leader_url: str | None = None, cluster_id: str = "test-cluster") -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[str, str] = {}
        self.task_states: dict[str, list[str]] = {}
        self.offsets: dict[str, ConnectorOffsets] = {}
        self.topics: dict[str, set[str]] = {}
        self.follower_of: str | None = leader_url
        self.rebalancing = False
        self.cluster_id = cluster_id
        self.lock = threading.Lock()
        self.calls: list[str] = []

    # -- helpers
    def _need(self, name: str) -> None:
        if name not in self.configs:
            raise cx.NotFoundError(f"Connector {name} not found")

    def _write(self) -> None:
        if self.rebalancing:
            raise cx.RebalanceNeededError("Request cannot be completed because a rebalance is expected")
        if self.follower_of is not None:
            raise cx.NotLeaderError("not the leader", self.follower_of)

    def _info(self, name: str) -> ConnectorInfo:
        cfg = self.configs[name]
        kind = ConnectorType.SINK if "topics" in cfg else ConnectorType.SOURCE
        return ConnectorInfo(name, dict(cfg), tuple(ConnectorTaskId(name, i)
                                                    for i in range(int(cfg.get("tasks.max", "2")))), kind)

    # -- Herder protocol
    def connectors(self) -> list[str]:
        return list(self.configs)

    def connector_info(self, name: str) -> ConnectorInfo:
        self._need(name)
        return self._info(name)

    def connector_config(self, name: str) -> dict[str, str]:
        self._need(name)
        return dict(self.configs[name])

    def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool,
                             initial_state: TargetState | None = None) -> tuple[bool, Any]:
        self._write()
        if "connector.class" not in config:
            raise cx.BadRequestError("Connector config {...} contains no connector type")
        with self.lock:
            exists = name in self.configs
            if exists and not allow_replace:
                raise cx.AlreadyExistsError(f"Connector {name} already exists")
            self.configs[name] = dict(config)
            self.states.setdefault(name, {None: "RUNNING", TargetState.STARTED: "RUNNING"}.get(
                initial_state, str(initial_state)))
            self.task_states[name] = ["RUNNING"] * int(config.get("tasks.max", "2"))
            self.topics.setdefault(name, {"t1"})
            self.offsets.setdefault(name, ConnectorOffsets((ConnectorOffset({"filename": "/x"}, {"position": 5}),)))
        return not exists, self._info(name)

    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> Any:
        self._write()
        self._need(name)
        cfg = self.configs[name]
        for k, v in patch.items():
            if v is None:
                cfg.pop(k, None)
            else:
                cfg[k] = v
        return self._info(name)

    def delete_connector(self, name: str) -> None:
        self._write()
        self._need(name)
        del self.configs[name]

    def connector_status(self, name: str) -> ConnectorStateInfo:
        self._need(name)
        return ConnectorStateInfo(name, ConnectorState(State(self.states[name]), "w1:8083"),
                                  tuple(TaskState(i, State(s), "w1:8083", "boom" if s == "FAILED" else None)
                                        for i, s in enumerate(self.task_states[name])), self._info(name).type)

    def task_status(self, task_id: ConnectorTaskId) -> TaskState:
        self._need(task_id.connector)
        states = self.task_states[task_id.connector]
        if not 0 <= task_id.task < len(states):
            raise cx.NotFoundError(f"Task {task_id.connector}-{task_id.task} not found")
        return TaskState(task_id.task, State(states[task_id.task]), "w1:8083")

    def task_configs(self, name: str) -> list[TaskInfo]:
        self._need(name)
        return [TaskInfo(ConnectorTaskId(name, i), {"task.n": str(i)}) for i in range(len(self.task_states[name]))]

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> Any:
        self._write()
        self._need(name)
        self.calls.append(f"restart {name} {include_tasks} {only_failed}")
        if not include_tasks and not only_failed:
            return None
        states = self.task_states[name]
        self.task_states[name] = ["RESTARTING" if (not only_failed or s == "FAILED") else s for s in states]
        return self.connector_status(name)

    def restart_task(self, task_id: ConnectorTaskId) -> None:
        self._write()
        self.task_status(task_id)
        self.task_states[task_id.connector][task_id.task] = "RUNNING"

    def pause_connector(self, name: str) -> None:
        self._write()
        self._need(name)
        self.states[name] = "PAUSED"

    def resume_connector(self, name: str) -> None:
        self._write()
        self._need(name)
        self.states[name] = "RUNNING"

    def stop_connector(self, name: str) -> None:
        self._write()
        self._need(name)
        self.states[name] = "STOPPED"

    def connector_offsets(self, name: str) -> ConnectorOffsets:
        self._need(name)
        return self.offsets[name]

    def alter_connector_offsets(self, name: str, offsets: ConnectorOffsets) -> str:
        self._write()
        self._need(name)
        if self.states[name] != "STOPPED":
            raise cx.BadRequestError("Connectors must be in the STOPPED state before their offsets can be modified")
        self.offsets[name] = offsets
        return "The offsets for this connector have been altered successfully"

    def reset_connector_offsets(self, name: str) -> str:
        self._write()
        self._need(name)
        self.offsets[name] = ConnectorOffsets()
        return "The offsets for this connector have been reset successfully"

    def connector_active_topics(self, name: str) -> set[str]:
        self._need(name)
        return self.topics[name]

    def reset_connector_active_topics(self, name: str) -> None:
        self._need(name)
        self.topics[name] = set()

    def validate_connector_config(self, config: dict[str, str]) -> dict[str, Any]:
        errors = [] if "file" in config else ["Missing required configuration \"file\""]
        return {"name": config["connector.class"], "error_count": len(errors), "groups": ["Common"],
                "configs": [{"definition": {"name": "file"}, "value": {"name": "file", "value": config.get("file"),
                                                                       "recommended_values": [], "errors": errors,
                                                                       "visible": True}}]}

    def plugins(self) -> list[dict[str, str]]:
        return [{"class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "type": "source", "version": "1"},
                {"class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "type": "sink", "version": "1"},
                {"class": "org.apache.kafka.connect.storage.StringConverter", "type": "converter", "version": "1"}]

    def kafka_cluster_id(self) -> str:
        return self.cluster_id

    def leader_url(self) -> str | None:
        return self.follower_of


@pytest.fixture
def herder() -> MemoryHerder:
    return MemoryHerder()


@pytest.fixture
def server(herder: MemoryHerder) -> Iterator[RestServer]:
    with RestServer(herder, "http://127.0.0.1:0") as srv:
        yield srv


SRC = {"connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t1", "tasks.max": "1"}


def create(url: str, name: str = "c1", config: dict[str, str] | None = None) -> requests.Response:
    return requests.post(f"{url}/connectors", json={"name": name, "config": config or SRC}, timeout=10)


def test_root_health_openapi(server: RestServer) -> None:
    r = requests.get(server.url + "/", timeout=10)
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"version", "commit", "kafka_cluster_id"} and body["kafka_cluster_id"] == "test-cluster"
    h = requests.get(server.url + "/health", timeout=10)
    assert h.status_code == 200 and h.json()["status"] == "healthy"
    doc = requests.get(server.url + "/openapi.json", timeout=10).json()
    assert doc["openapi"].startswith("3.")
    for path in ("/connectors", "/connectors/{connector}/offsets", "/connector-plugins/{plugin}/config/validate",
                 "/admin/loggers/{logger}", "/connectors/{connector}/restart"):
        assert path in doc["paths"]


def test_create_get_list_delete(server: RestServer) -> None:
    url = server.url
    r = create(url)
    assert r.status_code == 201
    assert r.json() == {"name": "c1", "config": {**SRC, "name": "c1"}, "tasks": [{"connector": "c1", "task": 0}],
                        "type": "source"}
    assert r.headers["Location"].endswith("/connectors/c1")
    assert create(url).status_code == 409
    dup = create(url).json()
    assert dup["error_code"] == 409 and "already exists" in dup["message"]
    assert requests.get(f"{url}/connectors", timeout=10).json() == ["c1"]
    assert requests.get(f"{url}/connectors/c1", timeout=10).json()["name"] == "c1"
    assert requests.get(f"{url}/connectors/c1/config", timeout=10).json()["file"] == "/tmp/in.txt"
    r = requests.delete(f"{url}/connectors/c1", timeout=10)
    assert r.status_code == 204 and r.content == b""
    missing = requests.get(f"{url}/connectors/c1", timeout=10)
    assert missing.status_code == 404
    assert missing.json() == {"error_code": 404, "message": "Connector c1 not found"}


def test_bad_create_requests(server: RestServer) -> None:
    url = server.url
    assert requests.post(f"{url}/connectors", data=b"{not json", timeout=10,
                         headers={"Content-Type": "application/json"}).status_code == 400
    assert requests.post(f"{url}/connectors", json={"config": SRC}, timeout=10).status_code == 400
    mismatch = requests.post(f"{url}/connectors", json={"name": "a", "config": {**SRC, "name": "b"}}, timeout=10)
    assert mismatch.status_code == 400 and "doesn't match" in mismatch.json()["message"]
    no_class = create(url, "x", {"file": "f"})
    assert no_class.status_code == 400 and no_class.json()["error_code"] == 400
    assert requests.get(f"{url}/nope", timeout=10).json()["error_code"] == 404
    r = requests.delete(f"{url}/connectors", timeout=10)
    assert r.status_code == 405 and r.json()["error_code"] == 405


def test_put_patch_config(server: RestServer) -> None:
    url = server.url
    r = requests.put(f"{url}/connectors/c2/config", json=SRC, timeout=10)
    assert r.status_code == 201 and r.json()["name"] == "c2"
    r = requests.put(f"{url}/connectors/c2/config", json={**SRC, "topic": "t2"}, timeout=10)
    assert r.status_code == 200 and r.json()["config"]["topic"] == "t2"
    r = requests.patch(f"{url}/connectors/c2/config", json={"topic": "t3", "file": None, "tasks.max": 2}, timeout=10)
    assert r.status_code == 200
    cfg = r.json()["config"]
    assert cfg["topic"] == "t3" and "file" not in cfg and cfg["tasks.max"] == "2"
    assert requests.patch(f"{url}/connectors/zz/config", json={"a": "b"}, timeout=10).status_code == 404
    bad = requests.put(f"{url}/connectors/c2/config", json={**SRC, "name": "other"}, timeout=10)
    assert bad.status_code == 400


def test_expand_status_and_info(server: RestServer, herder: MemoryHerder) -> None:
    url = server.url
    create(url, "a")
    create(url, "b", {"connector.class": "FileStreamSink", "topics": "t", "tasks.max": "2"})
    st = requests.get(f"{url}/connectors?expand=status", timeout=10).json()
    assert set(st) == {"a", "b"} and set(st["a"]) == {"status"}
    assert st["b"]["status"]["type"] == "sink" and len(st["b"]["status"]["tasks"]) == 2
    info = requests.get(f"{url}/connectors?expand=info", timeout=10).json()
    assert set(info["a"]) == {"info"} and info["a"]["info"]["config"]["topic"] == "t1"
    both = requests.get(f"{url}/connectors?expand=status&expand=info", timeout=10).json()
    assert set(both["a"]) == {"status", "info"}


def test_status_tasks_restart(server: RestServer, herder: MemoryHerder) -> None:
    url = server.url
    create(url, "s", {**SRC, "tasks.max": "2"})
    status = requests.get(f"{url}/connectors/s/status", timeout=10).json()
    assert status == {"name": "s", "type": "source",
                      "connector": {"state": "RUNNING", "worker_id": "w1:8083"},
                      "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w1:8083"},
                                {"id": 1, "state": "RUNNING", "worker_id": "w1:8083"}]}
    tasks = requests.get(f"{url}/connectors/s/tasks", timeout=10).json()
    assert tasks[1] == {"id": {"connector": "s", "task": 1}, "config": {"task.n": "1"}}
    assert requests.get(f"{url}/connectors/s/tasks/1/status", timeout=10).json()["id"] == 1
    assert requests.get(f"{url}/connectors/s/tasks/7/status", timeout=10).status_code == 404
    assert requests.get(f"{url}/connectors/s/tasks/x/status", timeout=10).status_code == 404
    r = requests.post(f"{url}/connectors/s/restart", timeout=10)
    assert r.status_code == 204 and herder.calls[-1] == "restart s False False"
    herder.task_states["s"][1] = "FAILED"
    r = requests.post(f"{url}/connectors/s/restart?includeTasks=true&onlyFailed=true", timeout=10)
    assert r.status_code == 202
    assert [t["state"] for t in r.json()["tasks"]] == ["RUNNING", "RESTARTING"]
    assert requests.post(f"{url}/connectors/s/restart?includeTasks=maybe", timeout=10).status_code == 400
    assert requests.post(f"{url}/connectors/s/tasks/1/restart", timeout=10).status_code == 204
    assert requests.post(f"{url}/connectors/nope/restart", timeout=10).status_code == 404


def test_pause_resume_stop_offsets_topics(server: RestServer) -> None:
    url = server.url
    create(url, "o")
    for verb, state in (("pause", "PAUSED"), ("resume", "RUNNING"), ("stop", "STOPPED")):
        r = requests.put(f"{url}/connectors/o/{verb}", timeout=10)
        assert r.status_code == 202
        assert requests.get(f"{url}/connectors/o/status", timeout=10).json()["connector"]["state"] == state
    assert requests.get(f"{url}/connectors/o/offsets", timeout=10).json() == {
        "offsets": [{"partition": {"filename": "/x"}, "offset": {"position": 5}}]}
    new: dict[str, Any] = {"offsets": [{"partition": {"filename": "/x"}, "offset": {"position": 9}}]}
    r = requests.patch(f"{url}/connectors/o/offsets", json=new, timeout=10)
    assert r.status_code == 200
    assert r.json() == {"message": "The offsets for this connector have been altered successfully"}
    assert requests.get(f"{url}/connectors/o/offsets", timeout=10).json() == new
    assert requests.patch(f"{url}/connectors/o/offsets", json={"offsets": []}, timeout=10).status_code == 400
    r = requests.delete(f"{url}/connectors/o/offsets", timeout=10)
    assert r.status_code == 200 and "reset successfully" in r.json()["message"]
    requests.put(f"{url}/connectors/o/resume", timeout=10)
    running = requests.patch(f"{url}/connectors/o/offsets", json=new, timeout=10)
    assert running.status_code == 400 and "STOPPED" in running.json()["message"]
    assert requests.get(f"{url}/connectors/o/topics", timeout=10).json() == {"o": {"topics": ["t1"]}}
    assert requests.put(f"{url}/connectors/o/topics/reset", timeout=10).status_code == 202
    assert requests.get(f"{url}/connectors/o/topics", timeout=10).json() == {"o": {"topics": []}}


def test_plugins_and_validate(server: RestServer) -> None:
    url = server.url
    plugins = requests.get(f"{url}/connector-plugins", timeout=10).json()
    assert {p["type"] for p in plugins} == {"source", "sink"}
    assert all(set(p) == {"class", "type", "version"} for p in plugins)
    every = requests.get(f"{url}/connector-plugins?connectorsOnly=false", timeout=10).json()
    assert any(p["type"] == "converter" for p in every)
    r = requests.put(f"{url}/connector-plugins/FileStreamSource/config/validate", json={"topic": "t"}, timeout=10)
    assert r.status_code == 200 and r.json()["error_count"] == 1 and r.json()["name"] == "FileStreamSource"
    r = requests.put(f"{url}/connector-plugins/FileStreamSource/config/validate",
                     json={"connector.class": "JdbcSink", "topic": "t"}, timeout=10)
    assert r.status_code == 400


def test_loggers(server: RestServer) -> None:
    url = server.url
    name = "strom.test.rest.loggers"
    logging.getLogger(name + ".child").setLevel(logging.INFO)
    r = requests.put(f"{url}/admin/loggers/{name}", json={"level": "DEBUG"}, timeout=10)
    assert r.status_code == 200 and r.json() == [name, name + ".child"]
    assert logging.getLogger(name + ".child").level == logging.DEBUG
    got = requests.get(f"{url}/admin/loggers/{name}", timeout=10).json()
    assert got["level"] == "DEBUG" and isinstance(got["last_modified"], int)
    all_ = requests.get(f"{url}/admin/loggers", timeout=10).json()
    assert "root" in all_ and all_[name]["level"] == "DEBUG"
    requests.put(f"{url}/admin/loggers/{name}", json={"level": "TRACE"}, timeout=10)
    assert requests.get(f"{url}/admin/loggers/{name}", timeout=10).json()["level"] == "TRACE"
    assert requests.get(f"{url}/admin/loggers/no.such.logger.here", timeout=10).status_code == 404
    assert requests.put(f"{url}/admin/loggers/{name}", json={"level": "LOUD"}, timeout=10).status_code == 404
    assert requests.put(f"{url}/admin/loggers/{name}", json={}, timeout=10).status_code == 400
    logging.getLogger(name).setLevel(logging.NOTSET)
    logging.getLogger(name + ".child").setLevel(logging.NOTSET)


def test_follower_forwards_writes_to_leader() -> None:
    leader_herder = MemoryHerder()
    with RestServer(leader_herder, "http://127.0.0.1:0") as leader:
        follower_herder = MemoryHerder(leader_url=leader.advertised_url())
        with RestServer(follower_herder, "http://127.0.0.1:0") as follower:
            r = create(follower.url, "fw")
            assert r.status_code == 201 and r.json()["name"] == "fw"
            assert "fw" in leader_herder.configs and "fw" not in follower_herder.configs
            assert requests.put(f"{follower.url}/connectors/fw/pause", timeout=10).status_code == 202
            assert leader_herder.states["fw"] == "PAUSED"
            assert requests.delete(f"{follower.url}/connectors/fw", timeout=10).status_code == 204
            assert "fw" not in leader_herder.configs
            # A leader that itself is a follower of someone: at most two hops, then 409.
            leader_herder.follower_of = follower.advertised_url()
            loop = create(follower.url, "loop")
            assert loop.status_code == 409 and loop.json()["error_code"] == 409


def test_rebalance_is_409(server: RestServer, herder: MemoryHerder) -> None:
    herder.rebalancing = True
    r = create(server.url)
    assert r.status_code == 409 and r.json()["error_code"] == 409


def test_listeners_parsing() -> None:
    assert parse_listeners(None) == [("127.0.0.1", 8083)]
    assert parse_listeners("http://0.0.0.0:9000, http://localhost:0") == [("0.0.0.0", 9000), ("localhost", 0)]
    assert parse_listeners("http://:8084") == [("0.0.0.0", 8084)]
    assert parse_listeners("https://127.0.0.1:8443") == [("127.0.0.1", 8443)]
    for bad in ("http://h", "ftp://h:1"):
        with pytest.raises(ValueError, match="listeners"):
            parse_listeners(bad)


def test_port_in_use_fails_start(server: RestServer, herder: MemoryHerder) -> None:
    port = server.url.rsplit(":", 1)[1]
    with pytest.raises(OSError):
        RestServer(herder, f"http://127.0.0.1:{port}").start()


def test_openapi_document_is_valid_and_covers_every_route(herder: MemoryHerder) -> None:
    import concurrent.futures
    import re

    from strom.connect.rest.app import build_app
    from strom.connect.rest.openapi import openapi_document

    validator = pytest.importorskip("openapi_spec_validator")
    doc = openapi_document("1.0")
    validator.validate(doc)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        app = build_app(herder, pool)
    served = set()
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
        path = route.resource.canonical if route.resource is not None else ""
        path = re.sub(r"\{c\}", "{connector}", path)
        path = re.sub(r"\{n\}", "{task}", path)
        path = re.sub(r"\{p\}", "{plugin}", path)
        served.add((path, route.method.lower()))
    documented = {(p, m) for p, ops in doc["paths"].items() for m in ops}
    assert served == documented


class BrokenHerder(MemoryHerder):
    """A herder whose lookups fail unexpectedly."""

    def connectors(self) -> list[str]:
        raise RuntimeError("config topic unreadable")


def test_unexpected_errors_are_500_and_unhealthy() -> None:
    with RestServer(BrokenHerder(), "http://127.0.0.1:0") as srv:
        r = requests.get(srv.url + "/connectors", timeout=10)
        assert r.status_code == 500
        assert r.json() == {"error_code": 500, "message": "config topic unreadable"}
        h = requests.get(srv.url + "/health", timeout=10)
        assert h.status_code == 500 and h.json()["status"] == "unhealthy"
        assert "config topic unreadable" in h.json()["message"]


def test_initial_state_on_create(server: RestServer, herder: MemoryHerder) -> None:
    r = requests.post(f"{server.url}/connectors", timeout=10,
                      json={"name": "p", "config": SRC, "initial_state": "PAUSED"})
    assert r.status_code == 201 and herder.states["p"] == "PAUSED"
    bad = requests.post(f"{server.url}/connectors", timeout=10,
                        json={"name": "q", "config": SRC, "initial_state": "SLEEPING"})
    assert bad.status_code == 400
