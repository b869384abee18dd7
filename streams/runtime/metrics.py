"""A Streams application's Prometheus metrics, named as the JMX exporter names Kafka Streams' MBeans.

Off unless ``strom.metrics.listener`` (``http://HOST:PORT``; port 0 picks a free one, then read
``KafkaStreams.metrics_url``) is set in the Streams config; served by prometheus_client's own
HTTP server in a daemon thread. ``kafka.streams:type=stream-thread-metrics,thread-id=T`` and
``type=stream-metrics,client-id=C`` become:

- ``kafka_streams_stream_thread_metrics_poll_total{thread_id}``, ``..._process_total``,
  ``..._commit_total``, ``..._commit_latency_avg``, ``..._commit_latency_max`` (ms, since the
  thread started, where Kafka's are windowed), ``..._active_tasks`` (the tasks a thread runs).
- ``kafka_streams_stream_metrics_alive_stream_threads{client_id}``.

The stream threads add to plain integers per consumed batch and per commit
(:mod:`strom.streams.runtime.stream_thread`); nothing per record. Task- and store-level metrics
are left out: counting them would put work on every record.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from strom.streams.runtime.stream_thread import StreamThread

log = logging.getLogger(__name__)
_THREAD = "kafka_streams_stream_thread_metrics"


class StreamsMetrics(Collector):
    """Reads the application's stream threads on each scrape.

    The scrape runs on the HTTP server's thread and takes no lock: each counter is a plain int
    that only its own stream thread writes and that is read whole, so a scrape may see counters
    of one thread a batch apart, never a torn value."""

    def __init__(self, client_id: str, threads: Callable[[], Sequence[StreamThread]]) -> None:
        self.client_id = client_id
        self._threads = threads
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def collect(self) -> Iterator[Metric]:
        threads = list(self._threads())
        labels = ["thread_id"]
        poll = CounterMetricFamily(f"{_THREAD}_poll", "Consumer polls that returned records", labels=labels)
        process = CounterMetricFamily(f"{_THREAD}_process", "Records processed", labels=labels)
        commit = CounterMetricFamily(f"{_THREAD}_commit", "Commits", labels=labels)
        avg = GaugeMetricFamily(f"{_THREAD}_commit_latency_avg", "Average commit time (ms)", labels=labels)
        mx = GaugeMetricFamily(f"{_THREAD}_commit_latency_max", "Longest commit (ms)", labels=labels)
        tasks = GaugeMetricFamily(f"{_THREAD}_active_tasks", "Active tasks of the thread", labels=labels)
        alive = 0
        for t in threads:
            name = [t.name]
            poll.add_metric(name, float(t.poll_total))
            process.add_metric(name, float(t.process_total))
            commit.add_metric(name, float(t.commit_total))
            avg.add_metric(name, t.commit_ms_total / t.commit_total if t.commit_total else 0.0)
            mx.add_metric(name, t.commit_ms_max)
            tasks.add_metric(name, float(len(t.tasks)))
            alive += t.is_alive()
        yield from (poll, process, commit, avg, mx, tasks)
        yield _alive(self.client_id, alive)

    def serve(self, url: str) -> str:
        """Serve ``/metrics`` at ``url`` (http://HOST:PORT); returns the URL with the bound port."""
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or parsed.hostname is None or parsed.port is None:
            raise ValueError(f"strom.metrics.listener: {url!r} is not http://HOST:PORT")
        self._server, self._thread = start_http_server(parsed.port, parsed.hostname, self.registry)
        bound = f"http://{parsed.hostname}:{self._server.server_port}/metrics"
        log.info("serving Streams metrics on %s", bound)
        return bound

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


def _alive(client_id: str, alive: int) -> GaugeMetricFamily:
    family = GaugeMetricFamily("kafka_streams_stream_metrics_alive_stream_threads", "Running stream threads",
                               labels=["client_id"])
    family.add_metric([client_id], float(alive))
    return family
