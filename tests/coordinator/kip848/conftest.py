"""Makes this folder's helper module (``group_harness``) importable by plain name: pytest runs
with ``--import-mode=importlib``, which does not put test folders on ``sys.path``."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
