"""Producer ids for idempotent producers, handed out from blocks the controller allocates.

The controller commits a ProducerIdsRecord for every block (1000 ids), so ids are never reused
across restarts; the broker serves ids from its current block and asks for the next block
when it runs out. Event-loop only.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class ProducerIdAllocator(Protocol):
    """The controller's side: commits a ProducerIdsRecord and returns (first id, block size)."""

    async def allocate_producer_ids(self, broker_id: int) -> tuple[int, int]: ...


class ProducerIdManager:
    """Serves producer ids from controller-allocated blocks."""

    def __init__(self, controller: ProducerIdAllocator, broker_id: int) -> None:
        self.controller = controller
        self.broker_id = broker_id
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def generate(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                first, size = await self.controller.allocate_producer_ids(self.broker_id)
                self._next, self._end = first, first + size
            pid = self._next
            self._next += 1
            return pid
