"""Runs every code block of the user guide (docs/guide/*.md) the way a reader would.

The convention is documented at the top of docs/guide/index.md: a fenced block's info string is
its language followed by attributes. ``bash`` blocks run through ``bash -eo pipefail`` with
strom's ``bin`` folder first on PATH; ``python`` blocks run in a fresh interpreter; a block with
``file=NAME`` is written to NAME in the page's working directory (a config file the next blocks
use); ``text`` blocks are output shown to the reader and are not run. Each page runs top to
bottom in its own temporary working directory. A ``daemon`` block (``strom dev``, a Connect
worker) starts in the background and the page waits until every ``port=N`` it names accepts
connections; daemons stop when the page ends. The well-known ports a page uses (9092, 9093,
8083, 8084, 9404, 5000, 8080), where written as ``host:PORT``, ``--port PORT``,
``--console-port PORT`` or ``-p PORT``, are
replaced by free ports before anything runs, so a page never collides
with another broker on the machine. ``java`` blocks need a JVM (Spark) and are skipped, with the
reason, where there is none. ``timeout=S`` bounds a block (default 90 s).

A page is one test; pages with a ``slow`` block are marked slow. The broker is the real one:
``strom dev`` started by the page itself, exactly as the reader starts it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"
RUN_LANGS = frozenset({"bash", "python"})
SHOWN_LANGS = frozenset({"text"})  # output shown to the reader; nothing to run
WELL_KNOWN_PORTS = ("9092", "9093", "8083", "8084", "9404", "5000", "8080")
DEFAULT_TIMEOUT = 90.0
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.S | re.M)


@dataclass
class Block:
    page: str
    line: int
    lang: str
    attrs: dict[str, str]
    body: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Page:
    path: Path
    blocks: list[Block] = field(default_factory=list)

    def has(self, attr: str) -> bool:
        return any(attr in b.attrs for b in self.blocks)


def parse_blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, with its info string split into language and attributes
    (``word`` or ``key=value``)."""
    text = path.read_text()
    blocks = []
    for m in _FENCE.finditer(text):
        words = m.group(1).split()
        lang = words[0] if words else ""
        attrs = {}
        for word in words[1:]:
            key, _, value = word.partition("=")
            attrs[key] = value
        blocks.append(Block(path.name, text.count("\n", 0, m.start()) + 1, lang, attrs, m.group(2)))
    return blocks


def _pages() -> list[Page]:
    return [Page(p, parse_blocks(p)) for p in sorted(GUIDE.glob("*.md"))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _page_params() -> list[object]:
    params: list[object] = []
    for page in _pages():
        if not any(b.lang in RUN_LANGS or "file" in b.attrs for b in page.blocks):
            continue
        marks = [pytest.mark.slow] if page.has("slow") else []
        params.append(pytest.param(page, id=page.path.stem, marks=marks))
    return params


def test_every_block_is_runnable_or_shown() -> None:
    """No block escapes the runner: each is bash, python, a file, or output shown as text."""
    pages = _pages()
    assert pages, f"no guide pages under {GUIDE}"
    for page in pages:
        for block in page.blocks:
            ok = block.lang in RUN_LANGS or block.lang in SHOWN_LANGS or "file" in block.attrs
            assert ok, f"{block.where}: a ```{block.lang} block is neither run nor marked as a file or text"


class PageRun:
    """One page's working directory, port map, environment and background daemons."""

    def __init__(self, page: Page, workdir: Path) -> None:
        self.page = page
        self.workdir = workdir
        self.ports = {p: str(_free_port()) for p in WELL_KNOWN_PORTS}
        bindir = str(Path(sys.executable).parent)
        self.env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
                    "PYTHONUNBUFFERED": "1", "STROM_LOG_LEVEL": os.environ.get("STROM_LOG_LEVEL", "WARN")}
        self.daemons: list[tuple[Block, subprocess.Popen[bytes], Path]] = []

    def rewrite(self, text: str) -> str:
        # only where a port is written (host:PORT, --port PORT, --console-port PORT, -p PORT), so that a count such
        # as --max-messages 5000 stays as it is
        for known, free in self.ports.items():
            text = re.sub(rf"(?:(?<=:)|(?<=-port )|(?<=-p )){known}\b", free, text)
        return text

    def _argv(self, block: Block, index: int) -> list[str]:
        body = self.rewrite(block.body)
        if block.lang == "python":
            script = self.workdir / f"_block{index}.py"
            script.write_text(body)
            return [sys.executable, str(script)]
        return ["bash", "-eo", "pipefail", "-c", body]

    def run(self, block: Block, index: int) -> None:
        if "file" in block.attrs:
            (self.workdir / block.attrs["file"]).write_text(self.rewrite(block.body))
            return
        if block.lang not in RUN_LANGS:
            return
        timeout = float(block.attrs.get("timeout") or DEFAULT_TIMEOUT)
        if "daemon" in block.attrs:
            self._start_daemon(block, index, timeout)
            return
        proc = subprocess.run(self._argv(block, index), cwd=self.workdir, env=self.env, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        out = proc.stdout.decode(errors="replace")
        assert proc.returncode == 0, f"{block.where} exited {proc.returncode}:\n{out[-4000:]}{self.daemon_logs()}"
        expect = block.attrs.get("expect")
        if expect:
            assert expect in out, f"{block.where}: {expect!r} not in output:\n{out[-4000:]}"

    def _start_daemon(self, block: Block, index: int, timeout: float) -> None:
        log = self.workdir / f"_daemon{index}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(self._argv(block, index), cwd=self.workdir, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.daemons.append((block, proc, log))
        ports = [int(self.ports.get(p, p)) for p in block.attrs.get("port", "").split(",") if p]
        deadline = time.monotonic() + timeout
        while not all(_port_open(p) for p in ports):
            assert proc.poll() is None, f"{block.where} exited {proc.returncode}:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"{block.where}: ports {ports} not open in {timeout}s\n" \
                                                f"{log.read_text()[-4000:]}"
            time.sleep(0.2)  # polling interval of the readiness check, not a stand-in for it

    def daemon_logs(self) -> str:
        return "".join(f"\n--- {b.where} (daemon) log:\n{log.read_text(errors='replace')[-3000:]}"
                       for b, _, log in self.daemons)

    def stop(self) -> None:
        # Ctrl-C as the reader would, then a kill for anything that does not stop in time
        for _, proc, _ in reversed(self.daemons):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        for _, proc, _ in reversed(self.daemons):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.mark.broker
@pytest.mark.parametrize("page", _page_params())
def test_guide_page(page: Page, tmp_path: Path) -> None:
    if page.has("java") and shutil.which("java") is None:
        pytest.skip(f"{page.path.name} has blocks that need Java 17 (Spark), and there is no java on PATH")
    run = PageRun(page, tmp_path)
    try:
        for index, block in enumerate(page.blocks):
            run.run(block, index)
    finally:
        run.stop()
