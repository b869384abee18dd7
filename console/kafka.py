"""Blocking cluster calls of the console, through confluent-kafka's AdminClient and Consumer only.

Every function returns plain JSON-able data; the server runs them off the event loop with a
timeout. Nothing here knows strom: the same calls work against any Kafka cluster.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

log = logging.getLogger(__name__)

JSON = dict[str, Any]
TIMEOUT_S = 10.0
# Kafka Streams' members carry this prefix in their client ids and the group is the application.id;
# their subscription user data is Streams' SubscriptionInfo (a version int first).
STREAMS_CLIENT_MARK = "-StreamThread-"
# A partition's leader epoch moved on (a broker's unclean restart elects it again, KIP-966):
# librdkafka's AdminClient keeps sending the epoch it cached and does not refresh its metadata on
# these errors, so only a new client reads the new epoch.
STALE_EPOCH_CODES = frozenset({KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH})
# Partition errors of ListOffsets worth asking again: Kafka's retriable InvalidMetadataException
# family (librdkafka's error object does not flag all of them retriable) and a leader that moves.
# Not timeouts: the console's call has its own bound (server.CALL_TIMEOUT_S).
RETRIABLE_OFFSET_CODES = STALE_EPOCH_CODES | {
    KafkaError.KAFKA_STORAGE_ERROR, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.NETWORK_EXCEPTION, KafkaError._TRANSPORT,
}
OFFSET_RETRIES = 3  # ListOffsets asked again at most this many times per call
OFFSET_RETRY_BACKOFF_S = 0.2


class ConsoleError(Exception):
    """A failed call, with a message fit for the page (never a stack trace)."""


def _err(e: BaseException) -> ConsoleError:
    if isinstance(e, KafkaException) and e.args:
        k = e.args[0]
        name = getattr(k, "name", None)
        text = k.str() if hasattr(k, "str") else str(k)
        return ConsoleError(f"{name()}: {text}" if callable(name) else text)
    return ConsoleError(str(e) or type(e).__name__)


def _code(e: KafkaException) -> int | None:
    k = e.args[0] if e.args else None
    return k.code() if isinstance(k, KafkaError) else None


def _wait(fut: Any) -> Any:
    try:
        return fut.result(timeout=TIMEOUT_S)
    except Exception as e:
        raise _err(e) from None


@dataclass
class Cluster:
    """One AdminClient for the console's life, plus short-lived consumers for reads."""

    bootstrap: str
    extra: dict[str, str] | None = None

    def __post_init__(self) -> None:
        self._admin: AdminClient | None = None
        # The API handlers and the sampler call in from several threads.
        self._admin_lock = threading.Lock()

    @property
    def admin(self) -> AdminClient:
        # Made on first use: a console nobody opens (the one `strom dev` starts) opens no connection.
        with self._admin_lock:
            if self._admin is None:
                conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 10000}
                conf.update(self.extra or {})
                self._admin = AdminClient(conf)
            return self._admin

    def _renew_admin(self, stale: AdminClient, why: str) -> None:
        """Drop ``stale`` (confluent-kafka's AdminClient has no close(): the last reference going
        destroys it) so the next call makes a client that reads fresh metadata. Only if it is still
        the current one: another thread may have renewed it already."""
        with self._admin_lock:
            if self._admin is stale:
                log.info("console: %s; making a new AdminClient", why)
                self._admin = None

    def _coordinated(self, call: Callable[[AdminClient], Any]) -> Any:
        """The result of a call a group coordinator answers. librdkafka (2.16) caches each group's
        coordinator as a broker handle; once every broker was away it re-bootstraps and
        decommissions its broker handles, but the cache keeps the old one, and every later call for
        that group waits on it until it times out (seen after a single broker's kill -9 restart).
        So a timeout drops the client: the page's next refresh gets a new one."""
        admin = self.admin
        try:
            return call(admin).result(timeout=TIMEOUT_S)
        except Exception as e:
            if isinstance(e, TimeoutError) or (isinstance(e, KafkaException) and _code(e) == KafkaError._TIMED_OUT):
                self._renew_admin(admin, "a group coordinator did not answer in time")
            raise _err(e) from None

    def _consumer(self, group: str | None = None) -> Consumer:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": group or f"strom-console-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
        conf.update(self.extra or {})
        return Consumer(conf)

    # ---- cluster -------------------------------------------------------------------------------
    def overview(self) -> JSON:
        try:
            desc = self.admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
        except Exception as e:
            raise _err(e) from None
        brokers = [{"id": n.id, "host": n.host, "port": n.port, "rack": n.rack} for n in desc.nodes]
        controller = desc.controller.id if desc.controller is not None else None
        md = self.admin.list_topics(timeout=TIMEOUT_S)
        features: list[JSON] = []
        try:
            # Features are read from the ApiVersions the brokers send; not every client exposes them.
            feats = getattr(desc, "features", None) or {}
            features = [{"name": k, "level": v} for k, v in dict(feats).items()]
        except Exception:
            features = []
        return {
            "cluster_id": desc.cluster_id, "controller": controller, "brokers": brokers,
            "topics": len([t for t in md.topics if not t.startswith("__")]),
            "partitions": sum(len(t.partitions) for t in md.topics.values()),
            "features": features,
        }

    def end_offsets(self) -> dict[tuple[str, int], int]:
        """Log-end offsets of every partition (for throughput): one consumer, watermarks cached."""
        md = self.admin.list_topics(timeout=TIMEOUT_S)
        tps = [TopicPartition(t, p) for t, tm in md.topics.items() for p in tm.partitions]
        return self._list_offsets(tps, latest=True)

    def _list_offsets(self, tps: list[TopicPartition], latest: bool) -> dict[tuple[str, int], int]:
        """Earliest or latest offset of each partition, -1 for one that still fails after
        ``OFFSET_RETRIES`` more asks (the page shows it as unknown)."""
        spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
        out: dict[tuple[str, int], int] = {}
        pending = list(tps)
        for attempt in range(OFFSET_RETRIES + 1):
            if not pending:
                break
            admin = self.admin
            futs = admin.list_offsets({tp: spec for tp in pending}, request_timeout=TIMEOUT_S)
            again: list[TopicPartition] = []
            stale = False
            for tp, fut in futs.items():
                key = (tp.topic, tp.partition)
                out[key] = -1
                try:
                    out[key] = fut.result(timeout=TIMEOUT_S).offset
                except KafkaException as e:
                    code = _code(e)
                    if code in RETRIABLE_OFFSET_CODES and attempt < OFFSET_RETRIES:
                        again.append(tp)
                        stale = stale or code in STALE_EPOCH_CODES
                    else:
                        log.debug("ListOffsets of %s-%d failed: %s", tp.topic, tp.partition, e)
                except Exception as e:
                    log.debug("ListOffsets of %s-%d failed: %s", tp.topic, tp.partition, e)
            if stale:
                self._renew_admin(admin, "a partition's leader epoch moved on (FENCED_LEADER_EPOCH)")
            if again:
                time.sleep(OFFSET_RETRY_BACKOFF_S)
            pending = again
        return out

    # ---- topics --------------------------------------------------------------------------------
    def topics(self) -> list[JSON]:
        md = self.admin.list_topics(timeout=TIMEOUT_S)
        sizes = self._sizes()
        out = []
        for name in sorted(md.topics):
            t = md.topics[name]
            parts = t.partitions
            rf = len(next(iter(parts.values())).replicas) if parts else 0
            out.append({"name": name, "partitions": len(parts), "replication_factor": rf,
                        "internal": name.startswith("__"),
                        "size": sum(sizes.get((name, p), 0) for p in parts)})
        return out

    def _sizes(self) -> dict[tuple[str, int], int]:
        """Partition sizes from DescribeLogDirs asked of every broker (the largest replica's; none
        when a broker does not answer). confluent-kafka 2.x has no DescribeLogDirs, so the request
        goes over its own socket: PLAINTEXT listeners only, as `strom topics describe` does."""
        from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
        from kio.schema.describe_log_dirs.v4.response import DescribeLogDirsResponse

        from strom import kafka_wire

        sizes: dict[tuple[str, int], int] = {}
        if not kafka_wire.plaintext(self.extra or {}):
            return sizes
        md = self.admin.list_topics(timeout=TIMEOUT_S)
        for broker in md.brokers.values():
            try:
                response = kafka_wire.call(str(broker.host), int(broker.port), 35, 4, DescribeLogDirsRequest(topics=None),
                                           DescribeLogDirsResponse, client_id="strom-console", timeout=TIMEOUT_S)
            except (OSError, ValueError) as e:
                log.debug("DescribeLogDirs of broker %s failed: %s", broker.id, e)
                continue
            for result in response.results:
                for t in result.topics:
                    for p in t.partitions:
                        key = (str(t.name), int(p.partition_index))
                        sizes[key] = max(sizes.get(key, 0), int(p.partition_size))
        return sizes

    def topic(self, name: str) -> JSON:
        # Not list_topics(topic=name): a Metadata request naming a topic auto-creates it on a broker
        # with auto.create.topics.enable, so a deleted topic's page would bring it back.
        md = self.admin.list_topics(timeout=TIMEOUT_S)
        t = md.topics.get(name)
        if t is None:
            raise ConsoleError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name} does not exist")
        if t.error is not None:
            raise ConsoleError(str(t.error))
        tps = [TopicPartition(name, p) for p in t.partitions]
        lo = self._list_offsets(tps, latest=False)
        hi = self._list_offsets(tps, latest=True)
        sizes = self._sizes()
        parts = [{"partition": p, "leader": pm.leader, "replicas": list(pm.replicas), "isr": list(pm.isrs),
                  "start_offset": lo.get((name, p), -1), "end_offset": hi.get((name, p), -1),
                  "size": sizes.get((name, p), 0)} for p, pm in sorted(t.partitions.items())]
        return {"name": name, "partitions": parts, "configs": self.topic_configs(name)}

    def topic_configs(self, name: str) -> list[JSON]:
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        fut = self.admin.describe_configs([res], request_timeout=TIMEOUT_S)[res]
        entries = _wait(fut)
        return [{"name": e.name, "value": e.value, "default": bool(e.is_default),
                 "source": str(getattr(e.source, "name", e.source)), "sensitive": bool(e.is_sensitive)}
                for e in sorted(entries.values(), key=lambda e: e.name)]

    def create_topic(self, name: str, partitions: int, replication: int, configs: dict[str, str]) -> None:
        _wait(self.admin.create_topics([NewTopic(name, partitions, replication, config=configs)],
                                       request_timeout=TIMEOUT_S)[name])

    def delete_topic(self, name: str) -> None:
        _wait(self.admin.delete_topics([name], request_timeout=TIMEOUT_S)[name])

    def add_partitions(self, name: str, total: int) -> None:
        _wait(self.admin.create_partitions([NewPartitions(name, total)], request_timeout=TIMEOUT_S)[name])

    def alter_topic_configs(self, name: str, set_: dict[str, str], delete: Iterable[str]) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries)
        for fut in self.admin.incremental_alter_configs([res], request_timeout=TIMEOUT_S).values():
            _wait(fut)

    # ---- messages ------------------------------------------------------------------------------
    def messages(self, topic: str, partition: int, offset: int | None, timestamp_ms: int | None,
                 limit: int, search: str | None, window: int) -> JSON:
        """Up to ``limit`` records from (partition, offset or timestamp); with ``search``, those of
        the next ``window`` records whose key, value or a header contains it."""
        c = self._consumer()
        try:
            tp = TopicPartition(topic, partition)
            if timestamp_ms is not None:
                found = c.offsets_for_times([TopicPartition(topic, partition, timestamp_ms)],
                                            timeout=TIMEOUT_S)[0]
                start = found.offset if found.offset >= 0 else c.get_watermark_offsets(
                    tp, timeout=TIMEOUT_S)[1]
            else:
                lo, hi = c.get_watermark_offsets(tp, timeout=TIMEOUT_S)
                start = lo if offset is None else max(offset, lo)
            lo, hi = c.get_watermark_offsets(tp, timeout=TIMEOUT_S)
            c.assign([TopicPartition(topic, partition, start)])
            scan = window if search else limit
            out: list[JSON] = []
            seen = 0
            needle = search.encode() if search else None
            deadline = time.monotonic() + TIMEOUT_S
            pos = start
            while seen < scan and pos < hi and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        break
                    raise ConsoleError(err.str())
                seen += 1
                pos = (m.offset() or 0) + 1
                # confluent-kafka returns headers as a list of (name, value) pairs on a consumed message.
                raw = cast("list[tuple[str, str | bytes | None]]", m.headers() or [])
                headers = [(str(k), _bytes(v)) for k, v in raw]
                key, value = _bytes(m.key()), _bytes(m.value())
                if needle is not None and not (needle in (key or b"") or needle in (value or b"")
                                               or any(needle in (v or b"") or needle in k.encode()
                                                      for k, v in headers)):
                    continue
                out.append({"partition": m.partition(), "offset": m.offset(),
                            "timestamp": m.timestamp()[1], "key": _show(key), "value": _show(value),
                            "headers": [{"key": k, **_show(v)} for k, v in headers]})
                if len(out) >= limit:
                    break
            return {"start": start, "low": lo, "high": hi, "scanned": seen, "records": out}
        except KafkaException as e:
            raise _err(e) from None
        finally:
            c.close()

    # ---- groups --------------------------------------------------------------------------------
    def groups(self) -> list[JSON]:
        res = _wait(self.admin.list_consumer_groups(request_timeout=TIMEOUT_S))
        out = []
        for g in sorted(res.valid, key=lambda g: g.group_id):
            out.append({"group": g.group_id, "state": _name(g.state),
                        "type": _name(getattr(g, "type", None)), "simple": bool(g.is_simple_consumer_group)})
        return out

    def group(self, group: str) -> JSON:
        desc = self._coordinated(lambda a: a.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group])
        members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                    "assignment": [{"topic": tp.topic, "partition": tp.partition}
                                   for tp in (m.assignment.topic_partitions if m.assignment else [])]}
                   for m in desc.members]
        lag = self.group_lag(group)
        return {"group": group, "state": _name(desc.state), "type": _name(getattr(desc, "type", None)),
                "coordinator": desc.coordinator.id if desc.coordinator else None,
                "assignor": desc.partition_assignor, "members": members, "lag": lag,
                "streams": is_streams(group, members)}

    def group_lag(self, group: str) -> list[JSON]:
        req = [ConsumerGroupTopicPartitions(group)]
        res = self._coordinated(lambda a: a.list_consumer_group_offsets(req, request_timeout=TIMEOUT_S)[group])
        committed = [tp for tp in res.topic_partitions if tp.offset >= 0]
        ends = self._list_offsets([TopicPartition(tp.topic, tp.partition) for tp in committed], latest=True)
        return [{"topic": tp.topic, "partition": tp.partition, "committed": tp.offset,
                 "end_offset": ends.get((tp.topic, tp.partition), -1),
                 "lag": max(0, ends.get((tp.topic, tp.partition), tp.offset) - tp.offset)}
                for tp in sorted(committed, key=lambda tp: (tp.topic, tp.partition))]

    def reset_offsets(self, group: str, to: str, offset: int | None) -> list[JSON]:
        """Reset every committed partition of an empty group to earliest, latest or an offset."""
        desc = self._coordinated(lambda a: a.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group])
        if desc.members:
            raise ConsoleError(f"group {group} has {len(desc.members)} active member(s): offsets can only "
                               "be reset when the group is empty (stop its consumers first)")
        lag = self.group_lag(group)
        tps = [TopicPartition(r["topic"], r["partition"]) for r in lag]
        if to == "offset":
            if offset is None:
                raise ConsoleError("an offset is needed with to=offset")
            target = {(tp.topic, tp.partition): offset for tp in tps}
        else:
            target = self._list_offsets(tps, latest=(to == "latest"))
            unknown = [f"{tp.topic}-{tp.partition}" for tp in tps if target[(tp.topic, tp.partition)] < 0]
            if unknown:
                # Committing -1 would lose the group's position: refuse, nothing is changed.
                raise ConsoleError(f"the {to} offset of {', '.join(unknown)} could not be read (ListOffsets "
                                   "failed); no offset was reset: try again once the partitions have a leader")
        new = [TopicPartition(tp.topic, tp.partition, target[(tp.topic, tp.partition)]) for tp in tps]
        self._coordinated(lambda a: a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, new)],
                                                                   request_timeout=TIMEOUT_S)[group])
        return self.group_lag(group)


def is_streams(group: str, members: list[JSON]) -> bool:
    """A Kafka Streams application: its consumers' client ids are ``<application.id>-<uuid>-StreamThread-N-consumer``."""
    return bool(members) and all(STREAMS_CLIENT_MARK in m["client_id"] and m["client_id"].startswith(group)
                                 for m in members)


def _name(v: object) -> str:
    return str(getattr(v, "name", v)) if v is not None else ""


def _bytes(v: str | bytes | None) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def _show(b: bytes | None) -> JSON:
    """A key, value or header in the three forms the page can show."""
    if b is None:
        return {"text": None, "json": None, "hex": None}
    try:
        text: str | None = b.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    parsed: str | None = None
    if text is not None:
        try:
            parsed = json.dumps(json.loads(text), indent=2)
        except ValueError:
            parsed = None
    return {"text": text, "json": parsed, "hex": b.hex(" "), "b64": base64.b64encode(b).decode()}
