"""``strom storage``: cluster ids and formatting of log directories (Kafka's kafka-storage.sh).

A node's storage is formatted when every log dir and the metadata log dir holds a
``meta.properties`` with the cluster id; the broker refuses to start otherwise. Formatting
itself (meta.properties, bootstrap checkpoint) is ``strom.core.metadata.bootstrap``'s job;
this module adds the command line, the checks before and the messages after.
"""

from __future__ import annotations

import argparse
import base64
import binascii
from pathlib import Path
from typing import Any

from strom.core.config import BrokerConfig, parse_properties
from strom.core.exceptions import LogDirLockedError
from strom.core.log.dir_lock import lock_dirs, release_all
from strom.core.tools.common import ToolError, UsageError, parse_kv_list
from strom.exceptions import StromError

META_PROPERTIES = "meta.properties"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    storage = subparsers.add_parser(
        "storage", help="cluster ids and formatting of the log directories",
        description="Manage a node's storage (like Kafka's kafka-storage.sh). A broker only starts on "
                    "formatted log directories: run `strom storage format` once per node.")
    sub = storage.add_subparsers(dest="storage_command", metavar="COMMAND", required=True)

    p = sub.add_parser("random-uuid", help="print a new random cluster id",
                       description="Print a random Kafka uuid (22 characters of URL-safe base64), "
                                   "suitable for `strom storage format --cluster-id`.")
    p.set_defaults(func=cmd_random_uuid)

    p = sub.add_parser(
        "format", help="write meta.properties and the bootstrap metadata into the log directories",
        description="Format the log directories (log.dirs) and the metadata log directory "
                    "(metadata.log.dir) named by the broker config: each gets a meta.properties "
                    "with the cluster id, node id and a directory id.")
    p.add_argument("--config", "-c", required=True, metavar="FILE",
                   help="broker config (.properties, .yaml or .json), as passed to `strom broker start`")
    p.add_argument("--cluster-id", "-t", metavar="ID",
                   help="cluster id to format with (default: a new random one, printed); all nodes "
                        "of a cluster must use the same id")
    p.add_argument("--ignore-formatted", "-g", action="store_true",
                   help="skip directories that are already formatted instead of failing")
    p.add_argument("--release-version", "-r", metavar="VERSION",
                   help="Kafka release whose metadata.version to start at, e.g. 4.0 or 4.1-IV1 "
                        "(default: 4.3-IV0, Kafka 4.3's latest production level)")
    p.add_argument("--feature", "-f", action="append", default=[], metavar="NAME=LEVEL",
                   help="finalize a feature at a level other than its default, as kafka-storage "
                        "format --feature: transaction.version (0-2), group.version (0-1), "
                        "eligible.leader.replicas.version (0-1); e.g. transaction.version=1 (no "
                        "KIP-890 transactions); repeatable")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override one broker config property; repeatable")
    p.add_argument("--add-scram", "-S", action="append", default=[], metavar="MECHANISM=[name=...,password=...]",
                   help="add a SCRAM user to the bootstrap metadata, as kafka-storage does, e.g. "
                        "'SCRAM-SHA-256=[name=alice,password=alice-secret]' (also iterations=, salt= and "
                        "saltedpassword= in base64); repeatable")
    p.set_defaults(func=cmd_format)

    from strom.core.tools import metadata_repair  # `truncate-metadata`: the way out of a corrupt metadata log

    metadata_repair.register(sub)


# -- helpers shared with `broker start` and `dev` ---------------------------------------------


def storage_dirs(config: BrokerConfig) -> list[Path]:
    """Every directory that formatting covers: the log dirs, then the metadata log dir."""
    out: list[Path] = []
    for d in [*config.log_dir_list, config.metadata_dir]:
        if d not in out:
            out.append(d)
    return out


def read_meta(directory: Path) -> dict[str, str] | None:
    """The ``meta.properties`` of a directory, or None when it has none."""
    path = directory / META_PROPERTIES
    try:
        return parse_properties(path.read_text())
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        from strom.core.log.checkpoint import MetaPropertiesError

        raise ToolError(str(MetaPropertiesError(f"{path}: not a text file (byte {e.start} is not UTF-8)"))) from None


