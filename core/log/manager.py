"""LogManager: the log dirs of a broker, loading/recovery at startup, checkpoints, retention, deletion.

The constructor locks ``.lock`` in every log dir and in the metadata log dir (see
:mod:`strom.core.log.dir_lock`) before anything is read: a second broker on the same dirs stops
there, naming the dir and the process holding it. :meth:`LogManager.shutdown` releases them.

Per log dir it reads (and validates) ``meta.properties`` if present, consumes the clean
shutdown marker ``.kafka_cleanshutdown`` (present = every log was closed cleanly, so no
recovery scan; deleted before the logs load, KAFKA-10471, so a crash while loading recovers
next time), loads every ``<topic>-<partition>`` directory (in parallel, up to
``num.recovery.threads.per.data.dir`` threads per dir) with the offsets from
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint``, and removes leftover ``*-delete`` directories.

The marker holds ``{"version":0,"brokerEpoch":N}`` (Kafka 3.6+, KIP-966): the broker epoch of
the registration that shut down cleanly. :attr:`LogManager.previous_broker_epoch` is Kafka's
``readBrokerEpochFromCleanShutdownFiles``: that epoch when every log dir had a marker with the
same readable epoch, else -1; the broker sends it as the registration's PreviousBrokerEpoch.

Deleting a partition renames its dir to ``<topic>-<partition>.<uuid>-delete`` (atomic; the
partition is gone at once) and removes the files on a background thread, as Kafka does.
``run_maintenance(now_ms)`` (called by the broker from a worker thread) runs retention,
flushes due logs and the segments below a roll (which moves the recovery point, so a crash
recovers little), compacts ``cleanup.policy=compact`` logs and writes the checkpoints.

Storage errors: every ``OSError`` of a log, a checkpoint or the shutdown goes through
:class:`~strom.core.log.dir_failure.LogDirFailureChannel` (``dir_failure``), which logs one
ERROR and takes the dir offline: its logs refuse appends with KAFKA_STORAGE_ERROR and keep
serving reads, it gets no more checkpoints and no clean-shutdown marker, and new logs go to
the other dirs. An I/O error while loading a dir refuses the start with a message naming it.

Thread-safety: thread-safe. One lock guards the map of logs (and checkpoint writing); each
:class:`~strom.core.log.log.UnifiedLog` has its own lock for its data. Logs are never touched while
the manager's lock is held for longer than a map update, except in startup/shutdown.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from strom.core.config import BrokerConfig, LogConfig
from strom.core.errors import KafkaStorageError
from strom.core.exceptions import BrokerError, ConfigError
from strom.core.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    TopicPartition,
    fsync_dir,
    read_meta_properties,
    read_offset_checkpoint,
    write_atomically,
    write_offset_checkpoint,
)
from strom.core.log.cleaner import LogCleaner
from strom.core.log.dir_failure import LogDirFailureChannel
from strom.core.log.dir_lock import DirLock, lock_dirs, release_all
from strom.core.log.log import Log, parse_topic_partition

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
METADATA_TOPIC = "__cluster_metadata"


def _now_ms() -> int:
    return int(time.time() * 1000)


def read_clean_shutdown_epoch(marker: Path) -> int | None:
    """The ``brokerEpoch`` of a clean-shutdown marker (Kafka's ``CleanShutdownFileHandler.read``),
    None when it has none.

    A marker of Kafka < 3.6 (or of a strom of that age) is empty; one without the key is just as
    old-fashioned: both say "clean, epoch unknown", logged at INFO. A marker that is not JSON
    (a torn or damaged file) is only a WARNING naming the file: the logs were closed cleanly
    all the same, and a broker must never refuse to start over it. Kafka ignores ``version``
    and unknown keys (``@JsonIgnoreProperties(ignoreUnknown = true)``), so does this.
    """
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        logger.warning("Unable to read the broker epoch in the clean shutdown file %s: %s", marker, e)
        return None
    if not text.strip():
        logger.info("The clean shutdown file %s is empty (written before Kafka 3.6): no broker epoch", marker)
        return None
    try:
        content = json.loads(text)
    except ValueError as e:
        logger.warning("Unable to read the broker epoch in the clean shutdown file %s: not JSON (%s)", marker, e)
        return None
    if not isinstance(content, dict):
        logger.warning("Unable to read the broker epoch in the clean shutdown file %s: not a JSON object (%r)",
                       marker, text[:200])
        return None
    epoch = content.get("brokerEpoch")
    if epoch is None:
        logger.info("The clean shutdown file %s has no brokerEpoch", marker)
        return None
    # bool is an int in Python; Jackson would not read true as a Long either, nor 2**63.
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not -(1 << 63) <= epoch < (1 << 63):
        logger.warning("Unable to read the broker epoch in the clean shutdown file %s: brokerEpoch %r",
                       marker, epoch)
        return None
    return epoch


class LogManager:
    """All partition logs of a broker. Thread-safe (see the module docstring)."""

    def __init__(self, log_dirs: Sequence[str | os.PathLike[str]], broker_config: BrokerConfig, *,
                 clock: Callable[[], int] = _now_ms) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ConfigError("log.dirs", "", "at least one log directory")
        self.broker_config = broker_config
        self._clock = clock
        # Everything is due on the first call.
        self._last_retention_ms = self._last_cleaning_ms = self._last_checkpoint_ms = -(1 << 62)
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._deleters: list[threading.Thread] = []
        self.cleaner = LogCleaner(clock=clock)
        self.default_config = LogConfig.build(broker_config)
        self.meta_properties: dict[Path, dict[str, str]] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        # The brokerEpoch each dir's marker held at startup (None: no marker, or none readable).
        self.clean_shutdown_epochs: dict[Path, int | None] = {}
        # Kafka's readBrokerEpochFromCleanShutdownFiles, set by startup(); -1 = unclean/unknown.
        self.previous_broker_epoch = -1
        self.started = False
        # Every I/O error of the storage engine goes through here (Kafka's LogDirFailureChannel).
        self.dir_failure = LogDirFailureChannel()
        self.dir_failure.add_listener(self._on_dir_offline)
        # Before anything in the dirs is read or written (Kafka's LogManager does the same): a
        # second broker on these dirs stops here, having touched nothing. The metadata log dir
        # is locked too (the broker builds the LogManager before it opens the metadata log).
        self._dir_locks = lock_dirs([*self.log_dirs, broker_config.metadata_dir])

    # ------------------------------------------------------------------------------------------
    # startup

    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Load and recover every partition dir of every log dir."""
        configs = dict(topic_configs or {})
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            self._check_meta_properties(d)
        with ThreadPoolExecutor(max_workers=max(len(self.log_dirs), 1)) as pool:
            results = list(pool.map(lambda d: self._load_dir_or_refuse(d, configs), self.log_dirs))
        with self._lock:
            for loaded in results:
                for log in loaded:
                    self._logs[(log.topic, log.partition)] = log
            self.started = True
        self.previous_broker_epoch = self._read_broker_epoch_from_clean_shutdown_files()
        self.checkpoint()

    def _read_broker_epoch_from_clean_shutdown_files(self) -> int:
        """Kafka's ``LogManager.readBrokerEpochFromCleanShutdownFiles``: the epoch only if every
        log dir is online and had a marker with a readable epoch, all the same; else -1 (Kafka's
        empty OptionalLong, which its BrokerLifecycleManager sends as -1). Kafka reads the markers
        before loading; strom kept what each held when it deleted it (see :meth:`_load_dir`)."""
        if any(self.dir_failure.is_offline(d) for d in self.log_dirs):
            logger.info("A log dir is offline: no previous broker epoch")
            return -1
        epoch = -1
        for d in self.log_dirs:
            current = self.clean_shutdown_epochs.get(d)
            if current is None:
                logger.info("Unable to read the broker epoch in %s.", d)
                return -1
            if epoch != -1 and current != epoch:
                logger.info("Found different broker epochs in %s. Other=%d vs current=%d.", d, epoch, current)
                return -1
            epoch = current
        return epoch

    def _check_meta_properties(self, d: Path) -> None:
        try:
            props = read_meta_properties(d)
        except CheckpointError as e:
            raise ConfigError("log.dirs", str(d), f"a log dir with a valid meta.properties ({e})") from None
        if props is None:
            return
        node_id = props.get("node.id") or props.get("broker.id")
        if node_id is not None and int(node_id) != self.broker_config.node_id:
            raise ConfigError("node.id", self.broker_config.node_id,
                              f"the node id {node_id} stored in {d / 'meta.properties'}")
        self.meta_properties[d] = props

    def _load_dir_or_refuse(self, d: Path, configs: Mapping[str, LogConfig]) -> list[Log]:
        """Load a dir; an I/O error (recovery on a full disk) refuses the start with one message.

        Starting without the dir would let its partitions be created again, empty, in another
        dir; nothing has been written that a start on the repaired dir would not redo.
        """
        try:
            return self._load_dir(d, configs)
        except OSError as e:
            where = f" ({e.filename})" if e.filename else ""
            raise KafkaStorageError(
                f"Error while loading log dir {d}{where}: {e.strerror or e} (errno {e.errno}); free space "
                "or repair the disk, then start the broker again") from e

    def _load_dir(self, d: Path, configs: Mapping[str, LogConfig]) -> list[Log]:
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[d] = clean
        self.clean_shutdown_epochs[d] = read_clean_shutdown_epoch(marker) if clean else None
        if clean:
            # Consumed before loading, as Kafka does (KAFKA-10471): loading may change files (a
            # rebuilt index, a truncated tail), so a crash meanwhile must recover next time
            # rather than trust the old marker. The dir is synced so the deletion outlives a
            # power loss during that load.
            marker.unlink(missing_ok=True)
            fsync_dir(d)
        recovery = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        starts = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        hws = self._read_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT)
        jobs = []
        for child in sorted(d.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                self._delete_async(child)
                continue
            if "." in child.name or child.name.endswith(("-future", "-stray")):
                continue
            try:
                tp = parse_topic_partition(child.name)
            except ValueError:
                continue
            if tp[0] == METADATA_TOPIC:
                continue  # the KRaft metadata log is owned by raft, not by the LogManager
            jobs.append((child, tp))
        if not clean and jobs:
            # A directory without partitions (a fresh one, formatted just now) has nothing to
            # recover: saying "recovering 0 partition(s)" there reads like a crash report.
            logger.info("No clean shutdown marker in %s: recovering %d partition(s)", d, len(jobs))

        def load(job: tuple[Path, TopicPartition]) -> Log:
            path, tp = job
            return Log(path, configs.get(tp[0], self.default_config), recovery_point=recovery.get(tp, 0),
                       log_start_offset=starts.get(tp, 0), high_watermark=hws.get(tp, 0),
                       had_clean_shutdown=clean, clock=self._clock, io_error_handler=self._io_error,
                       remote_storage_system_enable=self.broker_config.remote_log_storage_system_enable)

        threads = max(self.broker_config.num_recovery_threads_per_data_dir, 1)
        with ThreadPoolExecutor(max_workers=threads) as pool:
            logs = list(pool.map(load, jobs))
        return logs

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(path)
        except CheckpointError as e:
            # Kafka treats a corrupt checkpoint as absent: recovery then starts from offset 0.
            logger.warning("Ignoring corrupt checkpoint file: %s", e)
            return {}

    # ------------------------------------------------------------------------------------------
    # logs

    def get_log(self, topic: str, partition: int) -> Log | None:
        with self._lock:
            return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def _next_log_dir(self) -> Path:
        """The online dir with the fewest partitions (Kafka's choice for a new log)."""
        online = [d for d in self.log_dirs if not self.dir_failure.is_offline(d)]
        if not online:
            raise KafkaStorageError(f"every log dir is offline: {', '.join(map(str, self.log_dirs))}")
        counts = {d: 0 for d in online}
        for log in self._logs.values():
            parent = log.dir.parent
            if parent in counts:
                counts[parent] += 1
        return min(online, key=lambda d: (counts[d], self.log_dirs.index(d)))

    # ------------------------------------------------------------------------------------------
    # storage errors

    def _io_error(self, log_dir: Path, message: str, error: OSError) -> None:
        self.dir_failure.maybe_add_offline_log_dir(log_dir, message, error)

    def _on_dir_offline(self, log_dir: Path) -> None:
        reason = self.dir_failure.reason(log_dir) or "I/O error"
        for log in self.all_logs():
            if log.dir.parent == log_dir:
                log.mark_offline(reason)

    def offline_dirs(self) -> list[Path]:
        return self.dir_failure.offline_dirs

    def get_or_create_log(self, topic: str, partition: int, topic_id: uuid.UUID | None = None,
                          config: LogConfig | None = None) -> Log:
        with self._lock:
            log = self._logs.get((topic, partition))
            if log is not None:
                if config is not None and config != log.config:
                    log.update_config(config)
                return log
            path = self._next_log_dir() / f"{topic}-{partition}"
            try:
                log = Log(path, config or self.default_config, topic_id=topic_id, clock=self._clock,
                          io_error_handler=self._io_error,
                          remote_storage_system_enable=self.broker_config.remote_log_storage_system_enable)
                fsync_dir(path.parent)
            except OSError as e:
                message = f"Error while creating log for {topic}-{partition} in dir {path.parent}"
                self.dir_failure.maybe_add_offline_log_dir(path.parent, message, e)
                raise KafkaStorageError(f"{message}: {e.strerror or e}") from None
            self._logs[(topic, partition)] = log
            return log

    def update_config(self, topic: str, config: LogConfig) -> None:
        for log in self.all_logs():
            if log.topic == topic:
                log.update_config(config)

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the dir to ``<topic>-<partition>.<uuid>-delete`` and remove it in the background."""
        with self._lock:
            log = self._logs.pop((topic, partition), None)
        if log is None:
            return False
        log.close()
        target = log.dir.with_name(f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.rename(log.dir, target)
        fsync_dir(target.parent)
        self.cleaner.forget(log)
        self._delete_async(target)
        return True

    def _delete_async(self, path: Path) -> None:
        thread = threading.Thread(target=shutil.rmtree, args=(path,), kwargs={"ignore_errors": True},
                                  name=f"delete-{path.name}", daemon=True)
        thread.start()
        with self._lock:
            self._deleters = [t for t in self._deleters if t.is_alive()] + [thread]

    def wait_for_deletions(self, timeout: float | None = None) -> None:
        with self._lock:
            threads = list(self._deleters)
        for t in threads:
            t.join(timeout)

    # ------------------------------------------------------------------------------------------
    # checkpoints, maintenance, shutdown

    def checkpoint(self) -> None:
        """Write the recovery point, log start and high watermark checkpoints of every dir."""
        with self._lock:
            logs = list(self._logs.items())
            for d in self.log_dirs:
                if self.dir_failure.is_offline(d):
                    continue  # nothing more is written into a failed dir (Kafka skips it too)
                mine = [(tp, log) for tp, log in logs if log.dir.parent == d]
                try:
                    write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT,
                                            {tp: log.recovery_point for tp, log in mine})
                    write_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT,
                                            {tp: log.log_start_offset for tp, log in mine})
                    write_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT,
                                            {tp: log.high_watermark for tp, log in mine})
                except OSError as e:
                    self.dir_failure.maybe_add_offline_log_dir(d, f"Error while writing checkpoints in dir {d}", e)

    def run_maintenance(self, now_ms: int | None = None, *, force: bool = False) -> dict[str, int]:
        """Due flushes, then retention, compaction and checkpoints when their intervals are due. Blocking.

        Called often (every second) by the broker; retention runs every
        ``log.retention.check.interval.ms``, the cleaner every ``log.cleaner.backoff.ms``, the
        checkpoints every ``log.flush.offset.checkpoint.interval.ms``, as in Kafka. ``force``
        runs everything now (tests, shutdown).
        """
        now = self._clock() if now_ms is None else now_ms
        cfg = self.broker_config
        retention_due = force or now - self._last_retention_ms >= cfg.log_retention_check_interval_ms
        cleaning_due = force or now - self._last_cleaning_ms >= cfg.log_cleaner_backoff_ms
        checkpoint_due = force or now - self._last_checkpoint_ms >= cfg.log_flush_offset_checkpoint_interval_ms
        stats = {"segments_deleted": 0, "logs_flushed": 0, "logs_cleaned": 0}
        for log in self.all_logs():
            if log.closed or log.offline:
                continue
            try:
                if retention_due:
                    stats["segments_deleted"] += log.delete_old_segments(now)
                    # Kafka checks producer.id.expiration.ms on its own (10 min) schedule; the
                    # retention pass is frequent enough for a 1-day expiry.
                    log.remove_expired_producers(now)
                if log.needs_flush(now):
                    log.flush()
                    stats["logs_flushed"] += 1
                elif log.roll_flush_pending:
                    log.flush_rolled_segments()
                    stats["logs_flushed"] += 1
                if cleaning_due and log.config.compact and cfg.log_cleaner_enable and (
                        self.cleaner.clean(log, now) is not None):
                    stats["logs_cleaned"] += 1
            except KafkaStorageError:
                continue  # reported (once) through the failure channel; the dir is offline
            except OSError as e:
                if log.closed:
                    continue  # deleted while we worked on it
                self.dir_failure.maybe_add_offline_log_dir(
                    log.dir.parent, f"Error while running maintenance of {log.dir.name} in dir {log.dir.parent}", e)
            except BrokerError:
                if log.closed:
                    continue
                raise
        if retention_due:
            self._last_retention_ms = now
        if cleaning_due:
            self._last_cleaning_ms = now
        if checkpoint_due or stats["segments_deleted"]:
            self.checkpoint()
            self._last_checkpoint_ms = now
        return stats

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Flush and close every log, write checkpoints and the clean shutdown marker, which holds
        ``broker_epoch`` (the epoch of the broker's registration; -1 when it never registered)."""
        if not self.started:
            # A start-up that failed (or never ran) loaded no log: checkpoints written now would
            # be empty and lose every partition's recovery point, log start and high watermark.
            with self._lock:
                logs = list(self._logs.values())
            for log in logs:
                log.close()
            self.release_locks()
            return
        with self._lock:
            logs = list(self._logs.values())
        for log in logs:
            if not log.offline:
                # An error is reported through the failure channel: its dir gets no marker below.
                with contextlib.suppress(KafkaStorageError):
                    log.flush()
        self.checkpoint()
        for log in logs:
            try:
                log.close()
            except OSError as e:
                self.dir_failure.maybe_add_offline_log_dir(
                    log.dir.parent, f"Error while closing {log.dir.name} in dir {log.dir.parent}", e)
        self.wait_for_deletions()
        for d in self.log_dirs:
            if self.dir_failure.is_offline(d):
                continue  # the next start recovers this dir's logs
            try:
                # Kafka 3.6+ writes a small JSON document into the marker (byte for byte as here).
                write_atomically(d / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": broker_epoch},
                                                                     separators=(",", ":")))
            except OSError as e:
                self.dir_failure.maybe_add_offline_log_dir(
                    d, f"Error while writing the clean shutdown marker in dir {d}", e)
        with self._lock:
            self._logs.clear()
            self.started = False
        self.release_locks()

    @property
    def dir_locks(self) -> list[DirLock]:
        return list(self._dir_locks)

    def release_locks(self) -> None:
        """Unlock the dirs (end of :meth:`shutdown`; tests that simulate a crash call it alone)."""
        release_all(self._dir_locks)
