"""Network layer: asyncio listener, framing, per-connection ordering, request dispatch, purgatory."""