def existing_cluster_id(config: BrokerConfig) -> tuple[str | None, list[Path]]:
    """The cluster id the formatted dirs agree on (None if none is formatted) and the unformatted dirs."""
    ids: dict[str, Path] = {}
    missing: list[Path] = []
    for d in storage_dirs(config):
        meta = read_meta(d)
        if meta is None:
            missing.append(d)
        elif "cluster.id" in meta:
            ids.setdefault(meta["cluster.id"], d)
    if len(ids) > 1:
        found = ", ".join(f"{cid} in {d}" for cid, d in ids.items())
        raise ToolError(f"the log directories belong to different clusters ({found}); "
                        "a node's directories must all be formatted with one cluster id")
    return (next(iter(ids)) if ids else None), missing


def check_cluster_id(value: str) -> str:
    """A Kafka uuid is 16 bytes in URL-safe base64 without padding (22 characters)."""
    try:
        raw = base64.urlsafe_b64decode(value + "==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(value) != 22 or len(raw) != 16:
        raise UsageError(f"--cluster-id {value!r} is not a Kafka uuid (22 characters of URL-safe "
                         "base64); make one with `strom storage random-uuid`")
    if raw == bytes(16):
        raise UsageError("--cluster-id must not be the all-zero uuid")
    return value


def format_dirs(config: BrokerConfig, cluster_id: str, *, ignore_formatted: bool,
                release_version: str | None = None, features: list[str] | None = None,
                add_scram: list[str] | None = None) -> Any:
    """Call the bootstrap formatter under the dirs' ``.lock``; its errors become :class:`ToolError`s.

    A directory a running broker holds is refused before anything in it is written: formatting
    under a live broker would replace the metadata it is appending to.
    """
    from strom.core.metadata.bootstrap import format_storage
    from strom.core.metadata.features import parse_feature_levels
    from strom.core.security.scram_parser import ScramFormatError, parse_add_scram

    try:
        scram_records = [parse_add_scram(arg) for arg in add_scram or []]
    except ScramFormatError as e:
        raise ToolError(f"--add-scram: {e}") from None

    try:
        locks = lock_dirs(storage_dirs(config))
    except LogDirLockedError as e:
        raise ToolError(f"cannot format: {e}") from None
    except OSError as e:
        raise ToolError(f"cannot lock {e.filename}: {e.strerror}") from None
    try:
        return format_storage(config, cluster_id, ignore_formatted=ignore_formatted,
                              release_version=release_version,
                              features=parse_feature_levels(features or []), extra_records=scram_records)
    except (StromError, OSError, ValueError) as e:
        raise ToolError(str(e)) from None
    finally:
        release_all(locks)


def new_cluster_id() -> str:
    from strom.core.metadata.bootstrap import random_uuid

    return str(random_uuid())


# -- commands ---------------------------------------------------------------------------------


def cmd_random_uuid(args: argparse.Namespace) -> int:
    print(new_cluster_id())
    return 0


def cmd_format(args: argparse.Namespace) -> int:
    config = BrokerConfig.load(args.config, parse_kv_list(args.override, "--override"))
    cluster_id = check_cluster_id(args.cluster_id) if args.cluster_id else None
    current, missing = existing_cluster_id(config)
    formatted = [d for d in storage_dirs(config) if d not in missing]
    if formatted and not args.ignore_formatted:
        where = ", ".join(str(d) for d in formatted)
        raise ToolError(f"already formatted (cluster.id {current}): {where}; pass --ignore-formatted "
                        "to format only the remaining directories, or delete them to start over")
    if cluster_id is not None and current is not None and cluster_id != current:
        raise ToolError(f"--cluster-id {cluster_id} differs from cluster.id {current} of the already "
                        f"formatted directories ({', '.join(str(d) for d in formatted)}); use {current}")
    if not missing:
        print(f"All of the log directories are already formatted (cluster.id {current}).")
        return 0
    if cluster_id is None:
        cluster_id = current or new_cluster_id()
    format_dirs(config, cluster_id, ignore_formatted=args.ignore_formatted,
                release_version=args.release_version, features=args.feature, add_scram=args.add_scram)
    for d in missing:
        print(f"Formatted {d} (cluster.id {cluster_id}, node.id {config.node_id}).")
    return 0

