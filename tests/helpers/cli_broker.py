"""``strom broker start`` as a real process on a node formatted with ``strom storage format``.

:func:`broker_start` is for tests of the command itself (tests/cli); every other test starts its
broker through :class:`strom.core.testing.BrokerProcess` (``strom dev``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from strom.core.testing import READY_PREFIX

CLI = [sys.executable, "-m", "strom.core.cli"]


def node_properties(directory: Path) -> Path:
    """A combined node's ``server.properties`` under ``directory`` (logs in ``logs/``, metadata in
    ``meta/``, a free port); the rebalance delay and every other key left at Kafka's default."""
    props = directory / "server.properties"
    props.write_text(
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        "controller.quorum.voters=1@127.0.0.1:0\n"
        f"log.dirs={directory / 'logs'}\n"
        f"metadata.log.dir={directory / 'meta'}\n")
    return props


@contextlib.contextmanager
def broker_start(directory: Path) -> Iterator[str]:
    """Format the node of :func:`node_properties`, run ``strom broker start`` on it and yield its
    bootstrap address (from the ready line); on exit SIGTERM, which must end it with status 0."""
    props = node_properties(directory)
    formatted = subprocess.run([*CLI, "storage", "format", "--config", str(props)], capture_output=True,
                               text=True, timeout=120, check=False)
    assert formatted.returncode == 0, formatted.stderr
    proc = subprocess.Popen([*CLI, "broker", "start", "--config", str(props)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                            start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        while not (line := lines.get(timeout=60)).startswith(READY_PREFIX):
            pass
        yield line.strip()[len(READY_PREFIX):]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
