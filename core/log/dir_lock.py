"""One process owns a data directory: an exclusive lock on ``<dir>/.lock``, as Kafka takes.

Kafka's ``LogManager`` locks ``.lock`` in every log dir (and the metadata log dir) with
``FileChannel.tryLock`` before it reads anything, and refuses to start with "Failed to acquire
lock on file .lock in <dir>. A Kafka instance in another process or thread is using this
directory." strom does the same with a POSIX record lock (``fcntl.lockf``, what the JVM's
``tryLock`` uses on Linux), so a strom and a Kafka broker pointed at one directory also
exclude each other. The holder writes its pid into the file after locking, so a refused
process can name it (``F_GETLK`` names it too, and also for a Kafka holder that writes none).

POSIX locks belong to the process, not to a descriptor, and closing *any* descriptor of the
file drops them. So this process never opens a lock file it already holds: a module-level
registry (by the directory's device and inode) answers a second attempt from the same
process, as Kafka's ``OverlappingFileLockException`` does for a second thread.

A refused attempt never creates or modifies anything: the lock file is opened without
``O_CREAT`` when it exists, and nothing is written before the lock is held.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path

from strom.core.exceptions import LogDirLockedError

LOCK_FILE = ".lock"

# struct flock on Linux (x86-64 and arm64): l_type, l_whence, l_start, l_len, l_pid (+ padding).
_FLOCK = struct.Struct("hhqqi4x")

_registry_lock = threading.Lock()
_held: dict[tuple[int, int], DirLock] = {}


def _holder_pid(fd: int) -> int | None:
    """The pid holding a conflicting lock on ``fd``'s file (F_GETLK), else the pid in the file."""
    try:
        probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        l_type, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, probe))
        if l_type != fcntl.F_UNLCK and pid > 0:
            return int(pid)
    except (OSError, struct.error):
        pass
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class DirLock:
    """This process's exclusive lock on one directory's ``.lock`` file."""

    def __init__(self, directory: Path, fd: int, key: tuple[int, int]) -> None:
        self.directory = directory
        self.path = directory / LOCK_FILE
        self._fd: int | None = fd
        self._key = key

    @classmethod
    def acquire(cls, directory: str | os.PathLike[str]) -> DirLock:
        """Lock ``directory`` (created if missing) or raise :class:`LogDirLockedError`."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        st = os.stat(d)
        key = (st.st_dev, st.st_ino)
        with _registry_lock:
            held = _held.get(key)
            if held is not None:
                if not held.stale:
                    raise LogDirLockedError(d, os.getpid(), same_process=True)
                # The held lock file was deleted (its dir removed, the inode number reused by
                # this new dir): that lock protects nothing any more.
                held._forget()
            path = d / LOCK_FILE
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                try:
                    if e.errno in (errno.EACCES, errno.EAGAIN):
                        raise LogDirLockedError(d, _holder_pid(fd)) from None
                    raise
                finally:
                    os.close(fd)  # this process holds no lock on the file: closing drops nothing
            try:
                pid = f"{os.getpid()}\n".encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, pid, 0)
            except OSError:
                pass  # the pid is a courtesy for the next process's message; the lock is what counts
            lock = cls(d, fd, key)
            _held[key] = lock
            return lock

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def stale(self) -> bool:
        """The locked file no longer exists (deleted with its directory)."""
        fd = self._fd
        return fd is None or os.fstat(fd).st_nlink == 0

    def _forget(self) -> None:
        """Drop a stale lock (called under the registry lock)."""
        fd, self._fd = self._fd, None
        _held.pop(self._key, None)
        if fd is not None:
            os.close(fd)  # its inode is gone: no other lock of this process is on it

    def release(self) -> None:
        """Unlock and close (idempotent). The file stays, as Kafka leaves its ``.lock``."""
        with _registry_lock:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            _held.pop(self._key, None)
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __repr__(self) -> str:
        return f"DirLock({self.path}, held={self.held})"


def lock_dirs(dirs: Iterable[str | os.PathLike[str]]) -> list[DirLock]:
    """Lock every directory (each once) or none: on a refusal the locks taken so far are released."""
    locks: list[DirLock] = []
    seen: set[tuple[int, int]] = set()
    try:
        for d in dirs:
            p = Path(d)
            p.mkdir(parents=True, exist_ok=True)
            st = os.stat(p)
            if (st.st_dev, st.st_ino) in seen:
                continue  # one dir named twice (metadata.log.dir is usually the first log dir)
            seen.add((st.st_dev, st.st_ino))
            locks.append(DirLock.acquire(p))
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    return locks


def release_all(locks: Iterable[DirLock]) -> None:
    for lock in locks:
        lock.release()
