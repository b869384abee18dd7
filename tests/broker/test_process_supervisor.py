"""strom.core.testing's process supervisor, the one behind strom's broker, the reference Kafka and
Kafka Connect processes and the benchmarks' peers: ready line, output, stop, group kill,
pause/resume, the unit-tier guard, and importing a script by its path.

The children here are tiny shell/Python programs, no broker, so these tests are of the unit
tier; the ones that start a child lift the tier guard for themselves (monkeypatch) and say so.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from pathlib import Path
from typing import Self

import pytest

from strom.core.testing import TIER_ENV, ManagedProcess, import_script, wait_for


class Child(ManagedProcess):
    """A shell command under supervision, ready when it prints ``ready``."""

    name = "child"

    def __init__(self, script: str) -> None:
        super().__init__()
        self.script = script

    def start(self) -> Self:
        self.spawn(["bash", "-c", self.script], ready=lambda line: line == "ready")
        if not self.wait_ready(30):
            raise self.fail_start("no ready line")
        return self


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def allow_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """These children are not brokers: lift the unit tier's no-process guard for this test."""
    monkeypatch.delenv(TIER_ENV, raising=False)


def test_unit_tier_refuses_to_start_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIER_ENV, "unit")
    child = Child("echo ready")
    with pytest.raises(RuntimeError, match="mark the test `broker`"):
        child.start()
    assert child.proc is None


@pytest.mark.usefixtures("allow_children")
def test_ready_line_output_and_clean_stop() -> None:
    # SIGTERM is trapped and turned into exit code 3: stop() is the clean shutdown and returns it.
    with Child("trap 'echo bye; exit 3' TERM; echo starting; echo ready; while :; do sleep 0.1; done") as child:
        assert child.ready_line == "ready" and child.alive
        assert child.log_text().splitlines()[:2] == ["starting", "ready"]
        code = child.stop()
    assert code == 3 and not child.alive
    assert child.output[-1] == "bye"


@pytest.mark.usefixtures("allow_children")
def test_a_child_that_exits_before_its_ready_line_fails_start_with_its_output() -> None:
    with pytest.raises(RuntimeError, match="no ready line:\nboom"):
        Child("echo boom; exit 1").start()


@pytest.mark.usefixtures("allow_children")
def test_kill_takes_the_whole_process_group() -> None:
    child = Child("sleep 600 & echo ready; wait").start()
    pgid = child.pid  # the child leads a session of its own
    assert group_alive(pgid)
    child.kill()
    # The grandchild (sleep) went with it: nothing is left in the group.
    wait_for(lambda: not group_alive(pgid), timeout=10, what="the process group to be gone")


@pytest.mark.usefixtures("allow_children")
def test_pause_stops_the_child_until_resume() -> None:
    child = Child("echo ready; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done").start()
    try:
        wait_for(lambda: len(child.output) > 3, timeout=10, what="ticks")
        child.pause()
        wait_for(lambda: _state(child.pid) == "T", timeout=10, what="the child to be stopped (state T)")
        child.resume()
        wait_for(lambda: _state(child.pid) != "T", timeout=10, what="the child to run again")
        seen = len(child.output)
        wait_for(lambda: len(child.output) > seen, timeout=10, what="ticks after resume")
    finally:
        child.kill()


def _state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2]


@pytest.mark.usefixtures("allow_children")
def test_stop_escalates_to_sigkill_when_sigterm_is_ignored() -> None:
    child = Child("trap '' TERM; echo ready; while :; do sleep 0.1; done").start()
    assert child.stop(timeout=0.5) == -signal.SIGKILL


def test_import_script_loads_once_under_the_files_stem(tmp_path: Path) -> None:
    script = tmp_path / "strom_probe_script.py"
    script.write_text("LOADS = []\nLOADS.append(1)\n")
    try:
        first = import_script(script)
        assert first.LOADS == [1]
        assert import_script(script) is first and sys.modules["strom_probe_script"] is first
        assert importlib.import_module("strom_probe_script") is first  # a plain import finds it too
    finally:
        sys.modules.pop("strom_probe_script", None)


def test_import_script_of_a_missing_file_is_an_import_error(tmp_path: Path) -> None:
    with pytest.raises(ImportError, match="does not exist"):
        import_script(tmp_path / "nope.py")
    assert "nope" not in sys.modules
