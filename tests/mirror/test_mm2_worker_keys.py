"""MirrorMaker 2's worker configuration from mm2.properties, as Kafka 4.3.1's MirrorMakerConfig
builds it: only the target cluster's ``<alias>.*`` settings, top-level client keys and the
top-level keys of a few worker prefixes (offset.storage, config.storage, status.storage,
key/value/header.converter, task, worker, replication.policy) reach a herder's worker; any
other top-level worker key - ``offset.flush.interval.ms`` - is dropped by Kafka, so strom drops
it too and warns, naming the key and the per-cluster form Kafka honours.

The reference tests run ``MirrorMakerConfig.workerConfig`` and ``DistributedConfig`` from the
connect-mirror / connect-runtime 4.3.1 jars (KafkaMirrorWorkerConfig.java beside this file) and
compare key for key, and the resolved worker settings with strom's WorkerConfig."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from strom.connect.mirror.config import MirrorMakerConfig, SourceAndTarget
from strom.connect.runtime.config import WorkerConfig
from strom.core.testing import java_problem

REPO = Path(__file__).resolve().parents[2]
JAVA_PROGRAM = Path(__file__).with_name("KafkaMirrorWorkerConfig.java")
KMIRROR_LIB = REPO / ".cache" / "kmirror" / "lib"
BASE = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092", "A->B.enabled": "true"}
RESOLVED = ("offset.flush.interval.ms", "offset.flush.timeout.ms", "rebalance.timeout.ms", "session.timeout.ms",
            "heartbeat.interval.ms", "task.shutdown.graceful.timeout.ms")

VARIANTS: dict[str, dict[str, str]] = {
    "top-level-flush": {**BASE, "offset.flush.interval.ms": "1000"},
    "cluster-flush": {**BASE, "B.offset.flush.interval.ms": "2000", "offset.flush.interval.ms": "1000",
                      "A.offset.flush.timeout.ms": "7000"},
    "worker-prefixes": {**BASE, "task.shutdown.graceful.timeout.ms": "9000", "tasks.max": "4",
                        "offset.storage.replication.factor": "1", "key.converter.schemas.enable": "false",
                        "worker.sync.timeout.ms": "4000", "replication.policy.separator": "_"},
    "client-and-rebalance": {**BASE, "security.protocol": "PLAINTEXT", "rebalance.timeout.ms": "1000",
                             "B.rebalance.timeout.ms": "30000", "session.timeout.ms": "20000",
                             "B.heartbeat.interval.ms": "2000", "group.id": "mine"},
    "three-clusters": {"clusters": "A, B, C", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
                       "C.bootstrap.servers": "c:1", "A->B.enabled": "true", "C->B.enabled": "true",
                       "emit.heartbeats.enabled": "false", "offset.flush.timeout.ms": "100",
                       "B.offset.flush.timeout.ms": "6000"},
}


@pytest.mark.unit
def test_top_level_worker_key_warns_naming_the_per_cluster_form(caplog: pytest.LogCaptureFixture) -> None:
    mm = MirrorMakerConfig({**BASE, "emit.heartbeats.enabled": "false", "offset.flush.interval.ms": "1000",
                            "B.offset.flush.timeout.ms": "6000", "rebalance.timeout.ms": "5"})
    with caplog.at_level(logging.WARNING, logger="strom.connect.mirror.config"):
        mm.validate()
    assert mm.ignored_worker_keys() == ["offset.flush.interval.ms", "rebalance.timeout.ms"]
    warned = caplog.text
    assert "'offset.flush.interval.ms' at the top level is ignored" in warned
    assert "set it per target cluster: 'B.offset.flush.interval.ms'" in warned
    assert "'B.rebalance.timeout.ms'" in warned
    # one message per key (not also "isn't a known config"), none for the per-cluster form
    assert "isn't a known config" not in warned and "'B.offset.flush.timeout.ms' at the top" not in warned
    worker = WorkerConfig.from_mapping(mm.worker_config(SourceAndTarget("A", "B")))
    assert worker.offset_flush_interval_ms == 60000  # dropped, as Kafka drops it
    assert worker.offset_flush_timeout_ms == 6000  # the target cluster's own setting is honoured


@pytest.mark.unit
def test_keys_kafka_reads_at_the_top_level_do_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    mm = MirrorMakerConfig({**BASE, "tasks.max": "2", "offset.storage.replication.factor": "1",
                            "listeners": "http://:0", "dedicated.mode.enable.internal.rest": "true",
                            "security.protocol": "PLAINTEXT", "config.providers": "file"})
    with caplog.at_level(logging.WARNING, logger="strom.connect.mirror.config"):
        mm.validate()
    assert mm.ignored_worker_keys() == [] and "ignored" not in caplog.text


@pytest.fixture(scope="module")
def kafka_worker_configs() -> dict[str, dict[str, dict[str, str]]]:
    """variant -> flow -> Kafka's workerConfig, plus "*key" entries for DistributedConfig's values."""
    problem = java_problem()
    if problem is not None:
        pytest.skip(f"Kafka's MirrorMakerConfig needs Java: {problem}")
    if not (KMIRROR_LIB / "connect-mirror-4.3.1.jar").exists():
        pytest.skip("Kafka 4.3.1's MirrorMaker jars are not in .cache/kmirror/lib (bench/mirror.py fetches them)")
    blocks = []
    for name, props in VARIANTS.items():
        flows = " ".join(str(f) for f in MirrorMakerConfig(props).cluster_pairs())
        blocks.append(f"### {name} {flows}\n" + "\n".join(f"{k}={v}" for k, v in props.items()))
    done = subprocess.run(["java", "-Xmx128m", "-cp", str(KMIRROR_LIB / "*"), str(JAVA_PROGRAM)],
                          input="\n".join(blocks) + "\n", capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"KafkaMirrorWorkerConfig.java failed: {done.stderr[-3000:]}"
    out: dict[str, dict[str, dict[str, str]]] = {name: {} for name in VARIANTS}
    for line in done.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] in out:
            key, _, value = parts[2].partition("=")
            out[parts[0]].setdefault(parts[1], {})[key] = value
    return out


@pytest.mark.reference
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_worker_config_is_kafkas(variant: str, kafka_worker_configs: dict[str, dict[str, dict[str, str]]]) -> None:
    mm = MirrorMakerConfig(VARIANTS[variant])
    assert kafka_worker_configs[variant], variant
    for flow in mm.cluster_pairs():
        kafka = kafka_worker_configs[variant][str(flow)]
        ours = mm.worker_config(flow)
        assert ours == {k: v for k, v in kafka.items() if not k.startswith("*")}, f"{variant} {flow}"
        worker = WorkerConfig.from_mapping(ours)
        aliases = {f.alias: n for n, f in WorkerConfig.model_fields.items()}
        resolved = {k: str(getattr(worker, aliases[k])) for k in RESOLVED}
        assert resolved == {k: kafka["*" + k] for k in RESOLVED}, f"{variant} {flow}"
