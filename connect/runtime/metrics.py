"""The Connect worker's Prometheus metrics, named as the JMX exporter's Kafka Connect rules name
Kafka Connect's MBeans, served by the REST server at ``GET /metrics``.

``kafka.connect:type=connect-worker-metrics`` and ``type=source-task-metrics|sink-task-metrics,
connector=C,task=N`` become (hyphens to underscores, as the exporter sanitises them):

- ``kafka_connect_connect_worker_metrics_connector_count``, ``..._task_count``;
  ``..._connector_{running,paused,failed,unassigned,restarting,destroyed}_task_count{connector}``
  (the per-connector attributes of connect-worker-metrics).
- ``kafka_connect_source_task_metrics_source_record_poll_total{connector,task}``,
  ``..._source_record_write_total``.
- ``kafka_connect_sink_task_metrics_sink_record_read_total``, ``..._sink_record_send_total``,
  ``..._put_batch_avg_time_ms``, ``..._put_batch_max_time_ms``.

The task loops only add to plain integers per polled or consumed batch
(:mod:`strom.connect.runtime.worker_source_task`, :mod:`...worker_sink_task`); everything here
runs on scrape. Unlike Kafka's windowed rates, the put-batch times are averages since the task
started (Prometheus derives windows from the counters itself).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from strom.connect.runtime.herder import State
from strom.connect.runtime.worker_sink_task import WorkerSinkTask
from strom.connect.runtime.worker_source_task import WorkerSourceTask

log = logging.getLogger(__name__)

# Prometheus' text format 0.0.4, which generate_latest writes (the broker's /metrics says the same).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TASK_STATES = (State.RUNNING, State.PAUSED, State.FAILED, State.UNASSIGNED, State.RESTARTING, State.DESTROYED)
_WORKER = "kafka_connect_connect_worker_metrics"
_SOURCE = "kafka_connect_source_task_metrics"
_SINK = "kafka_connect_sink_task_metrics"


class ConnectMetrics(Collector):
    """Reads a herder's worker on each scrape (called off the event loop, as other REST calls)."""

    def __init__(self, herder: Any) -> None:
        self.herder = herder
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        worker = getattr(self.herder, "worker", None)  # a distributed herder builds it when it starts
        names = worker.connector_names() if worker is not None else []
        task_ids = worker.task_ids() if worker is not None else []
        yield GaugeMetricFamily(f"{_WORKER}_connector_count", "Connectors run in this worker", value=len(names))
        yield GaugeMetricFamily(f"{_WORKER}_task_count", "Tasks run in this worker", value=len(task_ids))
        by_state = {state: GaugeMetricFamily(f"{_WORKER}_connector_{state.value.lower()}_task_count",
                                             f"Tasks of the connector in state {state.value}", labels=["connector"])
                    for state in _TASK_STATES}
        for name in names:
            counts = dict.fromkeys(_TASK_STATES, 0)
            try:
                status = self.herder.connector_status(name)
            except Exception as e:  # a connector deleted meanwhile: left out of this scrape
                log.debug("no status of connector %s for metrics: %s", name, e)
                continue
            for task in status.tasks:
                if task.state in counts:
                    counts[task.state] += 1
            for state, family in by_state.items():
                family.add_metric([name], float(counts[state]))
        yield from by_state.values()

        poll = CounterMetricFamily(f"{_SOURCE}_source_record_poll", "Records polled from the source task",
                                   labels=["connector", "task"])
        write = CounterMetricFamily(f"{_SOURCE}_source_record_write",
                                    "Records output by the transformations and written to Kafka",
                                    labels=["connector", "task"])
        read = CounterMetricFamily(f"{_SINK}_sink_record_read", "Records read from Kafka by the sink task",
                                   labels=["connector", "task"])
        send = CounterMetricFamily(f"{_SINK}_sink_record_send", "Records put to the sink task",
                                   labels=["connector", "task"])
        put_avg = GaugeMetricFamily(f"{_SINK}_put_batch_avg_time_ms", "Average time of a put of a batch (ms)",
                                    labels=["connector", "task"])
        put_max = GaugeMetricFamily(f"{_SINK}_put_batch_max_time_ms", "Longest put of a batch (ms)",
                                    labels=["connector", "task"])
        for tid in task_ids:
            task = worker.running_task(tid) if worker is not None else None
            labels = [tid.connector, str(tid.task)]
            if isinstance(task, WorkerSourceTask):
                poll.add_metric(labels, float(task.records_polled))
                write.add_metric(labels, float(task.records_sent))
            elif isinstance(task, WorkerSinkTask):
                read.add_metric(labels, float(task.records_read))
                send.add_metric(labels, float(task.records_put))
                put_avg.add_metric(labels, task.put_time_ms_total / task.put_batches if task.put_batches else 0.0)
                put_max.add_metric(labels, task.put_time_ms_max)
        yield from (poll, write, read, send, put_avg, put_max)
