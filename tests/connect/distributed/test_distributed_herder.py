"""Two DistributedHerders in one group on the bundled broker: tasks spread over both, a stopped
worker's tasks resume on the other, and configs survive a restart of every worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cluster_util import Cluster, datagen, wait_for

from strom.connect.exceptions import AlreadyExistsError, NotLeaderError
from strom.connect.runtime.distributed import DistributedHerder
from strom.connect.runtime.herder import ConnectorTaskId, State
from strom.core.testing import BrokerProcess


@pytest.fixture
def cluster(connect_broker: BrokerProcess) -> Iterator[Cluster]:
    c = Cluster(connect_broker)
    yield c
    c.stop_all()


def leader_of(*herders: DistributedHerder) -> DistributedHerder:
    return wait_for(lambda: next((h for h in herders if h.leader_url() is None and not h._rebalancing
                                  and h._leader_id), None), what="a leader")


def test_tasks_spread_move_on_stop_and_survive_restart(cluster: Cluster, topic_name: str) -> None:
    a, b = cluster.worker(18301), cluster.worker(18302)
    assert a.wait_for_assignment(30) and b.wait_for_assignment(30)
    leader = leader_of(a, b)
    follower = b if leader is a else a
    with pytest.raises(NotLeaderError) as err:
        follower.put_connector_config("gen", datagen(topic_name, 4), allow_replace=False)
    assert err.value.leader_url == leader.url
    created, info = leader.put_connector_config("gen", datagen(topic_name, 4), allow_replace=False)
    assert created and info.name == "gen"
    with pytest.raises(AlreadyExistsError):
        leader.put_connector_config("gen", datagen(topic_name, 4), allow_replace=False)

    all_tasks = [ConnectorTaskId("gen", i) for i in range(4)]
    wait_for(lambda: sorted(a.assigned_tasks() + b.assigned_tasks()) == all_tasks
             and len(a.assigned_tasks()) == len(b.assigned_tasks()) == 2, what="tasks spread 2/2")
    assert len(a.assigned_connectors() + b.assigned_connectors()) == 1
    # Every worker answers status from the status topic, with the worker that runs each task.
    def running() -> Any:
        st = follower.connector_status("gen")
        return st if st.connector.state == State.RUNNING and len(st.tasks) == 4 and \
            all(t.state == State.RUNNING for t in st.tasks) else None
    status = wait_for(running, what="all tasks RUNNING")
    assert {t.worker_id for t in status.tasks} == {a.worker_id, b.worker_id}
    assert [t.id for t in follower.task_configs("gen")] == all_tasks

    # b leaves the group: its tasks resume on a.
    cluster.herders.remove(b)
    b.stop()
    wait_for(lambda: a.assigned_tasks() == all_tasks and a.assigned_connectors() == ["gen"], what="tasks moved to a")
    wait_for(lambda: all(t.state == State.RUNNING and t.worker_id == a.worker_id
                         for t in a.connector_status("gen").tasks), what="tasks RUNNING on a")

    # Pause through the config topic; then restart every worker: configs come back from the topic.
    a.pause_connector("gen")
    wait_for(lambda: a.connector_status("gen").connector.state == State.PAUSED, what="PAUSED")
    cluster.stop_all()
    c = cluster.worker(18303)
    assert c.wait_for_assignment(30)
    assert c.connectors() == ["gen"]
    assert c.connector_config("gen")["tasks.max"] == "4"
    assert [t.id for t in c.task_configs("gen")] == all_tasks
    wait_for(lambda: c.assigned_tasks() == all_tasks, what="tasks on the new worker")
    wait_for(lambda: c.connector_status("gen").connector.state == State.PAUSED
             and c.connector_status("gen").connector.worker_id == c.worker_id, what="PAUSED after restart")
    c.resume_connector("gen")
    wait_for(lambda: all(t.state == State.RUNNING for t in c.connector_status("gen").tasks), what="resumed")
    c.delete_connector("gen")
    wait_for(lambda: c.assigned_tasks() == [] and c.connectors() == [], what="deleted")


def test_reconfigure_stop_resume_restart(cluster: Cluster, topic_name: str) -> None:
    a, b = cluster.worker(18311), cluster.worker(18312)
    assert a.wait_for_assignment(30) and b.wait_for_assignment(30)
    leader = leader_of(a, b)
    leader.put_connector_config("gen", datagen(topic_name, 4), allow_replace=False)
    wait_for(lambda: len(a.assigned_tasks()) == len(b.assigned_tasks()) == 2, what="2/2")

    # Fewer tasks: the connector's owner rewrites the task configs, the leader rebalances 1/1.
    leader = leader_of(a, b)
    info = leader.patch_connector_config("gen", {"tasks.max": "2"})
    assert info.config["tasks.max"] == "2"
    two = [ConnectorTaskId("gen", 0), ConnectorTaskId("gen", 1)]
    wait_for(lambda: sorted(a.assigned_tasks() + b.assigned_tasks()) == two
             and len(a.assigned_tasks()) == 1, what="1/1 after tasks.max=2")
    wait_for(lambda: [t.id for t in b.task_configs("gen")] == two, what="2 task configs")

    # STOPPED: no tasks at all (Kafka writes an empty task set), connector state STOPPED.
    leader_of(a, b).stop_connector("gen")
    wait_for(lambda: a.assigned_tasks() == b.assigned_tasks() == [] and b.task_configs("gen") == []
             and b.connector_status("gen").connector.state == State.STOPPED, what="STOPPED")
    leader_of(a, b).resume_connector("gen")
    wait_for(lambda: sorted(a.assigned_tasks() + b.assigned_tasks()) == two
             and all(t.state == State.RUNNING for t in a.connector_status("gen").tasks)
             and len(a.connector_status("gen").tasks) == 2, what="resumed")

    # Restart with tasks: every task goes through RESTARTING and runs again.
    plan = leader_of(a, b).restart_connector("gen", include_tasks=True)
    assert plan is not None and all(t.state == State.RESTARTING for t in plan.tasks)
    wait_for(lambda: all(t.state == State.RUNNING for t in b.connector_status("gen").tasks)
             and b.connector_status("gen").connector.state == State.RUNNING, what="running after restart")
    owner = a if ConnectorTaskId("gen", 0) in a.assigned_tasks() else b
    other = b if owner is a else a
    with pytest.raises(NotLeaderError) as err:
        other.restart_task(ConnectorTaskId("gen", 0))  # forwarded to the worker that runs it
    assert err.value.leader_url == owner.url
    owner.restart_task(ConnectorTaskId("gen", 0))
    wait_for(lambda: a.task_status(ConnectorTaskId("gen", 0)).state == State.RUNNING, what="task 0 running")


def test_source_offsets_in_the_offsets_topic(cluster: Cluster, topic_name: str, tmp_path: Any) -> None:
    a = cluster.worker(18321)
    assert a.wait_for_assignment(30)
    src = tmp_path / "in.txt"
    src.write_text("".join(f"l{i}\n" for i in range(100)))
    a.put_connector_config("fs", {"connector.class": "FileStreamSource", "file": str(src), "topic": topic_name},
                           allow_replace=False)
    size = src.stat().st_size
    partition = {"filename": str(src)}
    wait_for(lambda: [o.to_json() for o in a.connector_offsets("fs").offsets]
             == [{"partition": partition, "offset": {"position": size}}], what="offset flushed")
    with pytest.raises(Exception, match="STOPPED"):
        a.reset_connector_offsets("fs")
    a.stop_connector("fs")
    wait_for(lambda: a.assigned_tasks() == [], what="stopped")
    from strom.connect.runtime.herder import ConnectorOffset, ConnectorOffsets
    a.alter_connector_offsets("fs", ConnectorOffsets((ConnectorOffset(partition, {"position": 3}),)))
    # A second worker (its own offset store) reads the altered offset from the topic.
    b = cluster.worker(18322)
    assert b.wait_for_assignment(30)
    assert [o.to_json() for o in b.connector_offsets("fs").offsets] == [{"partition": partition,
                                                                          "offset": {"position": 3}}]
    leader_of(a, b).reset_connector_offsets("fs")
    assert b.connector_offsets("fs").offsets == ()
