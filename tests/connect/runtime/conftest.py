"""Runtime tests: the test plugins of ``strom_test_connect_plugins.py`` (next to this file) are
importable by that name.

pytest's importlib mode puts no test folder on ``sys.path``; the module is loaded from its file
into ``sys.modules`` once, so the tests and the plugin registry share one module object.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PLUGINS_MODULE = "strom_test_connect_plugins"


def _load(name: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_load(PLUGINS_MODULE)
