"""The Connect worker: runs connectors and their tasks (each task in its own thread).

``Worker(config, registry, offset_store_factory)`` is shared by the standalone and distributed
herders; the herder decides *what* runs, the worker runs it:

* ``start_connector(name, props, ctx, status_listener, target_state) -> bool`` — instantiate,
  ``initialize(ctx)`` and (unless STOPPED) ``start(props)`` the connector;
* ``connector_task_configs(name, max_tasks)`` — the connector's task configs, each with
  ``task.class`` and, for sinks, the connector's ``topics``/``topics.regex``;
* ``start_task(task_id, conn_props, task_props, status_listener, target_state) -> bool`` —
  build converters, transformations, error handling and a :class:`WorkerSourceTask` (or
  :class:`ExactlyOnceWorkerSourceTask`) / :class:`WorkerSinkTask` thread;
* ``stop_connector``, ``stop_and_await_task``, ``set_target_state``, ``connector_names``,
  ``task_ids``, ``stop``.

``offset_store_factory`` is a zero-argument callable giving the worker's
:class:`~strom.connect.runtime.offsets.OffsetBackingStore`; the worker starts it at once and
stops it in ``stop()``; it is available as ``worker.offset_store``.

Status listeners get Kafka's callbacks in snake_case: ``on_startup(id)``, ``on_pause(id)``,
``on_resume(id)``, ``on_failure(id, exc)``, ``on_shutdown(id)``, ``on_stop(id)`` (connectors)
and ``on_restart(id)`` (optional, before an automatic task restart). The id is the connector
name for connectors and a ``ConnectorTaskId`` for tasks. ``errors.format_trace(exc)`` gives a
failure's trace for the status.

Automatic restart (strom; opt-in with ``errors.restart.enable``): a failed task is restarted
with the same configuration after ``errors.restart.backoff.ms`` doubling up to
``errors.restart.backoff.max.ms``, at most ``errors.restart.max.retries`` times (-1: no limit).
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from strom.connect.exceptions import ConnectException
from strom.connect.runtime.config import ConnectorConfig, WorkerConfig, warn_connector_typos
from strom.connect.runtime.errors import (
    DeadLetterQueueReporter,
    ErrorReporter,
    LogReporter,
    ProcessingContext,
    RetryWithToleranceOperator,
    Stage,
)
from strom.connect.runtime.herder import ConnectorTaskId, TargetState
from strom.connect.runtime.offsets import OffsetBackingStore

log = logging.getLogger("strom.connect.worker")

TASK_CLASS_CONFIG = "task.class"


class StatusListener(Protocol):
    def on_startup(self, id: Any) -> None: ...

    def on_pause(self, id: Any) -> None: ...

    def on_resume(self, id: Any) -> None: ...

    def on_failure(self, id: Any, exc: BaseException) -> None: ...

    def on_shutdown(self, id: Any) -> None: ...


def _notify(listener: Any, method: str, *args: Any) -> None:
    fn = getattr(listener, method, None)
    if fn is None:
        return
    try:
        fn(*args)
    except Exception:
        log.exception("status listener %s.%s failed", type(listener).__name__, method)


def class_path(cls: type) -> str:
    """The name written as ``task.class``: Kafka's when the class declares one."""
    return getattr(cls, "KAFKA_CLASS_NAME", None) or f"{cls.__module__}.{cls.__qualname__}"


def connector_kind(connector_cls: type) -> Literal["source", "sink"]:
    from strom.connect.api.connector import SinkConnector, SourceConnector

    if issubclass(connector_cls, SourceConnector):
        return "source"
    if issubclass(connector_cls, SinkConnector):
        return "sink"
    raise ConnectException(f"{class_path(connector_cls)} is neither a SourceConnector nor a SinkConnector")


# -- transformations -------------------------------------------------------------------------


