"""``strom share-groups``: list, describe, reset the offsets of and delete share groups (KIP-932).

Kafka's kafka-share-groups.sh (``ShareGroupCommand``) with its flags, its tables (Kafka 4.3.1's
column names and widths, so scripts that parse Kafka's output read strom's) and its refusals:
offsets are reset or deleted only for a group without members, and a reset is a dry run unless
``--execute`` is given. confluent-kafka's AdminClient has no share-group calls, so the group
requests (ListGroups, FindCoordinator, ShareGroupDescribe, Describe/Alter/DeleteShareGroupOffsets,
DeleteGroups) go over a plain socket (:mod:`strom.kafka_wire`, PLAINTEXT listeners only); the log
offsets a reset moves to come from the AdminClient (ListOffsets at each partition's leader).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from strom.core.tools.common import ToolError, UsageError, admin_client, check_bootstrap, client_config
from strom.core.tools.group_tool import (
    MISSING,
    add_actions,
    add_reset_args,
    add_selection_args,
    check_timeout_and_groups,
    check_views,
    parse_datetime,
    plan_lines,
    print_deletion,
    run_command,
    warn_empty_partition,
    width,
)

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient, OffsetSpec
    from kio.static.protocol import Entity

E = TypeVar("E", bound="Entity")

# Api keys and the versions sent (those Kafka 4.3.1 serves).
LIST_GROUPS, FIND_COORDINATOR, DELETE_GROUPS = (16, 5), (10, 6), (42, 2)
SHARE_GROUP_DESCRIBE, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = (77, 1), (90, 1), (91, 0), (92, 0)
GROUP_ID_NOT_FOUND = 69


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "share-groups", help="list, describe, reset the offsets of and delete share groups",
        description="Manage share groups (KIP-932) like Kafka's kafka-share-groups.sh: --list [--state]; "
                    "--describe [--offsets|--members|--state] [--verbose] with GROUP TOPIC PARTITION "
                    "START-OFFSET LAG; --reset-offsets with --to-earliest, --to-latest or --to-datetime, a "
                    "scope (--topic or --all-topics) and --dry-run (the default) or --execute, only on a "
                    "group without members; --delete-offsets --topic T; --delete. PLAINTEXT listeners.")
    add_actions(p, [
        ("--list", "list all share groups"),
        ("--describe", "describe groups: start offsets and lag (default), --members or --state"),
        ("--reset-offsets", "reset a group's share-partition start offsets (the group must have no members)"),
        ("--delete-offsets", "delete a group's offsets of --topic (the group must have no members)"),
        ("--delete", "delete share groups (they must have no members)")])
    add_selection_args(p, "share", offsets="start offsets and lag", state="coordinator, state, members")
    p.add_argument("--verbose", action="store_true",
                   help="with --describe: leader epochs, member epochs, group and assignment epochs")
    add_reset_args(p, topic="with --reset-offsets: a topic or some of its partitions; with --delete-offsets: a topic",
                   all_topics="with --reset-offsets: every partition the group has a start offset for",
                   execute="set the new offsets", timeout_of="each request")
    p.set_defaults(func=cmd_share_groups)


def _validate(args: argparse.Namespace) -> None:
    check_timeout_and_groups(args)
    if (args.describe or args.delete) and not (args.group or args.all_groups):
        raise UsageError("--group G or --all-groups is required with --describe and --delete")
    if (args.reset_offsets or args.delete_offsets) and len(args.group) != 1:
        raise UsageError("--reset-offsets and --delete-offsets take exactly one --group G")
    check_views(args)
    if args.delete_offsets and not args.topic:
        raise UsageError("--delete-offsets needs --topic T")
    if args.reset_offsets:
        if bool(args.topic) == args.all_topics:
            raise UsageError("--reset-offsets needs one scope: --topic T[:P,...] or --all-topics")
        if not (args.to_earliest or args.to_latest or args.to_datetime is not None):
            raise UsageError("--reset-offsets needs one of --to-earliest, --to-latest, --to-datetime")
        return
    used = [flag for flag, on in (("--all-topics", args.all_topics), ("--execute", args.execute),
                                  ("--dry-run", args.dry_run)) if on]
    if args.topic and not args.delete_offsets:
        used.insert(0, "--topic")
    if used:
        raise UsageError(f"{used[0]} goes with --reset-offsets")


def cmd_share_groups(args: argparse.Namespace) -> int:
    _validate(args)
    tool = ShareGroupTool(args)
    return run_command(args, {"list": tool.list_groups, "describe": tool.describe, "reset_offsets": tool.reset_offsets,
                              "delete_offsets": tool.delete_offsets, "delete": tool.delete})


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    host: str
    client_id: str
    member_epoch: int
    assignment: dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class Description:
    """ShareGroupDescribe's answer for one group (Kafka's ShareGroupDescription)."""

    group: str
    error: int
    state: str
    group_epoch: int
    assignment_epoch: int
    members: list[Member]
    coordinator: str


def assignment_text(assignment: dict[str, list[int]]) -> str:
    """Kafka's ASSIGNMENT column: ``t1:0,1;t2:3``, topics and partitions sorted."""
    return ";".join(sorted(f"{t}:" + ",".join(str(p) for p in sorted(ps)) for t, ps in assignment.items()))


