"""Runtime-test setup: the shared word count helpers (``wordcount_app``) beside these tests.

pytest runs with ``--import-mode=importlib``, which does not put test folders on ``sys.path``;
this conftest puts this one there once, as tests/faults/conftest.py does for its helpers, so the
test modules import ``wordcount_app`` without touching ``sys.path`` themselves.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
