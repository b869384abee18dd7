"""A Kafka broker that keeps nothing and answers at once: the raw limit of a producer workload.

A benchmark ratio such as issue 3's (transactional / idempotent produce with one client) is set
by the broker *and* by the client. This process takes the broker's share away: it speaks enough
of the protocol for a producer (idempotent or transactional) and answers each request as soon as
it is decoded. It checks no CRC, stores no record, keeps no producer or transaction state and
writes no marker; a Produce is answered with offsets counted from the batch headers. What a
client reaches against it is what the client alone allows on this machine: an upper bound for
any broker, strom's included.

It is a benchmark peer, never a test double: nothing in ``tests/`` runs a client against it in
place of strom's broker. It is one Python process with the same event loop (uvloop), the same
socket layer (strom's ``Listener``, which hands it each request as it hands them to
``Broker.dispatch``) and the same protocol layer (``strom.core.protocol``: header parsing, kio
decoding, the Produce fast encoder) as strom's broker, so only the broker's work is missing.

It advertises every API strom's broker does, with strom's version ranges and feature levels (its
ApiVersions answer is built by strom's handler), so a client derives the same features and picks
the same request versions against both (librdkafka, for one, writes the v2 record format only if
Fetch v4+ is offered; the Java client uses KIP-890's transactions only at transaction.version 2).
It serves those a producer sends: ApiVersions, Metadata, CreateTopics, FindCoordinator,
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn and Produce. Any
other request closes its connection with a line on stderr naming the API.

    python bench/null_broker.py [--host 127.0.0.1] [--port 0] [--transaction-version 2]
                                                       # prints bootstrap.servers=HOST:PORT
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import logging
import sys
import types
import uuid
from collections.abc import Callable
from typing import Any, cast

from kio.schema.errors import ErrorCode

from strom.core.metadata.bootstrap import LATEST_METADATA_VERSION
from strom.core.metadata.features import TRANSACTION_VERSION_FEATURE, default_levels
from strom.core.protocol import codec
from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import response_messages
from strom.core.protocol.produce_response import PartitionResult, TopicResults, encode_produce_response
from strom.core.records.batch import iter_headers
from strom.core.server import handlers
from strom.core.server.context import RequestContext
from strom.core.server.handlers import api_versions, produce
from strom.core.server.network import Listener

NODE_ID = 0
CLUSTER_ID = "null-broker-cluster-0000"
MAX_REQUEST_BYTES = 104_857_600  # socket.request.max.bytes, Kafka's and strom's default
SHORT_MAX = 32767
UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
# Every API strom's broker advertises, with its ranges: a client derives its features from the
# whole list (librdkafka uses the v2 record format only if Fetch v4+ is offered too), so it must be
# strom's list for the client to pick the same formats and request versions here as against strom.
VERSIONS: dict[int, tuple[int, int]] = {key: h.VERSIONS for key, h in handlers.registry().items()}


class _Features:
    """What strom's ApiVersions handler reads from a broker: its API ranges and finalized features.
    The null broker answers ApiVersions with that handler, so its feature list is strom's."""

    def __init__(self, transaction_version: int) -> None:
        # A freshly formatted broker's levels (group.version, eligible.leader.replicas.version,
        # ...), with transaction.version as asked.
        levels = {name: level for name, level in default_levels(LATEST_METADATA_VERSION).items()
                  if name != TRANSACTION_VERSION_FEATURE}
        if transaction_version > 0:
            levels[TRANSACTION_VERSION_FEATURE] = transaction_version
        self.image = types.SimpleNamespace(features=levels)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return VERSIONS

    def metadata_version_level(self) -> tuple[int, int]:
        return LATEST_METADATA_VERSION, 1


DEFAULT_TRANSACTION_VERSION = default_levels(LATEST_METADATA_VERSION).get(TRANSACTION_VERSION_FEATURE, 0)


