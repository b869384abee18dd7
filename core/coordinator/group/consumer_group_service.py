"""The asynchronous side of KIP-848 groups: heartbeats, describes and timers against a broker.

A change to a :class:`~.consumer_group.ConsumerGroup` is compute -> write -> replay under the
group's lock: the group computes the records, the group coordinator shell persists them in
``__consumer_offsets`` (``write_records``) and replays them into the group. One timer task per
group with members fences those whose session (``group.consumer.session.timeout.ms``) or
revocation time (the member's rebalance timeout) ran out, through the same path.

What this needs from the shell (``GroupCoordinator``): ``get_or_create_consumer_group(group_id)``
``async write_records(group_id, records)`` and ``check_available(group_id)``; and from the broker: ``image`` (topics),
``plugin_manager`` and ``config`` (assignors and timeouts).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from strom.core.coordinator.group.consumer_group import (
    ConsumerGroup,
    GroupEnv,
    HeartbeatRequest,
    HeartbeatResult,
    Record,
)
from strom.core.group_config import GROUP_RESOURCE, group_timeouts
from strom.plugins.manager import load_assignors

log = logging.getLogger(__name__)

# Upper bound of one timer sleep, so a deadline set while the timer sleeps is seen in time.
TIMER_TICK_MS = 1000


class ConsumerGroupHost(Protocol):
    """The part of the group coordinator shell this module uses."""

    def check_available(self, group_id: str | None = None) -> None: ...

    def get_or_create_consumer_group(self, group_id: str) -> ConsumerGroup: ...

    def write_records(self, group_id: str, records: list[Record]) -> Awaitable[Any]: ...


def now_ms() -> int:
    """Deadlines live in memory only, so a monotonic clock is the right one."""
    return int(time.monotonic() * 1000)


class ImageTopics:
    """:class:`~.consumer_group.TopicsView` over the broker's current metadata image."""

    __slots__ = ("image",)

    def __init__(self, image: Any) -> None:
        self.image = image

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        topic = self.image.topic(name)
        return None if topic is None else (topic.topic_id, len(topic.partitions))

    def names(self) -> Iterable[str]:
        return self.image.topics.keys()


_ASSIGNORS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def env_for(broker: Any, group_id: str | None = None) -> GroupEnv:
    """The group environment of a broker: its current topics, its assignors and timeouts. With
    ``group_id``, the timeouts are that group's: its GROUP config resource's
    ``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` (KIP-848) when set."""
    assignors = _ASSIGNORS.get(broker)
    if assignors is None:
        # Plugins are asked once per broker; the request path then uses the objects directly.
        assignors = load_assignors(broker.plugin_manager, broker.config)
        _ASSIGNORS[broker] = assignors
    config = broker.config
    overrides = broker.image.resource_configs(GROUP_RESOURCE, group_id) if group_id is not None else {}
    session_timeout_ms, heartbeat_interval_ms = group_timeouts(config, overrides)
    return GroupEnv(topics=ImageTopics(broker.image), assignors=assignors,
                    session_timeout_ms=session_timeout_ms, heartbeat_interval_ms=heartbeat_interval_ms,
                    max_size=config.group_consumer_max_size)


async def heartbeat(host: ConsumerGroupHost, env: Callable[[], GroupEnv], group_id: str,
                    req: HeartbeatRequest, *, clock: Callable[[], int] = now_ms) -> HeartbeatResult:
    """Apply one ConsumerGroupHeartbeat: compute, persist, replay; then arm the member's timers.

    Raises the :class:`~strom.core.exceptions.KafkaError` to answer with (NOT_COORDINATOR and
    COORDINATOR_LOAD_IN_PROGRESS come from the shell's ``check_available``).
    """
    host.check_available(group_id)
    group = host.get_or_create_consumer_group(group_id)
    async with group.lock:
        result = group.heartbeat(req, env(), clock())
        if result.records:
            await host.write_records(group_id, result.records)
        group.set_deadlines(result)
    ensure_timer(host, group, env, clock=clock)
    return result


# (coordinator, group id, group object) -> timer: a group deleted and created again gets its own.
_TIMERS: dict[tuple[int, str, int], asyncio.Task[None]] = {}


def ensure_timer(host: ConsumerGroupHost, group: ConsumerGroup, env: Callable[[], GroupEnv], *,
                 clock: Callable[[], int] = now_ms) -> None:
    """Start the group's expiry timer unless it runs (the shell may call this after a load)."""
    key = (id(host), group.group_id, id(group))
    task = _TIMERS.get(key)
    if task is not None and not task.done():
        return
    task = asyncio.get_running_loop().create_task(_timer(host, group, env, clock),
                                                  name=f"consumer-group-timer:{group.group_id}")
    _TIMERS[key] = task
    task.add_done_callback(lambda t: _TIMERS.pop(key, None) if _TIMERS.get(key) is t else None)


async def _timer(host: ConsumerGroupHost, group: ConsumerGroup, env: Callable[[], GroupEnv],
                 clock: Callable[[], int]) -> None:
    while True:
        now = clock()
        deadline = group.next_deadline(now, env())
        if deadline is None:
            return  # no members: the next heartbeat starts a new timer
        await asyncio.sleep(min(max(deadline - now, 0), TIMER_TICK_MS) / 1000)
        try:
            async with group.lock:
                records = group.expire(clock(), env())
                if records:
                    log.info("group %s: fencing expired members", group.group_id)
                    await host.write_records(group.group_id, records)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A failed write leaves the group unchanged; the next tick tries again.
            log.exception("group %s: expiring members failed", group.group_id)
            await asyncio.sleep(TIMER_TICK_MS / 1000)


async def stop_timers(host: ConsumerGroupHost) -> None:
    """Cancel the timers of one coordinator (at broker shutdown)."""
    tasks = [t for (h, _, _), t in list(_TIMERS.items()) if h == id(host)]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def describe_assignment(parts: Any, image: Any) -> Sequence[tuple[uuid.UUID, str, list[int]]]:
    """(topic id, topic name, partitions) rows of an assignment, topics unknown to the image left out."""
    rows = []
    for tid, ps in sorted(parts.items(), key=lambda kv: str(kv[0])):
        topic = image.topic_by_id(tid)
        if topic is not None and ps:
            rows.append((tid, topic.name, sorted(ps)))
    return rows


def find_consumer_group(host: Any, group_id: str) -> ConsumerGroup | None:
    """The group if it exists as a KIP-848 group (DescribeGroups must not create one).

    Uses the shell's ``consumer_group(group_id)`` lookup when it has one; otherwise a group
    that never wrote a record (epoch 0, no members) counts as absent.
    """
    host.check_available(group_id)
    lookup = getattr(host, "consumer_group", None)
    if callable(lookup):
        found = lookup(group_id)
        return found if isinstance(found, ConsumerGroup) else None
    group = host.get_or_create_consumer_group(group_id)
    if group.deleted or (group.group_epoch == 0 and not group.members):
        return None
    return group
