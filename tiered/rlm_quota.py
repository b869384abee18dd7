"""Kafka's ``RLMQuotaManager`` for remote fetches: ``remote.log.manager.fetch.max.bytes.per.second``.

Broker-wide. Each remote read records the bytes it returned; while the rate measured over the
last ``remote.log.manager.fetch.quota.window.num`` windows of
``remote.log.manager.fetch.quota.window.size.seconds`` exceeds the bound, the quota is exceeded
and a Fetch skips its remote reads (those partitions answer no records, the rest of the response
is served), as Kafka's ``ReplicaManager`` does. The rate is Kafka's ``Rate`` over a
``SampledStat``: the bytes of the windows kept, over their elapsed time, counted as at least
``window.num - 1`` whole windows (so a burst right after start is not taken for a high rate).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from strom.tiered.config_values import ConfigReader

LONG_MAX = 2**63 - 1
FETCH_RATE_KEY = "remote.log.manager.fetch.max.bytes.per.second"
WINDOW_NUM_KEY = "remote.log.manager.fetch.quota.window.num"
WINDOW_SIZE_KEY = "remote.log.manager.fetch.quota.window.size.seconds"


class RLMQuotaManager:
    """A byte rate bound over sampled windows; thread-safe."""

    def __init__(self, bytes_per_second: int, window_num: int = 11, window_size_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bound = bytes_per_second
        self.window_num = window_num
        self.window_size_s = window_size_s
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: deque[list[float]] = deque()  # [window start, bytes]

    @classmethod
    def from_config(cls, config: Mapping[str, object]) -> RLMQuotaManager:
        r = ConfigReader(config)
        return cls(r.integer(FETCH_RATE_KEY, LONG_MAX, minimum=1), r.integer(WINDOW_NUM_KEY, 11, minimum=1),
                   float(r.integer(WINDOW_SIZE_KEY, 1, minimum=1)))

    @property
    def unbounded(self) -> bool:
        return self.bound >= LONG_MAX

    def record(self, n: int) -> None:
        if self.unbounded or n <= 0:
            return
        now = self._clock()
        with self._lock:
            self._purge(now)
            if not self._samples or now - self._samples[-1][0] >= self.window_size_s:
                self._samples.append([now, 0.0])
            self._samples[-1][1] += n

    def rate(self) -> float:
        """Bytes per second over the kept windows (Kafka's ``Rate.measure``)."""
        now = self._clock()
        with self._lock:
            self._purge(now)
            if not self._samples:
                return 0.0
            total = sum(s[1] for s in self._samples)
            elapsed = now - self._samples[0][0]
            full = int(elapsed // self.window_size_s)
            if full < self.window_num - 1:
                elapsed += (self.window_num - 1 - full) * self.window_size_s
            return total / max(elapsed, self.window_size_s)

    def is_quota_exceeded(self) -> bool:
        return not self.unbounded and self.rate() > self.bound

    def _purge(self, now: float) -> None:
        # Caller holds the lock: windows older than window.num windows are forgotten.
        horizon = now - self.window_num * self.window_size_s
        while self._samples and self._samples[0][0] + self.window_size_s <= horizon:
            self._samples.popleft()
