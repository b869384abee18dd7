"""The admin calls MirrorMaker's connectors and tasks make, each bounded in time (issue 28: no
client call waits forever): a call that times out or fails with a retriable Kafka error raises
:class:`MirrorRetriableError`, which callers treat as back-pressure (log, retry at the next
round), never as a reason to fail the connector.

A connector's background thread passes its stop event (``stop=``): the wait for an answer is
then cut into slices of at most :data:`STOP_CHECK_S` and given up once the event is set
(:class:`MirrorCallAbandoned`), so stopping a connector while a cluster is unreachable never
waits for ``admin.timeout.ms``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from strom.connect.exceptions import ConnectException, RetriableException

log = logging.getLogger(__name__)
T = TypeVar("T")


# How often a bounded wait looks at its stop event; a stopping connector's thread ends within it.
STOP_CHECK_S = 0.25
# How long a connector's stop() waits for its background thread (its calls give up within
# STOP_CHECK_S of the stop event, so this is a safety bound, not an expected wait).
CONNECTOR_STOP_TIMEOUT_S = 5.0


class BackgroundThread:
    """A mirror connector's discovery thread and the stop event its bounded calls watch.

    Not thread-safe: the herder calls a connector's start() and stop() from one thread.
    """

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        """Clear the stop event before the connector (re)starts."""
        self.stopping.clear()

    def start(self, target: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    def stop(self, owner: str) -> None:
        """Set the stop event and wait (bounded) for the thread; ``owner`` names it in the log."""
        self.stopping.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(timeout=CONNECTOR_STOP_TIMEOUT_S)
        if thread.is_alive():
            log.error("%s: background thread did not stop within %.0f s", owner, CONNECTOR_STOP_TIMEOUT_S)


# One list_topics attempt of a stoppable caller: long enough for a loaded cluster's answer,
# short enough that a stopping connector is not held up by an unreachable one.
LIST_TOPICS_ATTEMPT_S = 2.0


class MirrorRetriableError(RetriableException):
    """A bounded client call timed out or failed retriably; try again later."""


class MirrorCallAbandoned(MirrorRetriableError):
    """The caller is stopping: the call's answer is no longer waited for."""


def admin_client(config: Mapping[str, str]) -> AdminClient:
    return AdminClient(dict(config))


def result(future: Future[T], timeout: float, what: str, stop: threading.Event | None = None) -> T:
    """``future.result`` within ``timeout`` seconds; timeouts and retriable Kafka errors become
    :class:`MirrorRetriableError`, other Kafka errors :class:`ConnectException`. With ``stop``,
    a set event ends the wait (:class:`MirrorCallAbandoned`) within :data:`STOP_CHECK_S`."""
    deadline = time.monotonic() + timeout
    try:
        if stop is None:
            return future.result(timeout=timeout)
        while True:
            if stop.is_set():
                raise MirrorCallAbandoned(f"{what}: abandoned, stopping")
            try:
                return future.result(timeout=max(0.0, min(STOP_CHECK_S, deadline - time.monotonic())))
            except FutureTimeout:
                if time.monotonic() >= deadline:
                    raise
    except FutureTimeout:
        raise MirrorRetriableError(f"{what}: no answer within {timeout:.0f} s") from None
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and (err.retriable() or err.code() in _RETRIABLE_CODES):
            raise MirrorRetriableError(f"{what}: {err.str()}") from None
        raise ConnectException(f"{what}: {exc}") from exc


_RETRIABLE_CODES = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN,
                              KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER,
                              KafkaError.LEADER_NOT_AVAILABLE, KafkaError.COORDINATOR_NOT_AVAILABLE,
                              KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS})


def topic_partitions(admin: AdminClient, timeout: float, stop: threading.Event | None = None) -> dict[str, int]:
    """Topic -> partition count of every topic of the cluster. ``list_topics`` blocks in
    librdkafka and cannot be interrupted, so with ``stop`` it is asked in attempts of at most
    :data:`LIST_TOPICS_ATTEMPT_S` each (a reachable cluster answers within one) until ``timeout`` or the event."""
    deadline = time.monotonic() + timeout
    while True:
        if stop is not None and stop.is_set():
            raise MirrorCallAbandoned("listing topics: abandoned, stopping")
        remaining = deadline - time.monotonic()
        try:
            md = admin.list_topics(timeout=max(0.1, remaining if stop is None else min(LIST_TOPICS_ATTEMPT_S, remaining)))
            break
        except KafkaException as exc:
            if stop is None or time.monotonic() >= deadline:
                raise MirrorRetriableError(f"listing topics: {exc}") from None
    out: dict[str, int] = {}
    for name, t in md.topics.items():
        if t.error is None and t.partitions:
            out[name] = len(t.partitions)
    return out


def create_topics(admin: AdminClient, topics: Iterable[NewTopic], timeout: float,
                  stop: threading.Event | None = None) -> list[str]:
    """Create topics; ones that already exist are fine. Returns the names created."""
    new = list(topics)
    if not new:
        return []
    created: list[str] = []
    futures = admin.create_topics(new, request_timeout=timeout, operation_timeout=timeout)
    for name, fut in futures.items():
        try:
            result(fut, timeout, f"creating topic {name}", stop)
            created.append(name)
        except ConnectException as exc:
            cause = exc.__cause__
            err = cause.args[0] if isinstance(cause, KafkaException) and cause.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise
    return created


def create_topic(admin: AdminClient, name: str, partitions: int, replication_factor: int,
                 configs: Mapping[str, str], timeout: float, stop: threading.Event | None = None) -> bool:
    """Create one topic (``replication_factor`` -1: the broker's default). True if created."""
    return bool(create_topics(admin, [NewTopic(name, num_partitions=partitions,
                                               replication_factor=replication_factor, config=dict(configs))], timeout,
                                     stop))


def add_partitions(admin: AdminClient, counts: Mapping[str, int], timeout: float,
                   stop: threading.Event | None = None) -> None:
    if not counts:
        return
    futures = admin.create_partitions([NewPartitions(t, n) for t, n in counts.items()],
                                      request_timeout=timeout, operation_timeout=timeout)
    for name, fut in futures.items():
        result(fut, timeout, f"adding partitions to {name}", stop)


def topic_configs(admin: AdminClient, topics: Iterable[str], timeout: float,
                  stop: threading.Event | None = None) -> dict[str, dict[str, str]]:
    """The configs set on each topic (not the broker's defaults): Kafka's MM2 syncs only those."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    if not resources:
        return {}
    out: dict[str, dict[str, str]] = {}
    for res, fut in admin.describe_configs(resources, request_timeout=timeout).items():
        entries: dict[str, ConfigEntry] = result(fut, timeout, f"describing configs of {res.name}", stop)
        out[res.name] = {name: e.value for name, e in entries.items()
                         if e.value is not None and not e.is_default and not e.is_sensitive
                         and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    return out


def alter_topic_configs(admin: AdminClient, configs: Mapping[str, Mapping[str, str]], timeout: float,
                        stop: threading.Event | None = None) -> None:
    """Set the given configs on each topic (IncrementalAlterConfigs, SET only)."""
    resources = []
    for topic, values in configs.items():
        if not values:
            continue
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        for k, v in values.items():
            res.add_incremental_config(ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET))
        resources.append(res)
    if not resources:
        return
    for res, fut in admin.incremental_alter_configs(resources, request_timeout=timeout).items():
        result(fut, timeout, f"altering configs of {res.name}", stop)