class ShareGroupTool:
    """The commands of ``strom share-groups`` against one cluster."""

    def __init__(self, args: argparse.Namespace) -> None:
        from strom import kafka_wire

        self.args = args
        self.timeout_s = args.timeout / 1000
        check_bootstrap(args.bootstrap_server)
        if not kafka_wire.plaintext(client_config(args)):
            raise ToolError("strom share-groups speaks to PLAINTEXT listeners only (confluent-kafka's "
                            "AdminClient has no share-group calls); use Kafka's kafka-share-groups.sh")
        self.bootstrap = [b.strip() for b in args.bootstrap_server.split(",") if b.strip()]
        self._admin: AdminClient | None = None
        self._coordinators: dict[str, tuple[str, int, int]] = {}

    # -- requests -------------------------------------------------------------------------

    def _call(self, address: tuple[str, int], api: tuple[int, int], request: Entity, response_type: type[E]) -> E:
        from strom import kafka_wire

        try:
            return kafka_wire.call(address[0], address[1], api[0], api[1], request, response_type,
                                   client_id="strom-share-groups", timeout=self.timeout_s)
        except OSError as e:
            raise ToolError(f"could not reach a broker at {address[0]}:{address[1]}: {e}") from None

    def _any_broker(self) -> tuple[str, int]:
        host, _, port = self.bootstrap[0].rpartition(":")
        return host, int(port)

    def coordinator(self, group: str) -> tuple[str, int, int]:
        """(host, port, node id) of the group's coordinator (FindCoordinator)."""
        found = self._coordinators.get(group)
        if found is not None:
            return found
        from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
        from kio.schema.find_coordinator.v6.response import FindCoordinatorResponse

        resp = self._call(self._any_broker(), FIND_COORDINATOR,
                          FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)), FindCoordinatorResponse)
        c = resp.coordinators[0]
        if int(c.error_code):
            raise ToolError(f"cannot find the coordinator of group {group!r}: {_error_name(int(c.error_code))}")
        found = (str(c.host), int(c.port), int(c.node_id))
        self._coordinators[group] = found
        return found

    def listings(self, states: Iterable[str] = ()) -> dict[str, str]:
        """group -> state of every share group (ListGroups with the share type)."""
        from kio.schema.list_groups.v5.request import ListGroupsRequest
        from kio.schema.list_groups.v5.response import ListGroupsResponse

        resp = self._call(self._any_broker(), LIST_GROUPS,
                          ListGroupsRequest(states_filter=tuple(states), types_filter=("share",)), ListGroupsResponse)
        if int(resp.error_code):
            raise ToolError(f"cannot list share groups: {_error_name(int(resp.error_code))}")
        return {str(g.group_id): str(g.group_state) for g in resp.groups}

    def describe_group(self, group: str) -> Description:
        from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
        from kio.schema.share_group_describe.v1.response import ShareGroupDescribeResponse

        host, port, node = self.coordinator(group)
        resp = self._call((host, port), SHARE_GROUP_DESCRIBE,
                          ShareGroupDescribeRequest(group_ids=(GroupId(group),), include_authorized_operations=False),
                          ShareGroupDescribeResponse)
        g = resp.groups[0]
        members = [Member(str(m.member_id), str(m.client_host), str(m.client_id), int(m.member_epoch),
                          {str(t.topic_name): [int(p) for p in t.partitions] for t in m.assignment.topic_partitions})
                   for m in g.members]
        return Description(group, int(g.error_code), str(g.group_state), int(g.group_epoch),
                           int(g.assignment_epoch), members, f"{host}:{port}  ({node})")

    def start_offsets(self, group: str) -> dict[tuple[str, int], tuple[int, int, int]]:
        """(topic, partition) -> (start offset, leader epoch, lag) of every share partition with state."""
        from kio.schema.describe_share_group_offsets.v1 import request as req
        from kio.schema.describe_share_group_offsets.v1.response import DescribeShareGroupOffsetsResponse

        host, port, _ = self.coordinator(group)
        resp = self._call((host, port), DESCRIBE_OFFSETS, req.DescribeShareGroupOffsetsRequest(groups=(
            req.DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group), topics=None),)), DescribeShareGroupOffsetsResponse)
        g = resp.groups[0]
        if int(g.error_code):
            raise ToolError(f"cannot describe the offsets of group {group!r}: {g.error_message or _error_name(int(g.error_code))}")
        return {(str(t.topic_name), int(p.partition_index)): (int(p.start_offset), int(p.leader_epoch), int(p.lag))
                for t in g.topics for p in t.partitions if not int(p.error_code)}

    # -- --list -----------------------------------------------------------------------------

    def list_groups(self) -> int:
        if self.args.state is None:
            for group in sorted(self.listings()):
                print(group)
            return 0
        states = [s.strip() for s in self.args.state.split(",") if s.strip()]
        known = {"stable": "Stable", "empty": "Empty", "dead": "Dead", "unknown": "Unknown"}
        bad = [s for s in states if s.lower() not in known]
        if bad:
            raise UsageError(f"--state: share groups are in states {', '.join(sorted(set(known.values())))}; "
                             f"not {', '.join(bad)}")
        listed = self.listings(known[s.lower()] for s in states)
        gw = width(listed)
        print(f"{'GROUP':<{gw}} STATE")
        for group in sorted(listed):
            print(f"{group:<{gw}} {listed[group]}")
        return 0

    # -- --describe -------------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        if self.args.all_groups:
            return sorted(self.listings())
        return sorted(dict.fromkeys(self.args.group))

    def describe(self) -> int:
        failed = 0
        for group in self.group_ids():
            desc = self.describe_group(group)
            if desc.error or desc.state == "Dead":
                reason = f"Group {group} not found." if desc.error in (0, GROUP_ID_NOT_FOUND) else _error_name(desc.error)
                print(f"\nError: Share group '{group}' cannot be described: {reason}")
                failed += 1
            elif self.args.members:
                self._print_members(desc)
            elif self.args.state is not None:
                self._print_state(desc)
            else:
                self._print_offsets(desc)
        sys.stdout.flush()
        return 1 if failed else 0

    def _print_offsets(self, desc: Description) -> None:
        offsets = self.start_offsets(desc.group)
        if not offsets:
            print(f"\nShare group '{desc.group}' has no offset information.")
            return
        gw = max(15, len(desc.group))
        tw = width(t for t, _ in offsets)
        verbose = self.args.verbose
        header = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "START-OFFSET", "LAG"]

        def line(cols: list[str]) -> str:
            g, t, p, *rest = cols
            middle = "".join(f"{c:<13} " for c in rest[:-1])
            return f"{g:<{gw}} {t:<{tw}} {p:<10} {middle}{rest[-1]}"

        out = ["", line(header)]
        for (topic, partition), (start, epoch, lag) in sorted(offsets.items()):
            shown = [str(start), str(lag)] if start >= 0 else [MISSING, MISSING]
            out.append(line([desc.group, topic, str(partition), *([str(epoch)] if verbose else []), *shown]))
        print("\n".join(out) + "\n")

    def _no_members(self, desc: Description) -> bool:
        if desc.state == "Empty":
            print(f"\nShare group '{desc.group}' has no active members.", file=sys.stderr)
        return bool(desc.members)

    def _print_state(self, desc: Description) -> None:
        self._no_members(desc)
        gw, cw = max(15, len(desc.group)), max(25, len(desc.coordinator))
        if self.args.verbose:
            cols = [("GROUP", desc.group, gw), ("COORDINATOR (ID)", desc.coordinator, cw), ("STATE", desc.state, 15),
                    ("GROUP-EPOCH", str(desc.group_epoch), 12), ("ASSIGNMENT-EPOCH", str(desc.assignment_epoch), 17)]
        else:
            cols = [("GROUP", desc.group, gw), ("COORDINATOR (ID)", desc.coordinator, cw), ("STATE", desc.state, 15)]
        head = " ".join(f"{h:<{w}}" for h, _, w in cols) + " #MEMBERS"
        row = " ".join(f"{v:<{w}}" for _, v, w in cols) + f" {len(desc.members)}"
        print("\n".join(["", head, row]) + "\n")

    def _print_members(self, desc: Description) -> None:
        if not self._no_members(desc):
            return
        members = sorted(desc.members, key=lambda m: m.member_id)
        gw = max(15, len(desc.group))
        mw = width(m.member_id for m in members)
        hw = width(m.host for m in members)
        lw = width(m.client_id for m in members)
        verbose = self.args.verbose

        def line(g: str, mid: str, host: str, client: str, n: str, epoch: str, assignment: str) -> str:
            middle = f"{epoch:<13} " if verbose else ""
            return f"{g:<{gw}} {mid:<{mw}} {host:<{hw}} {client:<{lw}} {n:<12} {middle}{assignment}"

        out = ["", line("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT")]
        out += [line(desc.group, m.member_id, m.host, m.client_id, str(sum(len(ps) for ps in m.assignment.values())),
                     str(m.member_epoch), assignment_text(m.assignment)) for m in members]
        print("\n".join(out) + "\n")

    # -- --reset-offsets --------------------------------------------------------------------

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = admin_client(self.args)
        return self._admin

    def _partitions(self, group: str) -> list[tuple[str, int]]:
        if self.args.all_topics:
            return sorted(self.start_offsets(group))
        metadata = self.admin().list_topics(timeout=self.timeout_s)
        out: list[tuple[str, int]] = []
        for spec in self.args.topic:
            topic, _, parts = spec.partition(":")
            known = metadata.topics.get(topic)
            if known is None or known.error is not None:
                raise ToolError(f"topic {topic!r} does not exist")
            if parts:
                try:
                    wanted = [int(p) for p in parts.split(",")]
                except ValueError:
                    raise UsageError(f"--topic expects T or T:P,P..., got {spec!r}") from None
                missing = [p for p in wanted if p not in known.partitions]
                if missing:
                    raise ToolError(f"topic {topic!r} has no partition {missing[0]}")
                out += [(topic, p) for p in wanted]
            else:
                out += [(topic, p) for p in sorted(known.partitions)]
        return sorted(set(out))

    def _log_offsets(self, partitions: list[tuple[str, int]], spec: Callable[[], OffsetSpec]) -> dict[tuple[str, int], int]:
        from confluent_kafka import TopicPartition

        if not partitions:
            return {}
        futures = self.admin().list_offsets({TopicPartition(t, p): spec() for t, p in partitions},
                                            request_timeout=self.timeout_s)
        out: dict[tuple[str, int], int] = {}
        for tp, future in futures.items():
            try:
                out[(tp.topic, tp.partition)] = future.result().offset
            except Exception as e:
                raise ToolError(f"cannot list the offsets of {tp.topic}-{tp.partition}: {e}") from None
        return out

    def reset_offsets(self) -> int:
        from confluent_kafka.admin import OffsetSpec

        group = self.args.group[0]
        desc = self.describe_group(group)
        if desc.state not in ("Empty", "Dead") and desc.error != GROUP_ID_NOT_FOUND:
            print(f"Error: Share group '{group}' is not empty.")
            return 1
        partitions = self._partitions(group)
        if self.args.to_earliest:
            plan = self._log_offsets(partitions, OffsetSpec.earliest)
        elif self.args.to_latest:
            plan = self._log_offsets(partitions, OffsetSpec.latest)
        else:
            at = parse_datetime(self.args.to_datetime)
            plan = self._log_offsets(partitions, lambda: OffsetSpec.for_timestamp(at))
            latest = self._log_offsets([k for k, o in plan.items() if o < 0], OffsetSpec.latest)
            for (topic, partition), offset in latest.items():
                # Kafka's resetToDateTime: no record at or after the time, so the log end.
                warn_empty_partition(topic, partition)
                plan[(topic, partition)] = offset
        if self.args.execute:
            self._alter(group, plan)
        print("\n".join(["", *plan_lines({group: plan}, max(15, len(group)))]) + "\n")
        return 0

    def _alter(self, group: str, plan: dict[tuple[str, int], int]) -> None:
        from kio.schema.alter_share_group_offsets.v0 import request as req
        from kio.schema.alter_share_group_offsets.v0.response import AlterShareGroupOffsetsResponse

        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(plan.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        host, port, _ = self.coordinator(group)
        resp = self._call((host, port), ALTER_OFFSETS, req.AlterShareGroupOffsetsRequest(group_id=GroupId(group), topics=tuple(
            req.AlterShareGroupOffsetsRequestTopic(topic_name=TopicName(t), partitions=tuple(
                req.AlterShareGroupOffsetsRequestPartition(partition_index=i32(p), start_offset=i64(o)) for p, o in ps))
            for t, ps in by_topic.items())), AlterShareGroupOffsetsResponse)
        if int(resp.error_code):
            raise ToolError(resp.error_message or _error_name(int(resp.error_code)))
        for t in resp.responses:
            for p in t.partitions:
                if int(p.error_code):
                    raise ToolError(f"{t.topic_name}-{p.partition_index}: "
                                    f"{p.error_message or _error_name(int(p.error_code))}")

    # -- --delete-offsets, --delete ---------------------------------------------------------

    def delete_offsets(self) -> int:
        from kio.schema.delete_share_group_offsets.v0 import request as req
        from kio.schema.delete_share_group_offsets.v0.response import DeleteShareGroupOffsetsResponse

        group = self.args.group[0]
        topics = list(dict.fromkeys(self.args.topic))
        host, port, _ = self.coordinator(group)
        resp = self._call((host, port), DELETE_OFFSETS, req.DeleteShareGroupOffsetsRequest(group_id=GroupId(group), topics=tuple(
            req.DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(t)) for t in topics)), DeleteShareGroupOffsetsResponse)
        status: dict[str, str] = {}
        if int(resp.error_code):
            message = resp.error_message or _error_name(int(resp.error_code))
            print(f"\nError: {message}")
            status = {t: f"Error: {message}" for t in topics}
        for t in resp.responses:
            status[str(t.topic_name)] = ("Successful" if not int(t.error_code)
                                         else f"Error: {t.error_message or _error_name(int(t.error_code))}")
        tw = width(status)
        out = ["", f"{'TOPIC':<{tw}} STATUS"] + [f"{t:<{tw}} {s}" for t, s in sorted(status.items())]
        print("\n".join(out) + "\n")
        return 1 if any(s != "Successful" for s in status.values()) else 0

    def delete(self) -> int:
        from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
        from kio.schema.delete_groups.v2.response import DeleteGroupsResponse

        listed = self.listings()
        groups = list(dict.fromkeys(self.group_ids()))
        failed: dict[str, str] = {}
        for group in groups:
            state = listed.get(group)
            if state is None:
                failed[group] = f"Group '{group}' is not a share group."
            elif state != "Empty":
                failed[group] = f"Share group '{group}' is not EMPTY."
        done: list[str] = []
        for group in groups:
            if group in failed:
                continue
            host, port, _ = self.coordinator(group)
            resp = self._call((host, port), DELETE_GROUPS, DeleteGroupsRequest(groups_names=(GroupId(group),)),
                              DeleteGroupsResponse)
            code = int(resp.results[0].error_code)
            if code:
                failed[group] = _error_name(code)
            else:
                done.append(group)
        return print_deletion("share", ", ".join(f"'{g}'" for g in done), done, failed)


def _error_name(code: int) -> str:
    from strom.core.errors import for_code

    err = for_code(code)
    return f"{err.__name__.removesuffix('Error')}: {err.description}" if code else "no error"
