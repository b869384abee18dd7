"""Purgatory: requests that wait for a condition (delayed fetch, delayed produce).

A waiting request registers a future under keys (topic-partitions). Whoever changes the state
of a key (an append, a high-watermark move) calls :meth:`Purgatory.check_and_complete`, which
wakes every waiter on that key; the waiter re-checks its own condition and either answers or
waits again until its deadline. Waits never block the event loop. Event-loop only.

A condition runs on every wake of any of its keys, so it must be cheap: it compares snapshots
(Kafka's ``DelayedOperation.tryComplete``; a delayed fetch compares offset metadata, see
:class:`strom.core.server.handlers.fetch.DelayedFetch`) and does no I/O; the waiter does its
real work once, after the wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable


class Purgatory:
    """Watchers keyed by hashable keys (usually ``(topic, partition)``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[asyncio.Future[None]]] = {}

    def __len__(self) -> int:
        return sum(len(w) for w in self._watchers.values())

    async def wait_until(self, keys: Iterable[Hashable], condition: Callable[[], bool],
                         timeout_s: float) -> bool:
        """Wait until ``condition()`` holds (re-checked whenever a key is touched) or the timeout.

        Returns the final value of ``condition()``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        keys = list(keys)
        while True:
            if condition():
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            fut: asyncio.Future[None] = loop.create_future()
            for key in keys:
                self._watchers.setdefault(key, set()).add(fut)
            try:
                await asyncio.wait_for(asyncio.shield(fut), remaining)
            except TimeoutError:
                pass
            finally:
                for key in keys:
                    watchers = self._watchers.get(key)
                    if watchers is not None:
                        watchers.discard(fut)
                        if not watchers:
                            del self._watchers[key]

    def check_and_complete(self, key: Hashable) -> int:
        """Wake the waiters watching ``key``; returns how many were woken."""
        watchers = self._watchers.pop(key, None)
        if not watchers:
            return 0
        for fut in watchers:
            if not fut.done():
                fut.set_result(None)
        return len(watchers)

    def wake_all(self) -> None:
        for key in list(self._watchers):
            self.check_and_complete(key)
