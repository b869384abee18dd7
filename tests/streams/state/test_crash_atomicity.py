"""kill -9 of a process writing a RocksDB store: after reopening, data and changelog offsets
are always from the same commit (old state + old offsets, or new + new, never a mix)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from strom.streams.state import RocksDBKeyValueStore, RocksDBWindowStore

TP = ("app-kv-changelog", 0)
N_KEYS = 300

CHILD = textwrap.dedent(
    """
    import signal, sys
    from strom.streams.state import RocksDBKeyValueStore, RocksDBWindowStore
    path, mode = sys.argv[1], sys.argv[2]
    kv = RocksDBKeyValueStore("kv", path + "/kv")
    win = RocksDBWindowStore("win", path + "/win", 10**12, 10)
    gen = kv.committed_offsets().get(("app-kv-changelog", 0), 0)
    while True:
        gen += 1
        val = str(gen).encode()
        for i in range(N_KEYS):
            kv.put(b"k%05d" % i, val)
            win.put(b"k%05d" % i, val, i)
        if mode == "pending" and gen > 3:
            print("pending", gen - 1, flush=True)
            signal.pause()  # killed here: the writes of gen are not committed
        kv.commit({("app-kv-changelog", 0): gen})
        win.commit({("app-kv-changelog", 0): gen})
        print("committed", gen, flush=True)
    """
).replace("N_KEYS", str(N_KEYS))


def _run_child(tmp: Path, mode: str, kill_after: float | None) -> list[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp), mode], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        if kill_after is None:  # wait for the "pending" marker
            for line in proc.stdout:
                lines.append(line.strip())
                if line.startswith("pending"):
                    break
        else:
            # once the child is in its loop (its first commit), the kill lands at a point of the
            # loop that depends on kill_after: a chosen kill time, not a wait for a condition
            for line in proc.stdout:
                lines.append(line.strip())
                if line.startswith("committed"):
                    break
            time.sleep(kill_after)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        lines += [line.strip() for line in proc.stdout]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return lines


def _check_consistent(tmp: Path) -> int:
    kv = RocksDBKeyValueStore("kv", tmp / "kv")
    win = RocksDBWindowStore("win", tmp / "win", 10**12, 10)
    try:
        gen = kv.committed_offsets().get(TP, 0)
        values = {v for _, v in kv.all()}
        wgen = win.committed_offsets().get(TP, 0)
        wvalues = {v for _, v in win.all()}
        if gen:
            assert values == {str(gen).encode()}, f"offset {gen} but values {sorted(values)[:5]}"
            assert len(list(kv.all())) == N_KEYS
        else:
            assert values == set()
        if wgen:
            assert wvalues == {str(wgen).encode()}
        else:
            assert wvalues == set()
        return gen
    finally:
        kv.close()
        win.close()


def test_kill_with_uncommitted_writes_keeps_last_commit(tmp_path: Path) -> None:
    lines = _run_child(tmp_path, "pending", None)
    assert lines[-1] == "pending 3"
    assert _check_consistent(tmp_path) == 3


@pytest.mark.parametrize("delay", [0.9, 1.3, 1.7])
def test_kill_at_random_points_never_mixes(tmp_path: Path, delay: float) -> None:
    # the first kill lands mid-loop (between puts and commit, or inside a commit); a second
    # run continues from what it finds, then is killed again
    lines = _run_child(tmp_path, "loop", delay)
    gen = _check_consistent(tmp_path)
    # kill -9 can cut the child's last line short ("committed" without its number): parse only
    # complete lines; a truncated number only makes the check below weaker, never wrong
    committed = [int(m.group(1)) for x in lines if (m := re.fullmatch(r"committed (\d+)", x))]
    # the last commit the child reported is durable (WAL written before it printed)
    assert not committed or gen >= committed[-1]
    _run_child(tmp_path, "loop", delay)
    assert _check_consistent(tmp_path) >= gen
