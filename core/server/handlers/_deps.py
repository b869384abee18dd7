"""The narrow, typed collaborators each family of API handlers depends on.

A handler declares one of these Protocols as its first parameter (``deps``) and sees only the
collaborators it names: the metadata image, the replica manager, a coordinator, the controller,
the authorizer and quota calls, the config. The :class:`~strom.core.server.broker.Broker`
satisfies every one of them (structurally) and dispatch passes itself; a handler cannot reach
for anything its Protocol does not name, so its dependencies are read off its signature (Tansu's
one-handler-per-API-with-a-narrow-dependency model). ``tests/unit/test_handler_types.py``
checks that the Broker satisfies each Protocol a handler declares.

Protocols compose: a handler needing two families declares a Protocol inheriting both in its
own module. Attributes are read-only properties, so a plain attribute on the Broker satisfies
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, NamedTuple, Protocol

from strom.core.request_context import Authorizing, RequestContext

if TYPE_CHECKING:
    from pluggy import PluginManager

    from strom.core.config import BrokerConfig
    from strom.core.controller.quorum_controller import QuorumController
    from strom.core.coordinator.group.coordinator import GroupCoordinator
    from strom.core.coordinator.group.records import CoordinatorMessage
    from strom.core.coordinator.producer_ids import ProducerIdManager
    from strom.core.coordinator.runtime import CoordinatorRuntime
    from strom.core.coordinator.share.coordinator import ShareCoordinator
    from strom.core.coordinator.share.share_group import ShareGroup
    from strom.core.coordinator.txn.coordinator import TransactionCoordinator
    from strom.core.metadata.image import MetadataImage
    from strom.core.raft.client import RaftClient
    from strom.core.replica.manager import ReplicaManager
    from strom.core.share.share_partition_manager import SharePartitionManager
    from strom.core.share.share_session import ShareSessionCache
    from strom.plugins.hookspecs.authorizers import Authorizer
    from strom.plugins.hookspecs.quotas import QuotaManager

__all__ = [
    "AclDeps", "ApiVersionsDeps", "Authorizing", "BrokerLifecycleDeps", "ClusterDeps", "ConfigDeps", "ControllerDeps", "CoordinatorRuntimeDeps",
    "GroupDeps", "ImageDeps", "ListedBroker", "MetadataDeps", "PartitionTxnDeps", "ProducerIdDeps", "QuorumDeps", "ReplicaDeps",
    "RequestDeps", "TxnDeps",
]


class ListedBroker(NamedTuple):
    """A broker as Metadata, DescribeCluster and FindCoordinator list it."""

    node_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool


class RequestDeps(Authorizing, Protocol):
    """What every handler may use: the authorizer and the client quotas."""

    def record_quota(self, ctx: RequestContext, quota_type: str, value: float) -> int:
        """Charge ``value`` to the client's quota of ``quota_type`` (Kafka's QuotaType name);
        returns the throttle time in ms."""
        ...

    @property
    def quota_manager(self) -> QuotaManager:
        """The quota plugin (KIP-599's strict check asks it before a controller mutation)."""
        ...


class ConfigDeps(RequestDeps, Protocol):
    @property
    def config(self) -> BrokerConfig: ...


class ImageDeps(RequestDeps, Protocol):
    """The committed metadata image (topics, partitions, configs, features)."""

    @property
    def image(self) -> MetadataImage: ...


class ReplicaDeps(ImageDeps, ConfigDeps, Protocol):
    """The partitions this broker hosts (Produce, Fetch, ListOffsets, DeleteRecords, ...)."""

    @property
    def replica_manager(self) -> ReplicaManager: ...


class ClusterDeps(ImageDeps, ConfigDeps, Protocol):
    """This node and the brokers registered in the cluster."""

    @property
    def node_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    def controller_id(self) -> int: ...
    def broker_endpoints(self, listener_name: str, *, include_fenced: bool = False) -> list[ListedBroker]: ...


class MetadataDeps(ClusterDeps, Protocol):
    """Metadata: the cluster, plus topic auto-creation."""

    async def auto_create_topics(self, names: list[str]) -> dict[str, int]: ...


class ControllerDeps(ImageDeps, ConfigDeps, Protocol):
    """Admin APIs that change metadata through the quorum controller (and configs of this node)."""

    @property
    def node_id(self) -> int: ...

    @property
    def controller(self) -> QuorumController: ...


class AclDeps(ControllerDeps, Protocol):
    """CreateAcls / DescribeAcls / DeleteAcls: the authorizer holds the ACLs (when it is a
    ClusterMetadataAuthorizer); changes go through the controller as metadata records."""

    @property
    def authorizer(self) -> Authorizer: ...


class QuorumDeps(ImageDeps, ConfigDeps, Protocol):
    """DescribeQuorum: the KRaft client of the metadata partition (and the controllers' registrations)."""

    @property
    def node_id(self) -> int: ...
    @property
    def raft(self) -> RaftClient: ...


class GroupDeps(ImageDeps, ConfigDeps, Protocol):
    """Group APIs: the group coordinator (and the assignor plugins KIP-848 groups load)."""

    @property
    def group_coordinator(self) -> GroupCoordinator: ...
    @property
    def plugin_manager(self) -> PluginManager: ...


class TxnDeps(ImageDeps, ConfigDeps, Protocol):
    """Transaction APIs: the transaction coordinator."""

    @property
    def txn_coordinator(self) -> TransactionCoordinator: ...


class PartitionTxnDeps(ReplicaDeps, TxnDeps, Protocol):
    """A partition leader's side of KIP-890 (Produce, TxnOffsetCommit): the partitions' producer
    state and the transaction coordinator that adds or verifies them."""


class ProducerIdDeps(TxnDeps, Protocol):
    """InitProducerId: producer ids come from the controller's blocks."""

    @property
    def producer_ids(self) -> ProducerIdManager: ...

    def authorize_by_resource_type(self, ctx: RequestContext, operation: str, resource_type: str) -> bool:
        """May the principal perform ``operation`` on some resource of ``resource_type`` (Kafka's
        ``Authorizer.authorizeByResourceType``: an idempotent producer needs IDEMPOTENT_WRITE on
        the cluster or WRITE on any topic)?"""
        ...


class CoordinatorRuntimeDeps(RequestDeps, Protocol):
    """WriteTxnMarkers: the coordinators' internal-topic I/O."""

    @property
    def coordinator_runtime(self) -> CoordinatorRuntime: ...


class ShareCoordinatorDeps(RequestDeps, Protocol):
    """The share coordinator's state APIs (Initialize/Read/Write/Delete ShareGroupState, ReadShareGroupStateSummary)."""

    @property
    def share_coordinator(self) -> ShareCoordinator: ...


class ShareFetchDeps(ImageDeps, ConfigDeps, Protocol):
    """ShareFetch / ShareAcknowledge (KIP-932): the share partitions and the share sessions."""

    @property
    def share_partition_manager(self) -> SharePartitionManager: ...
    @property
    def share_sessions(self) -> ShareSessionCache: ...


class ShareGroupsView(Protocol):
    """The group coordinator as the share-group offsets APIs see it: share groups by id (and
    the other groups, which a share group id must not name), and whether it is serving."""

    @property
    def groups(self) -> MutableMapping[str, object]: ...
    def check_available(self, group_id: str | None = None) -> None: ...
    def share_group(self, group_id: str) -> ShareGroup | None: ...
    def share_group_lock(self, group_id: str) -> asyncio.Lock:
        """Held while the offsets change: a member cannot join between the emptiness check and
        the write."""
        ...
    async def append_records(self, group_id: str,
                             records: list[tuple[CoordinatorMessage, CoordinatorMessage | None]]) -> int:
        """Append a share group's records (ShareGroupMetadata, ShareGroupStatePartitionMetadata)."""
        ...


class ShareGroupOffsetsDeps(ShareCoordinatorDeps, ReplicaDeps, Protocol):
    """DescribeShareGroupOffsets / AlterShareGroupOffsets / DeleteShareGroupOffsets: the share
    group (must be empty to change), the share coordinator's state and the partitions' high
    watermarks (lag)."""

    @property
    def group_coordinator(self) -> ShareGroupsView: ...


class ApiVersionsDeps(ImageDeps, Protocol):
    """ApiVersions: what this broker serves and the finalized features."""

    def api_versions(self) -> dict[int, tuple[int, int]]: ...
    def metadata_version_level(self) -> tuple[int, int]: ...



class BrokerLifecycleDeps(RequestDeps, Protocol):
    """BrokerRegistration / BrokerHeartbeat on the controller listener (KIP-631): the cluster id
    a registering broker must carry, and the quorum controller that keeps the sessions."""

    @property
    def cluster_id(self) -> str: ...

    @property
    def controller(self) -> QuorumController: ...
