"""Dedicated mode (Kafka's ``MirrorMaker`` driver, ``connect-mirror-maker.sh``):
``strom connect mirror-maker mm2.properties [--clusters B ...]``.

For every flow ``source->target`` of the file whose target is one of ``--clusters`` (all by
default), one distributed Connect herder runs with its internal topics on the target
(``mm2-configs.<source>.internal`` &c., group ``<source>-mm2``) and the flow's three connectors;
several processes started on the same file join the same groups and share the tasks. As in
Kafka, every process writes the connector configs it computed from the file; only the group
leader's write succeeds, the others' are ignored.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Sequence

from strom.connect.exceptions import ConnectError, NotLeaderError, RebalanceNeededError
from strom.connect.mirror.config import CONNECTOR_CLASSES, MirrorMakerConfig, SourceAndTarget
from strom.connect.plugins import PluginRegistry
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.distributed import DistributedHerder

log = logging.getLogger(__name__)

READY_LINE = "strom mirror-maker started"


def _unused_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MirrorMaker:
    """One process of a dedicated MirrorMaker cluster."""

    def __init__(self, config: MirrorMakerConfig, clusters: Sequence[str] | None = None,
                 registry: PluginRegistry | None = None) -> None:
        config.validate()
        unknown = [c for c in clusters or () if c not in config.clusters]
        if unknown:
            raise ConnectError(f"--clusters names {unknown}, not in clusters={config.clusters}")
        self.config = config
        self.flows = [f for f in config.cluster_pairs() if not clusters or f.target in clusters]
        if not self.flows:
            raise ConnectError("no replication flow targets the given clusters (set <source>-><target>.enabled=true)")
        self.registry = registry or PluginRegistry()
        self.herders: dict[SourceAndTarget, DistributedHerder] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def worker_config(self, flow: SourceAndTarget) -> WorkerConfig:
        props = self.config.worker_config(flow)
        # A unique worker id per process and flow (Kafka's dedicated mode has no REST server
        # either; the id only names the worker in the status topic).
        props.setdefault("listeners", f"http://127.0.0.1:{_unused_port()}")
        return WorkerConfig.from_mapping(props)

    def start(self) -> None:
        for flow in self.flows:
            herder = DistributedHerder(self.worker_config(flow), self.registry)
            herder.start()
            self.herders[flow] = herder
            log.info("herder for %s started (group %s)", flow, herder.config.group_id)
            t = threading.Thread(target=self._configure, args=(flow, herder), daemon=True, name=f"mm2-config-{flow}")
            t.start()
            self._threads.append(t)

    def _configure(self, flow: SourceAndTarget, herder: DistributedHerder) -> None:
        """Write the flow's connector configs once this herder knows its group's leader; a
        follower's attempt is refused (NotLeaderError) and that is fine: the leader writes."""
        deadline = time.monotonic() + 300
        pending = list(CONNECTOR_CLASSES)
        while pending and not self._stop.is_set() and time.monotonic() < deadline:
            # short waits: stop() joins this thread and must not wait out a long one
            if not herder.wait_for_assignment(timeout=1.0):
                continue
            cls = pending[0]
            props = self.config.connector_base_config(flow, cls)
            try:
                herder.put_connector_config(props["name"], props, True)
                log.info("configured %s for %s", props["name"], flow)
                pending.pop(0)
            except NotLeaderError:
                log.info("%s: not the leader; the leader configures the connectors", flow)
                return
            except RebalanceNeededError:
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        for herder in self.herders.values():
            herder.stop()


def run(mm2_properties: str, clusters: Sequence[str] | None) -> int:
    """``strom connect mirror-maker``: run until SIGTERM/SIGINT (exit 0), 2 on a config error."""
    from strom.connect.cli import _wait_for_signal

    try:
        maker = MirrorMaker(MirrorMakerConfig.load(mm2_properties), clusters)
    except (ConnectError, ValueError) as exc:
        log.error("strom connect mirror-maker: %s", exc)
        return 2
    try:
        maker.start()
        log.info("%s: %s", READY_LINE, ", ".join(str(f) for f in maker.flows))
        _wait_for_signal()
        return 0
    finally:
        maker.stop()