class NullBroker:
    """The state a client can observe: topics (name -> id, partition count), each partition's next
    offset (so acknowledged offsets advance), and producer ids. Single-threaded (one event loop)."""

    def __init__(self, host: str, port: int, transaction_version: int = DEFAULT_TRANSACTION_VERSION) -> None:
        self.host, self.port = host, port
        self.features = _Features(transaction_version)
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}
        self.names: dict[uuid.UUID, str] = {}
        self.next_offset: dict[tuple[str, int], int] = {}
        self.producer_ids = itertools.count(1000)
        self.epochs: dict[str, tuple[int, int]] = {}  # transactional id -> (producer id, epoch)
        self.handlers: dict[int, Callable[[int, Any], Any]] = {
            0: self.produce, 3: self.metadata, 10: self.find_coordinator, 18: self.api_versions,
            19: self.create_topics, 22: self.init_producer_id, 24: self.add_partitions_to_txn,
            25: self.no_error, 26: self.end_txn, 28: self.txn_offset_commit,
            71: self.get_telemetry_subscriptions}

    # -- requests ---------------------------------------------------------------------------------

    def api_versions(self, version: int, _request: Any) -> Any:
        return api_versions.build(cast(Any, self.features), version)  # only the parts of a Broker build() reads

    def get_telemetry_subscriptions(self, version: int, request: Any) -> Any:
        """No metrics wanted (KIP-714): librdkafka asks as soon as the API is advertised (strom's
        broker serves it), and a request left unserved would close its connection."""
        m = response_messages(71, version)
        instance = request.client_instance_id
        if instance == uuid.UUID(int=0):
            instance = uuid.uuid4()
        return m.make("GetTelemetrySubscriptionsResponse", throttle_time=0, error_code=0,
                      client_instance_id=instance, subscription_id=0, accepted_compression_types=(),
                      push_interval=datetime.timedelta(minutes=5), telemetry_max_bytes=1 << 20,
                      delta_temporality=True, requested_metrics=())

    def metadata(self, version: int, request: Any) -> Any:
        m = response_messages(3, version)
        wanted = list(self.topics) if request.topics is None else \
            [t.name if t.name is not None else self.names.get(t.topic_id, "") for t in request.topics]
        out = []
        for name in wanted:
            known = self.topics.get(name)
            parts = () if known is None else tuple(
                m.make("MetadataResponsePartition", error_code=0, partition_index=p, leader_id=NODE_ID,
                       leader_epoch=0, replica_nodes=(NODE_ID,), isr_nodes=(NODE_ID,), offline_replicas=())
                for p in range(known[1]))
            out.append(m.make("MetadataResponseTopic", error_code=0 if known else UNKNOWN_TOPIC_OR_PARTITION, name=name,
                              topic_id=known[0] if known else uuid.UUID(int=0), is_internal=False,
                              partitions=parts, topic_authorized_operations=-2147483648))
        broker = m.make("MetadataResponseBroker", node_id=NODE_ID, host=self.host, port=self.port, rack=None)
        return m.make("MetadataResponse", throttle_time=0, brokers=(broker,), cluster_id=CLUSTER_ID,
                      controller_id=NODE_ID, topics=tuple(out), cluster_authorized_operations=-2147483648,
                      error_code=0)

    def create_topics(self, version: int, request: Any) -> Any:
        m = response_messages(19, version)
        results = []
        for t in request.topics:
            count = t.num_partitions if t.num_partitions > 0 else 1
            if t.name in self.topics:
                code = 36  # TOPIC_ALREADY_EXISTS
            else:
                code = 0
                if not request.validate_only:
                    topic_id = uuid.uuid4()
                    self.topics[t.name], self.names[topic_id] = (topic_id, count), t.name
                    self.next_offset.update({(t.name, p): 0 for p in range(count)})
            results.append(m.make("CreatableTopicResult", name=t.name, topic_id=self.topics.get(t.name, (None,))[0],
                                  error_code=code, error_message=None, topic_config_error_code=0,
                                  num_partitions=count, replication_factor=1, configs=()))
        return m.make("CreateTopicsResponse", throttle_time=0, topics=tuple(results))

    def find_coordinator(self, version: int, request: Any) -> Any:
        m = response_messages(10, version)
        if not m.has("FindCoordinatorResponse", "coordinators"):  # v0-v3: one key
            return m.make("FindCoordinatorResponse", throttle_time=0, error_code=0, error_message=None,
                          node_id=NODE_ID, host=self.host, port=self.port)
        return m.make("FindCoordinatorResponse", throttle_time=0, coordinators=tuple(
            m.make("Coordinator", key=key, node_id=NODE_ID, host=self.host, port=self.port, error_code=0,
                   error_message=None) for key in request.coordinator_keys))

    def _bump(self, transactional_id: str, pid: int, epoch: int) -> tuple[int, int]:
        """The id's next (producer id, epoch): as Kafka, a new producer id at epoch 0 once the
        epoch would reach the last usable value (Short.MAX_VALUE - 1)."""
        bumped = (next(self.producer_ids), 0) if epoch + 1 >= SHORT_MAX - 1 else (pid, epoch + 1)
        self.epochs[transactional_id] = bumped
        return bumped

    def init_producer_id(self, version: int, request: Any) -> Any:
        tid = request.transactional_id
        if tid is None:
            pid, epoch = next(self.producer_ids), 0
        else:
            pid, epoch = self._bump(tid, *self.epochs.get(tid, (next(self.producer_ids), -1)))
        return response_messages(22, version).make("InitProducerIdResponse", throttle_time=0, error_code=0,
                                                   producer_id=pid, producer_epoch=epoch)

    def add_partitions_to_txn(self, version: int, request: Any) -> Any:
        m = response_messages(24, version)

        def topic_results(requested: Any) -> tuple[Any, ...]:
            return tuple(m.make("AddPartitionsToTxnTopicResult", name=t.name, results_by_partition=tuple(
                m.make("AddPartitionsToTxnPartitionResult", partition_index=p, partition_error_code=0)
                for p in t.partitions)) for t in requested)

        if version <= 3:
            return m.make("AddPartitionsToTxnResponse", throttle_time=0,
                          results_by_topic_v3_and_below=topic_results(request.v3_and_below_topics))
        return m.make("AddPartitionsToTxnResponse", throttle_time=0, error_code=0, results_by_transaction=tuple(
            m.make("AddPartitionsToTxnResult", transactional_id=t.transactional_id,
                   topic_results=topic_results(t.topics)) for t in request.transactions))

    def end_txn(self, version: int, request: Any) -> Any:
        pid, epoch = self.epochs.get(request.transactional_id, (request.producer_id, request.producer_epoch))
        if version >= 5:  # transaction version 2: every EndTxn bumps the epoch
            pid, epoch = self._bump(request.transactional_id, pid, epoch)
        return response_messages(26, version).make("EndTxnResponse", throttle_time=0, error_code=0,
                                                   producer_id=pid, producer_epoch=epoch)

    def no_error(self, version: int, _request: Any) -> Any:  # AddOffsetsToTxn
        return response_messages(25, version).make("AddOffsetsToTxnResponse", throttle_time=0, error_code=0)

    def txn_offset_commit(self, version: int, request: Any) -> Any:
        m = response_messages(28, version)
        return m.make("TxnOffsetCommitResponse", throttle_time=0, topics=tuple(
            m.make("TxnOffsetCommitResponseTopic", name=t.name, partitions=tuple(
                m.make("TxnOffsetCommitResponsePartition", partition_index=p.partition_index, error_code=0)
                for p in t.partitions)) for t in request.topics))

    def produce(self, version: int, request: Any) -> list[TopicResults]:
        out = []
        for topic in request.topic_data:
            by_id = version >= produce.TOPIC_IDS_SINCE
            name = self.names.get(topic.topic_id, "") if by_id else topic.name
            # As strom and Kafka: UNKNOWN_TOPIC_ID for an id, UNKNOWN_TOPIC_OR_PARTITION otherwise.
            unknown = UNKNOWN_TOPIC_ID if by_id and not name else UNKNOWN_TOPIC_OR_PARTITION
            parts = []
            for pd in topic.partition_data:
                key = (name, pd.index)
                base = self.next_offset.get(key)
                if base is None:
                    parts.append(PartitionResult(pd.index, unknown, -1, -1, -1, None))
                    continue
                self.next_offset[key] = base + sum(h.last_offset_delta + 1 for _, h in iter_headers(pd.records or b""))
                parts.append(PartitionResult(pd.index, 0, base, -1, 0, None))
            out.append(TopicResults(name, parts, getattr(topic, "topic_id", None)))
        return out

    # -- requests, as strom's listener hands them over ---------------------------------------------

    async def dispatch(self, _ctx: RequestContext, header: codec.RequestHeader, frame: bytes,
                       body_pos: int) -> bytes | None:
        """The answer frame to one request, None for acks=0 (``Broker.dispatch``'s contract)."""
        key, version = header.api_key, header.api_version
        supported = key in VERSIONS and VERSIONS[key][0] <= version <= VERSIONS[key][1]
        if key == api_versions.API_KEY and not supported:
            # As strom: a v0 UNSUPPORTED_VERSION answer, so the client retries a version we know.
            return codec.encode_response(key, 0, header.correlation_id, api_versions.build(
                cast(Any, self.features), 0, ErrorCode.unsupported_version))
        handler = self.handlers.get(key)
        if handler is None or not supported:
            # A client that needs more than a producer does: the listener closes the connection
            # and logs this where the benchmark shows it.
            raise MalformedRequestError(f"API key {key} v{version} is not served by the null broker "
                                        "(a producer's requests only)")
        request = codec.decode_request(header, frame, body_pos)
        answer = handler(version, request)
        if key == produce.API_KEY:
            return None if request.acks == 0 else encode_produce_response(version, header.correlation_id, 0, answer)
        return codec.encode_response(key, version, header.correlation_id, answer)


async def run(host: str, port: int, transaction_version: int = DEFAULT_TRANSACTION_VERSION) -> None:
    broker = NullBroker(host, port, transaction_version)
    # strom's own socket layer (frames, per-connection order, errors close one connection).
    listener = Listener("PLAINTEXT", host, port, broker.dispatch, max_request_bytes=MAX_REQUEST_BYTES)
    await listener.start()
    broker.port = listener.port
    print(f"bootstrap.servers={host}:{broker.port}", flush=True)
    try:
        await asyncio.Event().wait()  # until SIGTERM ends the process
    finally:
        await listener.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    ap.add_argument("--transaction-version", type=int, choices=(0, 1, 2), default=DEFAULT_TRANSACTION_VERSION,
                    help=f"the finalized transaction.version advertised (default {DEFAULT_TRANSACTION_VERSION}, "
                         "strom's); the Java client uses KIP-890's transactions at 2")
    args = ap.parse_args(argv)
    # The listener's warnings (a connection closed, and why) on stderr, which the benchmarks keep.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="null broker: %(message)s")
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C when run by hand; the benchmarks send SIGTERM
        runner(run(args.host, args.port, args.transaction_version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
