"""LogDirFailureChannel: one place where an I/O error on a log dir takes that dir offline (Kafka's).

Any ``OSError`` from the storage engine's writes (ENOSPC on a full disk, EIO from a failing
one, a checkpoint that cannot be written) is reported here with the dir it happened in. The
first report of a dir logs one ERROR naming the dir, the operation and the errno, and tells
the listeners (the LogManager marks every log of the dir offline); later reports of the same
dir are silent, so a producer retrying into a full disk cannot flood the log.

What an offline dir serves (strom's decision for a single-node broker): its partitions answer
KAFKA_STORAGE_ERROR (56) to every append; reads of what is already on disk keep being served
(a read that itself fails answers KAFKA_STORAGE_ERROR), so consumers can drain acknowledged
records from a full disk. Kafka stops serving the dir's replicas altogether because another
broker takes over their leadership; a single-node strom has no other copy, so it keeps the
reads. The dir stays offline until the broker is restarted on a repaired dir: no checkpoint
and no clean-shutdown marker is written into it, so the restart recovers its logs.

Thread-safe: reports come from the event loop and from flush/maintenance worker threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

OfflineListener = Callable[[Path], None]


class LogDirFailureChannel:
    """The offline log dirs of this broker, and who must hear about a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[Path, str] = {}
        self._listeners: list[OfflineListener] = []

    def add_listener(self, listener: OfflineListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def maybe_add_offline_log_dir(self, log_dir: Path, message: str, error: OSError) -> bool:
        """Take ``log_dir`` offline after ``error``; returns True for the first report of the dir."""
        reason = f"{message}: {error.strerror or error}"
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = reason
            listeners = list(self._listeners)
        logger.error("%s (errno %s). Log dir %s is now offline: its partitions answer KAFKA_STORAGE_ERROR to "
                     "writes until the broker is restarted with the dir repaired (free space, replace the "
                     "disk); what is on disk is still served to readers.", reason,
                     error.errno, log_dir)
        for listener in listeners:
            listener(log_dir)
        return True

    def is_offline(self, log_dir: Path) -> bool:
        return log_dir in self._offline

    def reason(self, log_dir: Path) -> str | None:
        return self._offline.get(log_dir)

    @property
    def offline_dirs(self) -> list[Path]:
        with self._lock:
            return list(self._offline)
