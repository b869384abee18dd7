"""The broker's Prometheus metrics, under the names the JMX exporter's Kafka rules give Kafka's.

``strom.metrics.listener`` (e.g. ``http://127.0.0.1:9404``; empty: off) serves ``/metrics`` in
Prometheus' text format. The names are those of prometheus/jmx_exporter's
``example_configs/kafka-2_0_0.yml`` (``lowercaseOutputName: true``) applied to Kafka's MBeans:

- ``kafka_server_brokertopicmetrics_{messagesin,bytesin,bytesout}_total``: once without labels
  (Kafka's all-topics meter) and once per ``topic``; produce appends and consumer fetches only
  (Kafka leaves follower fetches out of BytesOutPerSec).
- ``kafka_network_requestmetrics_requests_total{request,version}``: Kafka's RequestsPerSec; a
  Fetch also counts as ``FetchConsumer``/``FetchFollower``, as Kafka's RequestChannel does.
- ``kafka_network_requestmetrics_totaltimems{request}``: a histogram in milliseconds (Kafka's
  TotalTimeMs is a JMX histogram the exporter turns into quantile gauges; Prometheus' own
  histogram can be aggregated over brokers, quantiles cannot).
- ``kafka_server_replicamanager_underreplicatedpartitions``, ``..._partitioncount``,
  ``..._leadercount``; ``kafka_controller_kafkacontroller_offlinepartitionscount``,
  ``..._activecontrollercount``.
- ``kafka_log_log_size{topic,partition}``, ``kafka_log_log_logendoffset``,
  ``kafka_log_log_logstartoffset``.
- ``kafka_server_socket_server_metrics_connection_count{listener,networkProcessor}`` (the JMX
  exporter's name for ``kafka.server:type=socket-server-metrics`` attribute connection-count).
- ``kafka_consumergroup_lag{consumergroup,topic,partition}`` and
  ``kafka_consumergroup_current_offset`` as danielqsj/kafka-exporter names them: the high
  watermark minus the committed offset, computed on scrape for at most
  ``MAX_LAG_SERIES`` group partitions.

Kafka's RequestHandlerAvgIdlePercent is left out: strom has no request handler thread pool (one
event loop serves every request), so an idle share of handler threads means nothing here.

Recording is plain integer arithmetic in dicts on the event loop (per request and per partition
of a produce or fetch, never per record); the families are built only when scraped. The HTTP
server runs on the same loop, so a scrape reads the broker's state without locks.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import struct
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

if TYPE_CHECKING:
    from strom.core.metadata.image import MetadataImage
    from strom.core.replica.partition import Partition

log = logging.getLogger(__name__)

PRODUCE_KEY = 0
FETCH_KEY = 1
# Kafka's TotalTimeMs spans sub-millisecond local requests to fetches parked for fetch.max.wait.ms.
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
                                         10000, 30000)
# Lag series per scrape: beyond this many group partitions the rest are skipped (one line logged),
# so a scrape of a broker with huge groups stays bounded.
MAX_LAG_SERIES = 10000
# A scraper's idle keep-alive connection is closed after this long.
_IDLE_S = 60.0
# The text format every Prometheus version reads (generate_latest's output for these ASCII names).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# RecordBatch v2 header: batchLength at 8 (int32, bytes after the first 12), recordsCount at 57.
_BATCH_LENGTH = struct.Struct(">i")
_LOG_OVERHEAD = 12
_RECORDS_COUNT_AT = 57


def records_count(records: bytes | bytearray | memoryview) -> int:
    """The records of every batch in ``records`` (read from each batch header, not the records)."""
    count, pos, end = 0, 0, len(records)
    while pos + _RECORDS_COUNT_AT + 4 <= end:
        length = _BATCH_LENGTH.unpack_from(records, pos + 8)[0]
        count += _BATCH_LENGTH.unpack_from(records, pos + _RECORDS_COUNT_AT)[0]
        pos += _LOG_OVERHEAD + max(length, 0)
        if length <= 0:
            break
    return count


class MetricsSource(Protocol):
    """What a scrape reads from the broker."""

    @property
    def image(self) -> MetadataImage: ...

    def metrics_partitions(self) -> Mapping[tuple[str, int], Partition]: ...

    def metrics_committed_offsets(self) -> Iterable[tuple[str, str, int, int]]:
        """(group, topic, partition, committed offset) of every committed offset."""
        ...

    def metrics_connections(self) -> Iterable[tuple[str, int]]:
        """(listener name, open connections)."""
        ...

    @property
    def node_id(self) -> int: ...

    def controller_id(self) -> int: ...


class _Latency:
    __slots__ = ("buckets", "count", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.count = 0
        self.sum = 0.0


class BrokerMetrics(Collector):
    """The counters the request path bumps, and the collector that turns them and the broker's
    state into Kafka-named families on scrape."""

    def __init__(self, source: MetricsSource, api_name: Any) -> None:
        """``api_name(api_key, version) -> str``: Kafka's request name (Produce, Fetch, ...)."""
        self.source = source
        self._api_name = api_name
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.requests: dict[tuple[int, int], int] = {}
        self.fetch_kinds: dict[tuple[str, int], int] = {}  # (FetchConsumer|FetchFollower, version)
        self.latency: dict[int, _Latency] = {}
        self.fetch_latency: dict[str, _Latency] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._lag_capped_logged = False

    # -- recording (the event loop's hot path: dict arithmetic only) ---------------------------

    def request_done(self, api_key: int, version: int, elapsed_s: float, fetch_kind: str | None = None) -> None:
        key = (api_key, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        ms = elapsed_s * 1000.0
        lat = self.latency.get(api_key)
        if lat is None:
            lat = self.latency[api_key] = _Latency()
        i = bisect.bisect_left(LATENCY_BUCKETS_MS, ms)
        lat.buckets[i] += 1
        lat.count += 1
        lat.sum += ms
        if fetch_kind is not None:
            kkey = (fetch_kind, version)
            self.fetch_kinds[kkey] = self.fetch_kinds.get(kkey, 0) + 1
            flat = self.fetch_latency.get(fetch_kind)
            if flat is None:
                flat = self.fetch_latency[fetch_kind] = _Latency()
            flat.buckets[i] += 1
            flat.count += 1
            flat.sum += ms

    def appended(self, topic: str, records: bytes | bytearray | memoryview) -> None:
        """A produce append of ``records`` to a partition of ``topic`` succeeded."""
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + len(records)
        self.messages_in[topic] = self.messages_in.get(topic, 0) + records_count(records)

    def fetched(self, topic: str, size: int) -> None:
        """``size`` bytes of ``topic``'s records went to a consumer."""
        self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size

    # -- scrape ---------------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_counters()
        yield from self._request_metrics()
        yield from self._partition_gauges()
        yield from self._connections()
        yield from self._consumer_lag()

    def _topic_counters(self) -> Iterator[Metric]:
        for name, doc, values in (
                ("messagesin", "Records appended by produce requests (Kafka's MessagesInPerSec)", self.messages_in),
                ("bytesin", "Record batch bytes appended by produce requests (Kafka's BytesInPerSec)",
                 self.bytes_in),
                ("bytesout", "Record bytes fetched by consumers (Kafka's BytesOutPerSec)", self.bytes_out)):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc, labels=None)
            family.add_sample(f"kafka_server_brokertopicmetrics_{name}_total", {}, float(sum(values.values())))
            for topic, value in values.items():
                family.add_sample(f"kafka_server_brokertopicmetrics_{name}_total", {"topic": topic}, float(value))
            yield family

    def _request_metrics(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests handled, by request type and version (Kafka's RequestsPerSec)",
                                       labels=["request", "version"])
        names: dict[int, str] = {}  # a version each API was used in names it (old versions may have no class)
        for (api_key, version), n in sorted(self.requests.items()):
            name = names[api_key] = self._api_name(api_key, version)
            requests.add_metric([name, str(version)], float(n))
        for (kind, version), n in sorted(self.fetch_kinds.items()):
            requests.add_metric([kind, str(version)], float(n))
        yield requests
        total = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                      "Time from a request's arrival to its response, in ms (Kafka's TotalTimeMs)",
                                      labels=["request"])
        named = [(names.get(k) or self._api_name(k, 0), lat) for k, lat in sorted(self.latency.items())]
        named += sorted(self.fetch_latency.items())
        for name, lat in named:
            cumulative, buckets = 0, []
            for bound, n in zip((*map(_bound_label, LATENCY_BUCKETS_MS), "+Inf"), lat.buckets, strict=True):
                cumulative += n
                buckets.append((bound, float(cumulative)))
            total.add_metric([name], buckets, lat.sum)
        yield total

    def _partition_gauges(self) -> Iterator[Metric]:
        src = self.source
        partitions = src.metrics_partitions()
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log on this broker",
                                 labels=["topic", "partition"])
        leo = GaugeMetricFamily("kafka_log_log_logendoffset", "A partition's log end offset",
                                labels=["topic", "partition"])
        lso = GaugeMetricFamily("kafka_log_log_logstartoffset", "A partition's log start offset",
                                labels=["topic", "partition"])
        under = leaders = 0
        for (topic, index), part in partitions.items():
            labels = [topic, str(index)]
            size.add_metric(labels, float(part.size_in_bytes))
            leo.add_metric(labels, float(part.log_end_offset))
            lso.add_metric(labels, float(part.log_start_offset))
            if part.is_leader:
                leaders += 1
                if len(part.isr) < len(part.replicas):
                    under += 1
        yield size
        yield leo
        yield lso
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their replica set", value=under)
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions on this broker",
                                value=len(partitions))
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions led by this broker",
                                value=leaders)
        offline = 0
        image = src.image
        for topic_image in image.topics.values():
            for reg in topic_image.partitions.values():
                if reg.leader < 0:
                    offline += 1
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader", value=offline)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the node that is the active controller",
                                value=1 if src.controller_id() == src.node_id else 0)

    def _connections(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                   "Open client connections of a listener", labels=["listener", "networkProcessor"])
        for name, count in self.source.metrics_connections():
            family.add_metric([name, "0"], float(count))
        yield family

    def _consumer_lag(self) -> Iterator[Metric]:
        partitions = self.source.metrics_partitions()
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "High watermark minus the group's committed offset (kafka-exporter's name)",
                                labels=["consumergroup", "topic", "partition"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "The group's committed offset",
                                    labels=["consumergroup", "topic", "partition"])
        n = 0
        for group, topic, index, offset in self.source.metrics_committed_offsets():
            part = partitions.get((topic, index))
            if part is None:
                continue
            if n >= MAX_LAG_SERIES:
                if not self._lag_capped_logged:
                    self._lag_capped_logged = True
                    log.info("kafka_consumergroup_lag: more than %d group partitions; the rest are not exported",
                             MAX_LAG_SERIES)
                break
            n += 1
            labels = [group, topic, str(index)]
            lag.add_metric(labels, float(max(part.high_watermark - offset, 0)))
            current.add_metric(labels, float(offset))
        yield lag
        yield current

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _bound_label(bound: float) -> str:
    return repr(float(bound))


