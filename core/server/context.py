"""Per-request context handed to handlers, the authorizer and the quota manager.

It lives in :mod:`strom.core.request_context` (below the coordinators, which use it too); this
module keeps the server's name for it.
"""

from __future__ import annotations

from strom.core.request_context import Authorizing, RequestContext

__all__ = ["Authorizing", "RequestContext"]
