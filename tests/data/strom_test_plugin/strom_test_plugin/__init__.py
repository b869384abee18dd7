"""A third-party strom plugin, written as an outside author would, for strom's tests.

* authorizer ``strom_test_plugin.DenyTopics``: denies WRITE on topics whose name starts with
  ``denied-``; allows everything else.
* quota manager ``strom_test_plugin.ThrottleClient``: throttles only Produce requests of the
  client id ``throttle-me`` (``strom_test_plugin.throttle.ms``, default 500 ms each); never
  throttles anyone else.
* Connect source connector ``strom_test_plugin.connect.CountdownSourceConnector`` (alias
  ``CountdownSource``), offered through ``strom_connect_plugins``; see that module.
* remote storage manager ``strom_test_plugin.DirectoryRemoteStorageManager``: remote segments in
  the directory ``rsm.config.dir`` (see ``remote_storage``).
* assignors: ``strom_test_plugin.first-takes-all`` (consumer groups, KIP-848) and
  ``strom_test_plugin.everyone-gets-all`` (share groups, KIP-932), chosen by
  ``group.consumer.assignors`` / ``group.share.assignors``.

None is active unless the broker config selects it (``authorizer.class.name`` /
``client.quota.callback.class`` / ``remote.log.storage.manager.class.name``) or a connector config names it, so installing this package
changes nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from strom.plugins.hookspecs.assignors import (
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    SubscribedTopicDescriber,
)
from strom.plugins.hookspecs.authorizers import (
    AclOperation,
    Action,
    AuthorizationResult,
    RequestContext,
    ResourceType,
)
from strom.plugins.hookspecs.quotas import QuotaType
from strom.plugins.markers import hookimpl

AUTHORIZER_NAME = "strom_test_plugin.DenyTopics"
QUOTA_MANAGER_NAME = "strom_test_plugin.ThrottleClient"
DENIED_PREFIX = "denied-"
THROTTLED_CLIENT_ID = "throttle-me"


class DenyTopicsAuthorizer:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)

    def authorize(self, ctx: RequestContext, actions: Sequence[Action]) -> list[AuthorizationResult]:
        return [AuthorizationResult.DENIED
                if (a.operation == AclOperation.WRITE and a.resource.resource_type == ResourceType.TOPIC
                    and a.resource.name.startswith(DENIED_PREFIX))
                else AuthorizationResult.ALLOWED
                for a in actions]


class ThrottleClientQuotaManager:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.throttle_ms = int(config.get("strom_test_plugin.throttle.ms", 500))
        self.recorded: list[tuple[str, str, QuotaType, float]] = []

    def record(self, principal: str, client_id: str, quota_type: QuotaType, value: float,
               now_ms: int) -> int:
        if client_id == THROTTLED_CLIENT_ID and quota_type == QuotaType.PRODUCE:
            self.recorded.append((principal, client_id, quota_type, value))
            return self.throttle_ms
        return 0


@hookimpl
def strom_authorizers() -> Mapping[str, Any]:
    return {AUTHORIZER_NAME: DenyTopicsAuthorizer}


@hookimpl
def strom_quota_managers() -> Mapping[str, Any]:
    return {QUOTA_MANAGER_NAME: ThrottleClientQuotaManager}


class FirstTakesAllAssignor:
    """KIP-848 server-side assignor: every partition to the member with the smallest member id.

    Useless in production and unmistakable in a test: a group using it has one busy member.
    """

    def name(self) -> str:
        return "strom_test_plugin.first-takes-all"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        members = sorted(group_spec.members)
        assignment = {m: MemberAssignment({}) for m in members}
        if members:
            first = members[0]
            wanted = frozenset().union(*(group_spec.members[m].subscribed_topic_ids for m in members))
            assignment[first] = MemberAssignment(
                {t: frozenset(range(topics.num_partitions(t))) for t in wanted if topics.num_partitions(t) > 0})
        return GroupAssignment(assignment)


class EveryoneGetsAllShareAssignor:
    """KIP-932 share-group assignor: every member gets every partition it subscribes to.

    A share group may hand one partition to many members; SimpleAssignor spreads them instead,
    so a group with two members on two partitions tells the two apart at a glance.
    """

    share_group_assignor = True  # what makes strom offer it to share groups

    def name(self) -> str:
        return "strom_test_plugin.everyone-gets-all"

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        # A share group's spec says which share partitions are initialized (assignable yet).
        assignable = getattr(group_spec, "is_partition_assignable", lambda _t, _p: True)
        out = {}
        for m, spec in group_spec.members.items():
            parts = {t: frozenset(p for p in range(topics.num_partitions(t)) if assignable(t, p))
                     for t in spec.subscribed_topic_ids}
            out[m] = MemberAssignment({t: ps for t, ps in parts.items() if ps})
        return GroupAssignment(out)


@hookimpl
def strom_assignors() -> Sequence[Any]:
    return [FirstTakesAllAssignor(), EveryoneGetsAllShareAssignor()]


@hookimpl
def strom_connect_plugins() -> list[type]:
    # Imported here, not at the top: the broker loads this plugin too and must not import Connect.
    from strom_test_plugin.connect import CountdownSourceConnector

    return [CountdownSourceConnector]


@hookimpl
def strom_remote_storage_managers() -> Mapping[str, Any]:
    from strom_test_plugin.remote_storage import NAME, DirectoryRemoteStorageManager

    return {NAME: DirectoryRemoteStorageManager}
