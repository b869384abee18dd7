"""``strom consumer-groups``: list, describe (with lag), reset offsets of and delete groups.

Kafka's kafka-consumer-groups.sh (``ConsumerGroupCommand``) with its flags, its tables (the
same column names and widths, so scripts that parse Kafka's output read strom's) and its
refusals: offsets are reset only for an inactive group (Empty or Dead), and the reset is a dry
run unless ``--execute`` is given. Talks to any Kafka cluster through confluent-kafka's
AdminClient.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from strom.core.tools.common import Progress, ToolError, UsageError, admin_client, kafka_failure
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
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, MemberDescription, OffsetSpec

T = TypeVar("T")

# ListOffsets asks for at most this many partitions at once, so a reset over thousands of
# partitions can report progress between requests.
OFFSETS_CHUNK = 1000
# Kafka's GroupState names (librdkafka's enum spells two of them differently).
STATE_NAMES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
               "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead",
               "EMPTY": "Empty", "ASSIGNING": "Assigning", "RECONCILING": "Reconciling"}
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "consumer-groups", help="list, describe (with lag), reset offsets of and delete consumer groups",
        description="Manage consumer groups like Kafka's kafka-consumer-groups.sh: --list; --describe "
                    "[--offsets|--members [--verbose]|--state] with GROUP TOPIC PARTITION CURRENT-OFFSET "
                    "LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID; --reset-offsets with one scenario "
                    "(--to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime, --by-duration), "
                    "a scope (--topic or --all-topics) and --dry-run (the default) or --execute, only on "
                    "an inactive group; --delete. Works against any Kafka cluster.")
    add_actions(p, [
        ("--list", "list all consumer groups"),
        ("--describe", "describe groups: offsets and lag (default), --members or --state"),
        ("--reset-offsets", "reset a group's committed offsets (the group must be inactive)"),
        ("--delete", "delete groups (they must be empty)")])
    add_selection_args(p, "consumer", offsets="offsets and lag", state="coordinator, assignor, state")
    p.add_argument("--type", nargs="?", const="", default=None, metavar="TYPES",
                   help="with --list: a TYPE column, and only groups of TYPES if given (classic,consumer)")
    p.add_argument("--verbose", action="store_true",
                   help="with --describe: the committed offsets' leader epochs, the members' assignments, "
                        "the group epochs (Kafka 4.3's extra columns)")
    add_reset_args(
        p, topic="with --reset-offsets: a topic, or some of its partitions; repeatable",
        all_topics="with --reset-offsets: every partition the group has an offset for",
        execute="commit the new offsets", timeout_of="each admin request",
        more_scenarios=[("--to-current", {"action": "store_true", "help": "reset to the committed offset"}),
                        ("--to-offset", {"type": int, "metavar": "N", "help": "reset to offset N"}),
                        ("--shift-by", {"type": int, "metavar": "N",
                                        "help": "move the committed offset by N (may be < 0)"})],
        last_scenarios=[("--by-duration", {"metavar": "PnDTnHnMnS", "help": "reset to the first offset at or after "
                                           "this long ago (ISO-8601 duration)"})])
    p.set_defaults(func=cmd_consumer_groups)


# -- flags ------------------------------------------------------------------------------------

_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def parse_duration(text: str) -> timedelta:
    """An ISO-8601 duration ``PnDTnHnMnS`` (Java's ``Duration.parse``, days at most)."""
    m = _DURATION.fullmatch(text.strip())
    if not m or not any(m.groups()) or text.strip().upper().endswith("T"):
        raise UsageError(f"--by-duration expects an ISO-8601 duration such as PT1H30M or P1DT2H, got {text!r}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def _validate(args: argparse.Namespace) -> None:
    check_timeout_and_groups(args)
    if (args.describe or args.reset_offsets or args.delete) and not (args.group or args.all_groups):
        raise UsageError("--group G or --all-groups is required with --describe, --reset-offsets and --delete")
    check_views(args)
    if args.type is not None and not args.list:
        raise UsageError("--type goes with --list")
    if not args.reset_offsets:
        used = [flag for flag, on in (("--topic", bool(args.topic)), ("--all-topics", args.all_topics),
                                      ("--execute", args.execute), ("--dry-run", args.dry_run)) if on]
        if used:
            raise UsageError(f"{used[0]} goes with --reset-offsets")
        return
    if bool(args.topic) == args.all_topics:
        raise UsageError("--reset-offsets needs one scope: --topic T[:P,...] or --all-topics")
    if not _scenario(args):
        raise UsageError("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, --to-offset, "
                         "--shift-by, --to-datetime, --by-duration")


def _scenario(args: argparse.Namespace) -> str | None:
    for name in ("to_earliest", "to_latest", "to_current"):
        if getattr(args, name):
            return name
    for name in ("to_offset", "shift_by", "to_datetime", "by_duration"):
        if getattr(args, name) is not None:
            return name
    return None


def cmd_consumer_groups(args: argparse.Namespace) -> int:
    _validate(args)
    tool = GroupTool(args, admin_client(args))
    return run_command(args, {"list": tool.list_groups, "describe": tool.describe,
                              "reset_offsets": tool.reset_offsets, "delete": tool.delete})


# -- the tool -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetRow:
    """One line of ``--describe --offsets`` (Kafka's PartitionAssignmentState)."""

    group: str
    topic: str
    partition: int
    offset: int | None
    log_end: int | None
    consumer_id: str
    host: str
    client_id: str
    leader_epoch: int | None = None  # of the committed offset (--verbose)

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.offset < 0 or self.log_end is None:
            return None
        return self.log_end - self.offset


def _shown(value: object) -> str:
    return MISSING if value is None else str(value)


def state_name(state: object) -> str:
    """Kafka's name of a group state from confluent-kafka's enum."""
    name = getattr(state, "name", str(state))
    return STATE_NAMES.get(name, name)


def _tp_text(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"  # Java's TopicPartition.toString


class GroupTool:
    """The commands of ``strom consumer-groups`` over one AdminClient."""

    def __init__(self, args: argparse.Namespace, admin: AdminClient) -> None:
        self.args = args
        self.admin = admin
        self.timeout_s = args.timeout / 1000

    def _result(self, future: Future[T], what: str) -> T:
        try:
            return future.result()
        except Exception as e:  # KafkaException, or a timeout of the future
            raise kafka_failure(self.args, what, e) from None

    # -- lookups --------------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        if self.args.all_groups:
            return sorted(self._listings())
        return list(dict.fromkeys(self.args.group))

    def _listings(self) -> dict[str, tuple[str, str]]:
        """``group -> (state, type)`` with Kafka's names (Stable, Classic, ...)."""
        result = self._result(self.admin.list_consumer_groups(request_timeout=self.timeout_s),
                              "cannot list consumer groups")
        for err in result.errors:
            print(f"warning: {err}", file=sys.stderr)
        return {g.group_id: (state_name(g.state), getattr(g.type, "name", str(g.type)).capitalize())
                for g in result.valid}

    def describe_groups(self, groups: list[str]) -> dict[str, ConsumerGroupDescription]:
        if not groups:
            return {}
        futures = self.admin.describe_consumer_groups(groups, request_timeout=self.timeout_s)
        return {g: self._result(futures[g], f"cannot describe group {g!r}") for g in groups}

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets (partitions without one are left out)."""
        return {k: offset for k, (offset, _) in self.committed_with_epochs(group).items()}

    def committed_with_epochs(self, group: str) -> dict[tuple[str, int], tuple[int, int | None]]:
        """``(offset, leader epoch or None)`` of each partition the group committed."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                         request_timeout=self.timeout_s)
        result = self._result(futures[group], f"cannot list the offsets of group {group!r}")
        out: dict[tuple[str, int], tuple[int, int | None]] = {}
        for tp in result.topic_partitions or []:
            if tp.offset >= 0:
                epoch = tp.leader_epoch
                out[(tp.topic, tp.partition)] = (tp.offset, epoch if epoch is not None and epoch >= 0 else None)
        return out

    def log_offsets(self, partitions: Iterable[tuple[str, int]], spec: Callable[[], OffsetSpec],
                    progress: Progress | None = None) -> dict[tuple[str, int], int]:
        """ListOffsets of ``spec`` for each partition, in chunks; partitions that fail are left out."""
        from confluent_kafka import KafkaException, TopicPartition

        wanted = sorted(set(partitions))
        out: dict[tuple[str, int], int] = {}
        for start in range(0, len(wanted), OFFSETS_CHUNK):
            chunk = wanted[start:start + OFFSETS_CHUNK]
            futures = self.admin.list_offsets({TopicPartition(t, p): spec() for t, p in chunk},
                                              request_timeout=self.timeout_s)
            for tp, future in futures.items():
                try:
                    out[(tp.topic, tp.partition)] = future.result().offset
                except KafkaException as e:
                    err = e.args[0] if e.args else e
                    print(f"warning: no offset for {_tp_text(tp.topic, tp.partition)}: {err}", file=sys.stderr)
            if progress is not None:
                progress.tick(min(start + OFFSETS_CHUNK, len(wanted)))
        return out

    # -- --list -----------------------------------------------------------------------------

    def list_groups(self) -> int:
        listings = self._listings()
        state, kind = self.args.state, self.args.type
        if state is None and kind is None:
            for group in sorted(listings):
                print(group)
            return 0
        states = {x.strip().lower() for x in (state or "").split(",") if x.strip()}
        kinds = {x.strip().lower() for x in (kind or "").split(",") if x.strip()}
        rows = sorted((g, st, ty) for g, (st, ty) in listings.items()
                      if (not states or st.lower() in states) and (not kinds or ty.lower() in kinds))
        # Kafka's printGroupInfo: the group column 10 wider than the longest name (at least 15).
        gw = width(g for g, _, _ in rows) + 10

        def line(group: str, st: str, ty: str) -> str:
            return (f"{group:<{gw}}" + (f" {ty:<20}" if kind is not None else "")
                    + (f" {st:<20}" if state is not None else ""))

        print(line("GROUP", "STATE", "TYPE"))
        for row in rows:
            print(line(*row))
        return 0

    # -- --describe -------------------------------------------------------------------------

    def _printable(self, group: str, state: str, rows: int) -> bool:
        """Kafka's shouldPrintMemberState: the notes it prints, and whether a table follows."""
        if state == "Dead":
            print(f"\nError: Consumer group '{group}' does not exist.")
            return False
        if state == "Empty":
            print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
        elif state in REBALANCING:
            print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
        return rows > 0

    def describe(self) -> int:
        groups = self.group_ids()
        descriptions = self.describe_groups(groups)
        missing = 0
        for group in sorted(descriptions):
            desc = descriptions[group]
            if state_name(desc.state) == "Dead":
                missing += 1
            if self.args.members:
                self._print_members(group, desc)
            elif self.args.state is not None:
                self._print_state(group, desc)
            else:
                self._print_offsets(group, desc)
        sys.stdout.flush()
        return 1 if missing else 0

    def offset_rows(self, group: str, desc: ConsumerGroupDescription) -> list[OffsetRow]:
        with_epochs = self.committed_with_epochs(group)
        committed = {k: offset for k, (offset, _) in with_epochs.items()}
        epochs = {k: epoch for k, (_, epoch) in with_epochs.items()}
        assigned: list[tuple[tuple[str, int], MemberDescription]] = []
        members = sorted((m for m in desc.members if m.assignment.topic_partitions),
                         key=lambda m: -len(m.assignment.topic_partitions))
        for m in members:
            for tp in sorted(m.assignment.topic_partitions, key=lambda tp: (tp.topic, tp.partition)):
                assigned.append(((tp.topic, tp.partition), m))
        taken = {key for key, _ in assigned}
        unassigned = sorted(k for k in committed if k not in taken)
        ends = self.log_offsets([k for k, _ in assigned] + unassigned, _latest)
        rows = [OffsetRow(group, t, p, committed.get((t, p)), ends.get((t, p)), m.member_id, m.host, m.client_id,
                          epochs.get((t, p)))
                for (t, p), m in assigned]
        rows += [OffsetRow(group, t, p, committed.get((t, p)), ends.get((t, p)), MISSING, MISSING, MISSING,
                           epochs.get((t, p)))
                 for t, p in unassigned]
        return rows

    def _print_offsets(self, group: str, desc: ConsumerGroupDescription) -> None:
        state = state_name(desc.state)
        rows = [] if state == "Dead" else self.offset_rows(group, desc)
        if not self._printable(group, state, len(rows)):
            return
        gw = width(r.group for r in rows)
        tw = width(r.topic for r in rows)
        cw = width(r.consumer_id for r in rows)
        hw = width(r.host for r in rows)

        verbose = self.args.verbose  # Kafka 4.3 adds the committed offset's LEADER-EPOCH

        def line(*cols: str) -> str:
            g, t, p, epoch, off, end, lag, cid, host, client = cols
            middle = f"{epoch:<15} " if verbose else ""
            return (f"{g:<{gw}} {t:<{tw}} {p:<10} {middle}{off:<15} {end:<15} {lag:<15} {cid:<{cw}} "
                    f"{host:<{hw}} {client}")

        out = ["", line("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                        "CONSUMER-ID", "HOST", "CLIENT-ID")]
        out += [line(r.group, r.topic, str(r.partition), _shown(r.leader_epoch), _shown(r.offset), _shown(r.log_end),
                     _shown(r.lag), r.consumer_id, r.host, r.client_id) for r in rows]
        print("\n".join(out))

    def _print_members(self, group: str, desc: ConsumerGroupDescription) -> None:
        state = state_name(desc.state)
        members = list(desc.members)
        # Kafka 4.3 prints the header even for a group without members; only a dead group has none.
        self._printable(group, state, len(members))
        if state == "Dead":
            return
        gw = width(group for _ in members)  # Kafka sizes the columns from the member rows
        cw = width(m.member_id for m in members)
        iw = width((m.group_instance_id or "" for m in members), 17)
        hw = width(m.host for m in members)
        lw = width(m.client_id for m in members)
        with_instance = any(m.group_instance_id for m in members)

        def line(g: str, cid: str, inst: str, host: str, client: str, n: str) -> str:
            middle = f"{inst:<{iw}} " if with_instance else ""
            return f"{g:<{gw}} {cid:<{cw}} {middle}{host:<{hw}} {client:<{lw}} {n:<15} "

        def verbose(current_epoch: str, current: str, target_epoch: str, target: str) -> str:
            # Kafka 4.3's --verbose columns; librdkafka does not report member epochs, so they
            # show as "-" (as Kafka shows them for a classic group).
            return f"{current_epoch:<15} {current:<20} {target_epoch:<15} {target:<20}" if self.args.verbose else ""

        out = ["", line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
               + verbose("CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT")]
        for m in members:
            tps = list(m.assignment.topic_partitions)
            target = m.target_assignment.topic_partitions if m.target_assignment is not None else []
            out.append(line(group, m.member_id, m.group_instance_id or "", m.host, m.client_id, str(len(tps)))
                       + verbose(MISSING, assignment_text(tps), MISSING, assignment_text(target)))
        print("\n".join(out))

    def _print_state(self, group: str, desc: ConsumerGroupDescription) -> None:
        state = state_name(desc.state)
        if not self._printable(group, state, 1):
            return
        node = desc.coordinator
        coordinator = f"{node.host}:{node.port}  ({node.id})"
        gw = max(15, len(group))
        cw = max(25, len(coordinator))

        verbose = self.args.verbose  # Kafka 4.3 adds the group epochs (not in librdkafka's answer: "-")

        def line(*cols: str) -> str:
            g, c, a, s, e, te, n = cols
            middle = f"{e:<15} {te:<25} " if verbose else ""
            return f"{g:<{gw}} {c:<{cw}} {a:<20} {s:<20} {middle}{n}"

        print("\n".join(["", line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                                   "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"),
                         line(group, coordinator, desc.partition_assignor or MISSING, state, MISSING, MISSING,
                              str(len(desc.members)))]))

    # -- --reset-offsets ----------------------------------------------------------------------

    def reset_offsets(self) -> int:
        if not self.args.execute and not self.args.dry_run:
            print("WARN: No action will be performed as the --execute option is missing. "
                  "In a future major release, the default behavior of this command will be to prompt the user "
                  "before executing the reset rather than doing a dry run. You should add the --dry-run option "
                  "explicitly if you are scripting this command and want to keep the current default behavior "
                  "without prompting.", file=sys.stderr)
        groups = self.group_ids()
        descriptions = self.describe_groups(groups)
        plans: dict[str, dict[tuple[str, int], int]] = {}
        refused: list[str] = []
        for group in groups:
            state = state_name(descriptions[group].state)
            if state not in ("Empty", "Dead"):
                # Kafka's refusal, word for word: members would overwrite the new offsets.
                refused.append(f"Assignments can only be reset if the group '{group}' is inactive, "
                               f"but the current state is {state}.")
                continue
            plan = self._plan(group)
            if self.args.execute and plan:
                self._commit(group, plan)
            plans[group] = plan
        _print_plan(plans)
        for message in refused:
            print(f"\nError: {message}")
        if refused:
            raise ToolError(refused[0] if len(refused) == 1 else f"{len(refused)} groups are not inactive")
        return 0

    def _partitions(self, group: str) -> list[tuple[str, int]]:
        if self.args.all_topics:
            return sorted(self.committed(group))
        out: list[tuple[str, int]] = []
        whole: list[str] = []
        for arg in self.args.topic:
            topic, sep, parts = arg.partition(":")
            if not sep:
                whole.append(topic)
                continue
            try:
                out += [(topic, int(p)) for p in parts.split(",")]
            except ValueError:
                raise UsageError(f"--topic {arg}: expected TOPIC or TOPIC:P[,P...]") from None
        if whole:
            from confluent_kafka import TopicCollection

            futures = self.admin.describe_topics(TopicCollection(whole), request_timeout=self.timeout_s)
            for topic in whole:
                desc = self._result(futures[topic], f"cannot describe topic {topic!r}")
                out += [(topic, p.id) for p in desc.partitions]
        return sorted(set(out))

    def _plan(self, group: str) -> dict[tuple[str, int], int]:
        from confluent_kafka.admin import OffsetSpec

        args = self.args
        partitions = self._partitions(group)
        progress = Progress(f"reset-offsets: looked up the offsets of {group}'s partitions", len(partitions))
        if args.to_earliest:
            return self._require(self.log_offsets(partitions, _earliest, progress), partitions, "starting")
        if args.to_latest:
            return self._require(self.log_offsets(partitions, _latest, progress), partitions, "ending")
        if args.to_datetime is not None or args.by_duration is not None:
            if args.to_datetime is not None:
                ts = parse_datetime(args.to_datetime)
            else:
                ts = int((time.time() - parse_duration(args.by_duration).total_seconds()) * 1000)
            found = self.log_offsets(partitions, lambda: OffsetSpec.for_timestamp(ts), progress)
            empty = [k for k in partitions if found.get(k, -1) < 0]
            for topic, partition in empty:
                warn_empty_partition(topic, partition)
            found.update(self.log_offsets(empty, _latest))
            return self._require(found, partitions, "by timestamp")
        if args.to_offset is not None:
            wanted = dict.fromkeys(partitions, args.to_offset)
        else:
            current = self.committed(group)
            wanted = {}
            for key in partitions:
                if key not in current:
                    if args.to_current:
                        continue
                    raise ToolError(f"Cannot shift offset for partition {_tp_text(*key)} since there is no "
                                    "current committed offset")
                wanted[key] = current[key] + (args.shift_by or 0)
        return self._in_range(wanted, progress)

    def _require(self, offsets: dict[tuple[str, int], int], partitions: list[tuple[str, int]],
                 what: str) -> dict[tuple[str, int], int]:
        for key in partitions:
            if offsets.get(key, -1) < 0:
                raise ToolError(f"Error getting {what} offset of topic partition: {_tp_text(*key)}")
        return {k: offsets[k] for k in partitions}

    def _in_range(self, wanted: dict[tuple[str, int], int], progress: Progress) -> dict[tuple[str, int], int]:
        """Kafka's checkOffsetsRange: an offset outside [log start, log end] is moved to the edge."""
        ends = self.log_offsets(wanted, _latest, progress)
        starts = self.log_offsets(wanted, _earliest, progress)
        out: dict[tuple[str, int], int] = {}
        for key, offset in wanted.items():
            end, start = ends.get(key), starts.get(key)
            if end is not None and offset > end:
                print(f"warning: New offset ({offset}) is higher than latest offset for topic partition "
                      f"{_tp_text(*key)}. Value will be set to {end}", file=sys.stderr)
                offset = end
            elif start is not None and offset < start:
                print(f"warning: New offset ({offset}) is lower than earliest offset for topic partition "
                      f"{_tp_text(*key)}. Value will be set to {start}", file=sys.stderr)
                offset = start
            out[key] = offset
        return out

    def _commit(self, group: str, plan: dict[tuple[str, int], int]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())])
        futures = self.admin.alter_consumer_group_offsets([request], request_timeout=self.timeout_s)
        result = self._result(futures[group], f"cannot commit the new offsets of group {group!r}")
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            tp = failed[0]
            raise ToolError(f"cannot commit the offset of {_tp_text(tp.topic, tp.partition)} for group "
                            f"{group!r}: {tp.error}")

    # -- --delete ---------------------------------------------------------------------------

    def delete(self) -> int:
        from confluent_kafka import KafkaError, KafkaException

        groups = self.group_ids()
        if not groups:
            return 0
        futures = self.admin.delete_consumer_groups(groups, request_timeout=self.timeout_s)
        done: list[str] = []
        failed: dict[str, str] = {}
        for group in groups:
            try:
                futures[group].result()
                done.append(group)
            except KafkaException as e:
                err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
                failed[group] = f"{err.name()}: {err.str()}" if err is not None else str(e)
        return print_deletion("consumer", f"'{', '.join(done)}'", done, failed)


def assignment_text(tps: Iterable[TopicPartition]) -> str:
    """Kafka 4.3's assignment column: ``t1:0,1;t2:3``, topics and partitions sorted; ``-`` if none."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    text = ";".join(sorted(f"{t}:" + ",".join(sorted(str(p) for p in ps)) for t, ps in by_topic.items()))
    return text or MISSING


def _latest() -> OffsetSpec:
    from confluent_kafka.admin import OffsetSpec

    return OffsetSpec.latest()


def _earliest() -> OffsetSpec:
    from confluent_kafka.admin import OffsetSpec

    return OffsetSpec.earliest()


def _print_plan(plans: dict[str, dict[tuple[str, int], int]]) -> None:
    """Kafka's printOffsetsToReset (columns as wide as their longest value, at least 15, as
    Kafka 4.3 prints them)."""
    print("\n".join(["", *plan_lines(plans, width(g for g, plan in plans.items() for _ in plan))]))