class TransformationChain:
    """Kafka's ``TransformationChain``: each stage applies unless its predicate (xor ``negate``) says no."""

    def __init__(self, stages: list[tuple[Any, Any, bool]]) -> None:
        self.stages = stages  # (transformation, predicate or None, negate)

    def __bool__(self) -> bool:
        return bool(self.stages)

    def apply(self, record: Any, pctx: ProcessingContext | None = None) -> Any:
        for transform, predicate, negate in self.stages:
            if pctx is not None:
                pctx.executing_class = transform
            if predicate is not None and predicate.test(record) == negate:
                continue
            record = transform.apply(record)
            if record is None:
                return None
        return record

    def close(self) -> None:
        seen: set[int] = set()
        for transform, predicate, _ in self.stages:
            for obj in (transform, predicate):
                if obj is not None and id(obj) not in seen:
                    seen.add(id(obj))
                    try:
                        obj.close()
                    except Exception:
                        log.exception("closing %s failed", type(obj).__name__)

    @classmethod
    def build(cls, cfg: ConnectorConfig, registry: Any) -> TransformationChain:
        predicates: dict[str, Any] = {}
        for alias in cfg.get("predicates"):
            prefix = f"predicates.{alias}."
            pred = registry.predicate_class(cfg.originals[prefix + "type"])()
            pred.configure(cfg.with_prefix(prefix))
            predicates[alias] = pred
        stages = []
        for alias in cfg.get("transforms"):
            prefix = f"transforms.{alias}."
            conf = cfg.with_prefix(prefix)
            pred_alias = conf.pop("predicate", None)
            negate = conf.pop("negate", "false").strip().lower() == "true"
            transform = registry.transformation_class(conf["type"])()
            transform.configure(conf)
            stages.append((transform, predicates[pred_alias] if pred_alias else None, negate))
        return cls(stages)


# -- the task thread base ----------------------------------------------------------------------


