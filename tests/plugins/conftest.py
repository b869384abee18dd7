"""Fixtures of the plugin tests: the third-party test plugin, really pip-installed."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

TEST_PLUGIN_DIR = Path(__file__).resolve().parents[1] / "data" / "strom_test_plugin"


def _check_in_fresh_interpreter() -> str:
    """Import the plugin and find its entry point in a new interpreter (as the broker will)."""
    code = ("import importlib.metadata as m, strom_test_plugin;"
            "print([e.value for e in m.entry_points(group='strom.plugins') if e.name == 'strom_test_plugin'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return out.stdout.strip() + out.stderr.strip()


@pytest.fixture(scope="session")
def test_plugin_installed() -> str:
    """``pip install -e tests/data/strom_test_plugin`` into the running environment.

    Returns the package name. Installed for good: the plugin does nothing unless selected.
    """
    if _check_in_fresh_interpreter() != "['strom_test_plugin']":
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e",
                               str(TEST_PLUGIN_DIR)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
        seen = _check_in_fresh_interpreter()
        assert seen == "['strom_test_plugin']", f"installed but not importable: {seen}"
    # The editable install takes effect through a .pth file, which only new interpreters read;
    # this process gets the same source directory on its path.
    importlib.invalidate_caches()
    if importlib.util.find_spec("strom_test_plugin") is None:
        sys.path.append(str(TEST_PLUGIN_DIR))
        importlib.invalidate_caches()
    importlib.import_module("strom_test_plugin")
    return "strom_test_plugin"