def parse_listener(url: str) -> tuple[str, int]:
    """``http://HOST:PORT`` (``strom.metrics.listener``) as (host, port)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme != "http" or parsed.hostname is None or parsed.port is None:
        raise ValueError(f"strom.metrics.listener: {url!r} is not http://HOST:PORT")
    return parsed.hostname, parsed.port


class MetricsServer:
    """``GET /metrics`` on the broker's event loop: a minimal HTTP/1.1 server on asyncio streams
    (aiohttp's import alone would add ~0.1 s to every broker start)."""

    def __init__(self, metrics: BrokerMetrics, url: str) -> None:
        self.metrics = metrics
        self.host, self.port = parse_listener(url)
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()  # closed on close(): wait_closed() waits for them

    async def start(self) -> bool:
        """Serve; False (and one log line) when the port cannot be bound: metrics are never a
        reason for a broker not to start."""
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        except OSError as e:
            log.info("not serving metrics on http://%s:%d: %s (strom.metrics.listener)", self.host, self.port,
                     e.strerror or e)
            return False
        self.port = self._server.sockets[0].getsockname()[1]
        # Tests and tools read the port from this line.
        log.info("serving metrics on http://%s:%d/metrics", self.host, self.port)
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            while True:  # keep-alive: Prometheus reuses its connection
                request_line = await asyncio.wait_for(reader.readline(), _IDLE_S)
                if not request_line:
                    return
                while (await asyncio.wait_for(reader.readline(), _IDLE_S)) not in (b"\r\n", b"\n", b""):
                    pass  # headers: nothing in them changes the answer (no gzip, no body)
                method, _, rest = request_line.decode("latin-1").partition(" ")
                path = rest.split(" ", 1)[0].split("?", 1)[0]
                if method not in ("GET", "HEAD"):
                    status, body, ctype = "405 Method Not Allowed", b"GET /metrics\n", "text/plain"
                elif path != "/metrics":
                    status, body, ctype = "404 Not Found", b"GET /metrics\n", "text/plain"
                else:
                    started = time.perf_counter()
                    status, body, ctype = "200 OK", self.metrics.exposition(), CONTENT_TYPE
                    log.debug("metrics scrape: %d bytes in %.1f ms", len(body),
                              (time.perf_counter() - started) * 1000)
                head = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                        "\r\n").encode("latin-1")
                writer.write(head if method == "HEAD" else head + body)
                await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._open.discard(writer)
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._open):
                writer.close()
            await self._server.wait_closed()
            self._server = None