class WorkerTask(threading.Thread, ABC):
    """One task's thread: start, run until stopped, report status; pause/resume via target state."""

    def __init__(self, task_id: ConnectorTaskId, status_listener: Any, target_state: TargetState,
                 on_exit: Callable[[WorkerTask], None] | None = None) -> None:
        super().__init__(name=f"task-{task_id.connector}-{task_id.task}", daemon=True)
        self.id = task_id
        self.status_listener = status_listener
        self.target_state = target_state
        self.stopping = threading.Event()
        self.state_changed = threading.Event()
        self.failure: BaseException | None = None
        self.on_exit = on_exit
        self.active_topics: set[str] = set()  # REST /connectors/{c}/topics
        self.cancelled = False

    # -- control (any thread) -----------------------------------------------------------

    def stop(self) -> None:
        self.stopping.set()
        self.state_changed.set()

    def cancel(self) -> None:
        """The worker gave up waiting for this task to stop (Kafka's ``WorkerTask.cancel``): its
        thread may still finish, but it reports no more status, so a late failure or shutdown
        of this instance never replaces the state of the instance that runs the task now."""
        self.cancelled = True
        self.stop()

    def transition_to(self, state: TargetState) -> None:
        if state == self.target_state:
            return
        self.target_state = state
        self.state_changed.set()

    def await_stop(self, timeout: float) -> bool:
        self.join(timeout)
        return not self.is_alive()

    @property
    def paused(self) -> bool:
        return self.target_state != TargetState.STARTED

    # -- the thread ----------------------------------------------------------------------

    def run(self) -> None:
        try:
            self.execute()
        except BaseException as exc:
            self.failure = exc
            log.error("task %s-%d failed", self.id.connector, self.id.task, exc_info=exc)
        finally:
            try:
                self.close()
            except Exception as exc:
                log.exception("closing task %s-%d failed", self.id.connector, self.id.task)
                if self.failure is None:
                    self.failure = exc
            if self.cancelled:
                log.info("task %s-%d (cancelled) ended%s", self.id.connector, self.id.task,
                         f" with {self.failure!r}" if self.failure is not None else "")
            elif self.failure is not None:
                _notify(self.status_listener, "on_failure", self.id, self.failure)
            else:
                _notify(self.status_listener, "on_shutdown", self.id)
            if self.on_exit is not None:
                self.on_exit(self)

    @abstractmethod
    def execute(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def wait_while_paused(self) -> bool:
        """Blocks while PAUSED (reporting the transitions); True if the task should go on."""
        if not self.paused:
            return not self.stopping.is_set()
        _notify(self.status_listener, "on_pause", self.id)
        while self.paused and not self.stopping.is_set():
            self.state_changed.wait(0.5)
            self.state_changed.clear()
            self.while_paused()
        if self.stopping.is_set():
            return False
        _notify(self.status_listener, "on_resume", self.id)
        return True

    def while_paused(self) -> None:
        """Called about twice a second while paused (sinks keep their consumer alive)."""


# -- the worker ----------------------------------------------------------------------------------


class _ConnectorEntry:
    def __init__(self, name: str, connector: Any, props: dict[str, str], kind: str,
                 listener: Any, state: TargetState) -> None:
        self.name = name
        self.connector = connector
        self.props = props
        self.kind = kind
        self.listener = listener
        self.state = state
        self.started = False


class _TaskEntry:
    def __init__(self, task: WorkerTask, conn_props: dict[str, str], task_props: dict[str, str],
                 listener: Any) -> None:
        self.task = task
        self.conn_props = conn_props
        self.task_props = task_props
        self.listener = listener
        self.restarts = 0
        self.restart_timer: threading.Timer | None = None


class Worker:
    """Runs connectors and tasks for a herder (see the module doc)."""

    def __init__(self, config: WorkerConfig, registry: Any,
                 offset_store_factory: Callable[[], OffsetBackingStore]) -> None:
        self.config = config
        self.registry = registry
        self.offset_store = offset_store_factory()
        self.offset_store.start()
        self._lock = threading.RLock()
        self._connectors: dict[str, _ConnectorEntry] = {}
        self._tasks: dict[ConnectorTaskId, _TaskEntry] = {}
        self._stopped = False

    # -- connectors -----------------------------------------------------------------------

    def start_connector(self, name: str, props: Mapping[str, str], ctx: Any, status_listener: Any,
                        target_state: TargetState) -> bool:
        with self._lock:
            if name in self._connectors:
                raise ConnectException(f"Connector {name} already running on this worker")
            try:
                cfg = ConnectorConfig(props)
                cls = self.registry.connector_class(cfg.connector_class)
                kind = connector_kind(cls)
                ConnectorConfig(props, kind)  # full validation of the kind's keys
                connector = cls()
            except Exception as exc:
                _notify(status_listener, "on_failure", name, exc)
                return False
            warn_connector_typos(name, props, kind, lambda: connector.config().names())
            entry = _ConnectorEntry(name, connector, dict(props), kind, status_listener, target_state)
            self._connectors[name] = entry
            try:
                connector.initialize(ctx)
                if target_state != TargetState.STOPPED:
                    connector.start(dict(props))
                    entry.started = True
            except Exception as exc:
                log.error("connector %s failed to start", name, exc_info=exc)
                _notify(status_listener, "on_failure", name, exc)
                return False
            if target_state == TargetState.STARTED:
                _notify(status_listener, "on_startup", name)
            elif target_state == TargetState.PAUSED:
                _notify(status_listener, "on_pause", name)
            else:
                _notify(status_listener, "on_stop", name)
            return True

    def is_running(self, name: str) -> bool:
        with self._lock:
            return name in self._connectors

    def is_sink_connector(self, name: str) -> bool:
        with self._lock:
            entry = self._connectors.get(name)
            return entry is not None and entry.kind == "sink"

    def connector_task_configs(self, name: str, max_tasks: int) -> list[dict[str, str]]:
        with self._lock:
            entry = self._connectors.get(name)
            if entry is None:
                raise ConnectException(f"Connector {name} not running on this worker")
            connector = entry.connector
            props = entry.props
        task_cls = connector.task_class()
        configs = connector.task_configs(max_tasks)
        if len(configs) > max_tasks:
            raise ConnectException(f"Connector {name} produced {len(configs)} task configs, "
                                   f"more than tasks.max={max_tasks}")
        out = []
        for conf in configs:
            conf = {str(k): str(v) for k, v in conf.items()}
            conf[TASK_CLASS_CONFIG] = class_path(task_cls)
            if entry.kind == "sink":
                for key in ("topics", "topics.regex"):
                    if props.get(key):
                        conf[key] = props[key]
            out.append(conf)
        return out

    def stop_connector(self, name: str) -> bool:
        with self._lock:
            entry = self._connectors.pop(name, None)
        if entry is None:
            return False
        try:
            if entry.started:
                entry.connector.stop()
        except Exception as exc:
            log.error("connector %s failed to stop", name, exc_info=exc)
            _notify(entry.listener, "on_failure", name, exc)
            return True
        _notify(entry.listener, "on_shutdown", name)
        return True

    def set_target_state(self, name: str, state: TargetState) -> None:
        with self._lock:
            entry = self._connectors.get(name)
            tasks = [t.task for tid, t in self._tasks.items() if tid.connector == name]
        if entry is not None and entry.state != state:
            previous, entry.state = entry.state, state
            try:
                if state == TargetState.STOPPED and entry.started:
                    entry.connector.stop()
                    entry.started = False
                elif state != TargetState.STOPPED and not entry.started:
                    entry.connector.start(dict(entry.props))
                    entry.started = True
            except Exception as exc:
                _notify(entry.listener, "on_failure", name, exc)
            else:
                if state == TargetState.PAUSED:
                    _notify(entry.listener, "on_pause", name)
                elif state == TargetState.STOPPED:
                    _notify(entry.listener, "on_stop", name)
                elif previous != TargetState.STARTED:
                    _notify(entry.listener, "on_resume", name)
        for task in tasks:
            task.transition_to(state)

    def connector_names(self) -> list[str]:
        with self._lock:
            return sorted(self._connectors)

    def connector_type(self, name: str) -> str | None:
        with self._lock:
            entry = self._connectors.get(name)
            return None if entry is None else entry.kind

    # -- tasks ------------------------------------------------------------------------------

    def start_task(self, task_id: ConnectorTaskId, conn_props: Mapping[str, str],
                   task_props: Mapping[str, str], status_listener: Any, target_state: TargetState) -> bool:
        with self._lock:
            if task_id in self._tasks:
                raise ConnectException(f"Task {task_id.connector}-{task_id.task} already running on this worker")
            try:
                task = self._build_task(task_id, dict(conn_props), dict(task_props), status_listener,
                                        target_state)
            except Exception as exc:
                log.error("task %s-%d could not be created", task_id.connector, task_id.task, exc_info=exc)
                _notify(status_listener, "on_failure", task_id, exc)
                return False
            self._tasks[task_id] = _TaskEntry(task, dict(conn_props), dict(task_props), status_listener)
            task.start()
            return True

    def _build_task(self, task_id: ConnectorTaskId, conn_props: dict[str, str], task_props: dict[str, str],
                    listener: Any, target_state: TargetState) -> WorkerTask:
        base = ConnectorConfig(conn_props)
        connector_cls = self.registry.connector_class(base.connector_class)
        kind = connector_kind(connector_cls)
        cfg = ConnectorConfig(conn_props, kind)
        task_cls = connector_cls().task_class()
        task = task_cls()
        key_conv = self._converter(cfg, "key")
        value_conv = self._converter(cfg, "value")
        header_conv = self._header_converter(cfg)
        chain = TransformationChain.build(cfg, self.registry)
        operator = self._error_operator(cfg)
        if kind == "source":
            from strom.connect.runtime.worker_source_task import source_task_class

            producer_conf = self.config.producer_config(cfg.with_prefix("producer.override."))
            return source_task_class(self.config)(task_id, task, task_props, cfg, self.config, key_conv, value_conv,
                                    header_conv, chain, operator, self.offset_store, producer_conf,
                                    listener, target_state, self._on_task_exit)
        from strom.connect.runtime.worker_sink_task import WorkerSinkTask

        consumer_conf = self.config.consumer_config(
            {"group.id": f"connect-{cfg.name}", **cfg.with_prefix("consumer.override.")})
        return WorkerSinkTask(task_id, task, task_props, cfg, self.config, key_conv, value_conv, header_conv,
                              chain, operator, consumer_conf, listener, target_state, self._on_task_exit)

    def _converter(self, cfg: ConnectorConfig, which: str) -> Any:
        key = f"{which}.converter"
        name = cfg.originals.get(key)
        if name:
            configs: dict[str, Any] = cfg.with_prefix(key + ".")
        else:
            name = getattr(self.config, f"{which}_converter")
            configs = self.config.with_prefix(key + ".")
        conv = self.registry.converter_class(name)()
        configs["converter.type"] = which
        conv.configure(configs, which == "key")
        return conv

    def _header_converter(self, cfg: ConnectorConfig) -> Any:
        name = cfg.originals.get("header.converter")
        if name:
            configs: dict[str, Any] = cfg.with_prefix("header.converter.")
        else:
            name = self.config.header_converter
            configs = self.config.with_prefix("header.converter.")
        conv = self.registry.header_converter_class(name)()
        configs["converter.type"] = "header"
        conv.configure(configs)
        return conv

    def _error_operator(self, cfg: ConnectorConfig) -> RetryWithToleranceOperator:
        reporters: list[ErrorReporter] = []
        if cfg.get("errors.log.enable"):
            reporters.append(LogReporter(cfg.get("errors.log.include.messages")))
        if cfg.dlq_topic:
            producer_conf = self.config.producer_config(cfg.with_prefix("producer.override."))
            reporters.append(DeadLetterQueueReporter.create(
                producer_conf, cfg.dlq_topic, cfg.get("errors.deadletterqueue.topic.replication.factor"),
                cfg.get("errors.deadletterqueue.context.headers.enable"), self.config.admin_config()))
        return RetryWithToleranceOperator(
            retry_timeout_ms=cfg.get("errors.retry.timeout"),
            retry_delay_max_ms=cfg.get("errors.retry.delay.max.ms"),
            tolerance_all=cfg.tolerance_all, reporters=reporters)

    def _on_task_exit(self, task: WorkerTask) -> None:
        """A task thread ended; schedule an automatic restart if it failed and that is enabled."""
        with self._lock:
            entry = self._tasks.get(task.id)
            if entry is None or entry.task is not task or task.failure is None or self._stopped:
                return
            try:
                cfg = ConnectorConfig(entry.conn_props)
            except Exception:
                return
            if not cfg.get("errors.restart.enable") or task.stopping.is_set():
                return
            limit = cfg.get("errors.restart.max.retries")
            if 0 <= limit <= entry.restarts:
                log.error("task %s-%d failed %d times; not restarting it again",
                          task.id.connector, task.id.task, entry.restarts + 1)
                return
            delay_ms = min(cfg.get("errors.restart.backoff.ms") * (2 ** entry.restarts),
                           cfg.get("errors.restart.backoff.max.ms"))
            entry.restarts += 1
            log.info("restarting failed task %s-%d in %d ms (attempt %d)", task.id.connector, task.id.task,
                     delay_ms, entry.restarts)
            timer = threading.Timer(delay_ms / 1000, self._auto_restart, args=(task.id, task))
            timer.daemon = True
            entry.restart_timer = timer
            timer.start()

    def _auto_restart(self, task_id: ConnectorTaskId, failed: WorkerTask) -> None:
        with self._lock:
            entry = self._tasks.get(task_id)
            if entry is None or entry.task is not failed or self._stopped:
                return
            _notify(entry.listener, "on_restart", task_id)
            try:
                task = self._build_task(task_id, entry.conn_props, entry.task_props, entry.listener,
                                        failed.target_state)
            except Exception as exc:
                _notify(entry.listener, "on_failure", task_id, exc)
                return
            entry.task = task
            entry.restart_timer = None
            task.start()

    def task_failure(self, task_id: ConnectorTaskId) -> BaseException | None:
        with self._lock:
            entry = self._tasks.get(task_id)
            return None if entry is None else entry.task.failure

    def task_active_topics(self, task_id: ConnectorTaskId) -> set[str]:
        with self._lock:
            entry = self._tasks.get(task_id)
            return set() if entry is None else entry.task.active_topics

    def task_restarts(self, task_id: ConnectorTaskId) -> int:
        with self._lock:
            entry = self._tasks.get(task_id)
            return 0 if entry is None else entry.restarts

    def stop_and_await_task(self, task_id: ConnectorTaskId, timeout: float | None = None,
                            stop_started: float | None = None) -> bool:
        """Stops one task and waits for it (``task.shutdown.graceful.timeout.ms``); False if it hung.

        ``stop_started`` (``time.monotonic()``): the task is one of several stopped together
        under one shared deadline that began then (``timeout`` is what is left of it)."""
        with self._lock:
            entry = self._tasks.pop(task_id, None)
        if entry is None:
            return False
        if entry.restart_timer is not None:
            entry.restart_timer.cancel()
        entry.task.stop()
        bound_ms = self.config.task_shutdown_graceful_timeout_ms
        wait = bound_ms / 1000 if timeout is None else timeout
        if not entry.task.await_stop(max(wait, 0.001)):
            if stop_started is None:
                log.error("task %s-%d did not stop within task.shutdown.graceful.timeout.ms=%d (waited %.1f s); "
                          "cancelling it", task_id.connector, task_id.task, bound_ms, wait)
            else:
                log.error("task %s-%d did not stop within task.shutdown.graceful.timeout.ms=%d, the bound shared "
                          "by the tasks stopping together (%.1f s since they were asked to stop, %.1f s of it "
                          "waiting for this one); cancelling it", task_id.connector, task_id.task, bound_ms,
                          time.monotonic() - stop_started, max(wait, 0.0))
            entry.task.cancel()
            return False
        return True

    def stop_and_await_tasks(self, task_ids: list[ConnectorTaskId]) -> None:
        with self._lock:
            entries = [(tid, self._tasks.get(tid)) for tid in task_ids]
        for _, entry in entries:  # signal all first, so they stop in parallel
            if entry is not None:
                entry.task.stop()
        started = time.monotonic()
        deadline = started + self.config.task_shutdown_graceful_timeout_ms / 1000
        for tid, _ in entries:
            self.stop_and_await_task(tid, max(0.001, deadline - time.monotonic()), started)

    def task_ids(self) -> list[ConnectorTaskId]:
        with self._lock:
            return sorted(self._tasks, key=lambda t: (t.connector, t.task))

    def running_task(self, task_id: ConnectorTaskId) -> WorkerTask | None:
        """The task object running ``task_id`` here (its counters feed strom.connect.runtime.metrics)."""
        with self._lock:
            entry = self._tasks.get(task_id)
            return entry.task if entry is not None else None

    def stop_and_await_connectors(self, names: list[str]) -> list[str]:
        """Stops connectors in parallel, each ``stop()`` on its own thread, and waits for them
        within one ``task.shutdown.graceful.timeout.ms`` (Kafka's ``stopAndAwaitConnectors``);
        returns the names of those still stopping then, which are left to finish on their own."""
        threads = [threading.Thread(target=self.stop_connector, args=(name,), daemon=True,
                                    name=f"connector-stop-{name}") for name in names]
        for t in threads:
            t.start()
        bound_ms = self.config.task_shutdown_graceful_timeout_ms
        deadline = time.monotonic() + bound_ms / 1000
        hung: list[str] = []
        for name, t in zip(names, threads, strict=True):
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                hung.append(name)
                log.error("Connector '%s' failed to properly shut down within task.shutdown.graceful.timeout.ms=%d, "
                          "has become unresponsive, and may be consuming external resources. Correct the "
                          "configuration for this connector or remove the connector.", name, bound_ms)
        return hung

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self.stop_and_await_tasks(self.task_ids())
        self.stop_and_await_connectors(self.connector_names())
        self.offset_store.stop()


__all__ = [
    "TASK_CLASS_CONFIG",
    "Stage",
    "TransformationChain",
    "Worker",
    "WorkerTask",
    "class_path",
    "connector_kind",
]
