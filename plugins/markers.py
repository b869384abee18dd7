"""The marker pair of strom's pluggy project.

Hook specifications are decorated with :data:`hookspec`, implementations in plugins with
:data:`hookimpl`. Both belong to the pluggy project ``"strom"``, so pluggy only considers
functions marked for strom (a plugin module may contain other code freely).
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "strom"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
