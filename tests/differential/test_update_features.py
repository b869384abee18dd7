# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i16, i8, i32Timedelta - and loads response types as
# unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: UpdateFeatures (key 57), ApiVersions' features and Kafka's ``kafka-features.sh``
(FeatureCommand describe / upgrade / downgrade), strom vs Kafka 4.3.1.

Both brokers are fresh and formatted with ``transaction.version=1`` (Kafka through
``kafka-storage format --feature``), so upgrades and downgrades are possible. The same raw
requests (diff_wire) go to both and the answers must agree: top-level error code, message (with
each broker's own metadata.version levels put back as placeholders: strom's newest level is not
Kafka's), per-feature results of v0/v1, and the finalized levels ApiVersions reports afterwards.

What is compared about ``FinalizedFeaturesEpoch``: Kafka 4.3.1 reports the offset of the last
record in the broker's metadata image (``KRaftMetadataCache.features()`` uses
``image.highestOffsetAndEpoch().offset``), not the offset of the last feature change, so it grows
with every metadata change, topic creation included (and, on Kafka, with the controller's
periodic NoOpRecords). The tests check that it grows on a feature change and on a topic
creation on both brokers. Finally, the levels survive restarts: kill -9 and a clean stop on both
brokers, and on strom a restart from a metadata snapshot taken after the change.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pytest
from diff_wire import WireClient, kio_schema
from kafka_ref import KafkaRef, classpath, ensure_jars
from kio.schema.errors import ErrorCode
from ref_fixtures import SHARED_BROKER_CONFIG, needs_tools, skip_without_java

from strom.core.config import BrokerConfig
from strom.core.controller.metadata_system import MetadataSystem
from strom.core.metadata.bootstrap import format_storage, random_uuid
from strom.core.testing import BrokerProcess, wait_for

TV = "transaction.version"
MV = "metadata.version"
GV = "group.version"
ELR = "eligible.leader.replicas.version"
# The features strom implements at Kafka 4.3.1's levels (share.version 1: share groups, KIP-932).
# Kafka also finalizes streams.version (1), whose behaviour strom lacks: it supports only its
# level 0 (and kraft.version 0: static voters), which kafka-features.sh describe shows.
STROM_FEATURES = (MV, TV, GV, ELR, "share.version")
HONEST_ZERO = ("kraft.version", "streams.version")
UPGRADE, SAFE, UNSAFE = 1, 2, 3
FAILED = "The update failed for all features since the following feature had an error: "


class Node(Protocol):
    bootstrap: str

    def start(self) -> Any: ...

    def stop(self, timeout: float = ...) -> int | None: ...

    def kill(self) -> None: ...




class Pair(NamedTuple):
    strom: Node
    kafka: Node


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Fresh brokers of this module, both formatted with transaction.version=1."""
    skip_without_java()
    root = tmp_path_factory.mktemp("update-features")
    subject: Node
    if os.environ.get("STROM_DIFF_SUBJECT") == "kafka":  # harness self-check: Kafka against Kafka
        subject = KafkaRef(features={TV: 1}, data_dir=root / "subject", config=SHARED_BROKER_CONFIG)
    else:
        subject = BrokerProcess(root / "strom", features={TV: 1}, config=SHARED_BROKER_CONFIG)
    kafka = KafkaRef(features={TV: 1}, data_dir=root / "kafka", config=SHARED_BROKER_CONFIG)
    try:
        subject.start()
        kafka.start()
        yield Pair(subject, kafka)
    finally:
        subject.kill()
        kafka.kill()


# -- requests -----------------------------------------------------------------------------------

class Features(NamedTuple):
    levels: dict[str, int]  # finalized max level per feature strom knows (metadata.version, transaction.version)
    epoch: int
    mv_range: tuple[int, int]


def features(bootstrap: str) -> Features:
    m = kio_schema("api_versions", 4)
    with WireClient(bootstrap) as c:
        resp = c.request(m.ApiVersionsRequest(client_software_name="strom-diff", client_software_version="1"))
    assert resp.error_code == 0
    for f in resp.finalized_features:  # a finalized feature is one level, never a range
        assert f.min_version_level == f.max_version_level, f
    levels = {f.name: int(f.max_version_level) for f in resp.finalized_features if f.name in STROM_FEATURES}
    mv = next(f for f in resp.supported_features if f.name == MV)
    return Features(levels, int(resp.finalized_features_epoch), (int(mv.min_version), int(mv.max_version)))


class Answer(NamedTuple):
    error: str
    message: str | None
    results: tuple[tuple[str, str, str | None], ...]


def update(bootstrap: str, version: int, updates: list[tuple[str, int, int]], validate_only: bool = False) -> Answer:
    """One UpdateFeatures request; ``(feature, level, upgrade type)`` each (v0: type 2/3 sets
    AllowDowngrade)."""
    m = kio_schema("update_features", version)
    keys = []
    for name, level, kind in updates:
        if version == 0:
            keys.append(m.FeatureUpdateKey(feature=name, max_version_level=level, allow_downgrade=kind != UPGRADE))
        else:
            keys.append(m.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind))
    extra = {"validate_only": validate_only} if version >= 1 else {}
    with WireClient(bootstrap) as c:
        resp = c.request(m.UpdateFeaturesRequest(timeout=timedelta(seconds=30), feature_updates=tuple(keys), **extra))
    results = tuple((r.feature, ErrorCode(r.error_code).name, r.error_message) for r in getattr(resp, "results", ()))
    return Answer(ErrorCode(resp.error_code).name, resp.error_message, results)


def wait_level(bootstrap: str, feature: str, level: int) -> Features:
    """ApiVersions until ``feature`` is finalized at ``level`` (0: absent). Kafka's broker learns
    of the change from the metadata log just after the controller answers."""
    def check() -> Features | None:
        f = features(bootstrap)
        return f if f.levels.get(feature, 0) == level else None

    result: Features = wait_for(check, timeout=15, what=f"{feature} finalized at {level} on {bootstrap}")
    return result


def normalize(text: str | None, mv: Features) -> str | None:
    """Put placeholders for a broker's own metadata.version numbers (strom's newest level is
    lower than Kafka's) so messages compare."""
    if text is None:
        return None
    current = mv.levels[MV]
    lo, hi = mv.mv_range
    subs = {str(hi + 1): "<MAX+1>", str(current - 1): "<MV-1>", f"{lo}-{hi}": "<MIN>-<MAX>",
            str(current): "<MV>"}
    return re.sub("|".join(re.escape(k) for k in sorted(subs, key=len, reverse=True)),
                  lambda match: subs[match.group(0)], text)


def both(pair: Pair, version: int, make: Any, validate_only: bool = False) -> tuple[Answer, Answer]:
    """The same request on both brokers; ``make(features)`` builds the updates from each
    broker's own levels. Answers come back with normalized messages."""
    out = []
    for node in pair:
        f = features(node.bootstrap)
        a = update(node.bootstrap, version, make(f), validate_only)
        out.append(a._replace(message=normalize(a.message, f)))
    return out[0], out[1]


# -- rejected updates: nothing changes ----------------------------------------------------------

REJECTED: dict[str, tuple[int, Any, bool]] = {
    # case: (request version, updates from the broker's features, validate_only)
    "above-range-v2": (2, lambda f: [(TV, 5, UPGRADE)], False),
    "above-range-v1": (1, lambda f: [(TV, 5, UPGRADE)], False),
    "above-range-v0": (0, lambda f: [(TV, 5, UPGRADE)], False),
    "unknown-feature": (2, lambda f: [("no.such.feature", 1, UPGRADE)], False),
    "unknown-feature-v1": (1, lambda f: [("no.such.feature", 1, UPGRADE)], False),
    "unknown-feature-level-0": (2, lambda f: [("no.such.feature", 0, SAFE)], False),
    "negative-level": (2, lambda f: [(TV, -1, UPGRADE)], False),
    "unknown-upgrade-type-7": (2, lambda f: [(TV, 2, 7)], False),
    "unknown-upgrade-type-0": (1, lambda f: [(TV, 2, 0)], False),
    "downgrade-to-newer": (2, lambda f: [(TV, 2, SAFE)], False),
    "unsafe-downgrade-to-newer": (2, lambda f: [(TV, 2, UNSAFE)], False),
    "downgrade-without-type": (2, lambda f: [(TV, 0, UPGRADE)], False),
    # v0's AllowDowngrade is not read by Kafka's controller: the type stays UPGRADE.
    "v0-allow-downgrade-ignored": (0, lambda f: [(TV, 0, SAFE)], False),
    "validate-only-invalid": (1, lambda f: [(TV, 7, UPGRADE)], True),
    "one-bad-fails-all": (1, lambda f: [(TV, 2, UPGRADE), ("no.such.feature", 1, UPGRADE)], False),
    "mv-above-supported": (2, lambda f: [(MV, f.mv_range[1] + 1, UPGRADE)], False),
    "mv-downgrade-safe": (2, lambda f: [(MV, f.levels[MV] - 1, SAFE)], False),
    "mv-downgrade-unsafe": (2, lambda f: [(MV, f.levels[MV] - 1, UNSAFE)], False),
    "mv-downgrade-without-type": (1, lambda f: [(MV, f.levels[MV] - 1, UPGRADE)], False),
    "mv-zero": (2, lambda f: [(MV, 0, UNSAFE)], False),
}


@pytest.mark.parametrize("case", list(REJECTED))
def test_rejected_update(pair: Pair, case: str) -> None:
    version, make, validate_only = REJECTED[case]
    ours, theirs = both(pair, version, make, validate_only)
    assert theirs.error == "invalid_update_version" and theirs.message and theirs.message.startswith(FAILED)
    assert theirs.results == ()  # an error empties the per-feature results, v0 and v1 too
    assert ours == theirs
    for node in pair:  # all or nothing: transaction.version is still 1
        assert features(node.bootstrap).levels.get(TV) == 1


def test_api_versions_range(pair: Pair) -> None:
    ranges = []
    for node in pair:
        with WireClient(node.bootstrap) as c:
            ranges.append(c.api_versions()[57])
    assert ranges[0] == ranges[1] == (0, 2)


def test_validate_only_writes_nothing(pair: Pair) -> None:
    ours, theirs = both(pair, 1, lambda f: [(TV, 2, UPGRADE)], validate_only=True)
    assert theirs == Answer("none", None, ((TV, "none", "NONE"),))
    assert ours == theirs
    for node in pair:
        assert features(node.bootstrap).levels.get(TV) == 1


# -- accepted updates, in order ------------------------------------------------------------------

STEPS: list[tuple[str, int, Any, int]] = [
    # (step, request version, updates from the broker's features, transaction.version afterwards)
    ("upgrade-to-2", 2, lambda f: [(TV, 2, UPGRADE)], 2),
    ("same-level-again", 2, lambda f: [(TV, 2, UPGRADE)], 2),
    ("safe-downgrade-to-1", 1, lambda f: [(TV, 1, SAFE)], 1),
    ("v0-upgrade-to-2", 0, lambda f: [(TV, 2, UPGRADE)], 2),
    ("unsafe-remove", 1, lambda f: [(TV, 0, UNSAFE)], 0),
    ("upgrade-from-absent", 2, lambda f: [(TV, 1, UPGRADE)], 1),
    ("duplicate-last-wins", 1, lambda f: [(TV, 0, SAFE), (TV, 2, UPGRADE)], 2),
    ("mv-same-level", 1, lambda f: [(MV, f.levels[MV], UPGRADE)], 2),
    ("mv-same-level-safe", 2, lambda f: [(MV, f.levels[MV], SAFE)], 2),
    ("empty-request", 1, lambda f: [], 2),
]


def test_accepted_updates(pair: Pair) -> None:
    """Each step on both brokers: same answer, same resulting level, and the epoch grows."""
    for step, version, make, level in STEPS:
        before = [features(node.bootstrap) for node in pair]
        ours, theirs = both(pair, version, make)
        assert theirs.error == "none" and theirs.message is None, (step, theirs)
        assert ours == theirs, step
        if version <= 1:
            assert theirs.results == tuple((name, "none", "NONE") for name, _, _ in make(before[1])), step
        for node, old in zip(pair, before, strict=True):
            after = wait_level(node.bootstrap, TV, level)
            assert after.levels[MV] == old.levels[MV], step
            if old.levels.get(TV, 0) != level:
                assert after.epoch > old.epoch, (step, node.bootstrap)


def test_epoch_grows_with_other_metadata(pair: Pair) -> None:
    """Kafka's FinalizedFeaturesEpoch is the image's last offset: a topic creation moves it."""
    for node in pair:
        before = features(node.bootstrap)
        with WireClient(node.bootstrap) as c:
            c.create_topic(f"uf-{uuid.uuid4().hex[:8]}", 1)

        def grown(n: Node = node, b: Features = before) -> Features | None:
            f = features(n.bootstrap)
            return f if f.epoch > b.epoch else None

        after = wait_for(grown, timeout=15, what="epoch after a topic creation")
        assert after.levels == before.levels


@pytest.mark.slow  # 23 s on the 2-CPU machine: restarts of both brokers
def test_levels_survive_restarts(pair: Pair) -> None:
    """kill -9 right after an upgrade, then a clean stop after a downgrade, on both brokers."""
    for node in pair:
        assert update(node.bootstrap, 2, [(TV, 1, SAFE)]).error == "none"
        wait_level(node.bootstrap, TV, 1)
        assert update(node.bootstrap, 2, [(TV, 2, UPGRADE)]).error == "none"
        wait_level(node.bootstrap, TV, 2)
        node.kill()
        node.start()
        assert wait_level(node.bootstrap, TV, 2).levels[TV] == 2
        assert update(node.bootstrap, 1, [(TV, 1, SAFE)]).error == "none"
        wait_level(node.bootstrap, TV, 1)
        node.stop()
        node.start()
        assert features(node.bootstrap).levels.get(TV) == 1


def test_level_survives_snapshot_and_kill(tmp_path: Path) -> None:
    """strom: a snapshot taken after the upgrade is what a restart after kill -9 loads."""
    config = {**SHARED_BROKER_CONFIG, "metadata.log.max.record.bytes.between.snapshots": "1"}
    broker = BrokerProcess(tmp_path / "strom", features={TV: 0}, config=config)
    try:
        broker.start()
        assert TV not in features(broker.bootstrap).levels
        assert update(broker.bootstrap, 2, [(TV, 2, UPGRADE)]).error == "none"
        upgraded = features(broker.bootstrap)
        assert upgraded.levels[TV] == 2

        def snapshot_after_upgrade() -> bool:
            ends = [int(p.name.split("-")[0]) for p in tmp_path.rglob("*.checkpoint") if p.name[0].isdigit()]
            return any(end > upgraded.epoch for end in ends)

        wait_for(snapshot_after_upgrade, timeout=20, what="a metadata snapshot after the upgrade")
        broker.kill()
        broker.start()
        restarted = features(broker.bootstrap)
        assert restarted.levels[TV] == 2
        assert restarted.epoch >= upgraded.epoch
    finally:
        broker.kill()


# -- Kafka's FeatureCommand (kafka-features.sh) ---------------------------------------------------

def feature_command(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    jar = needs_tools()
    cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
           f"{classpath(ensure_jars())}{os.pathsep}{jar}", "org.apache.kafka.tools.FeatureCommand",
           "--bootstrap-server", bootstrap, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def describe(bootstrap: str) -> dict[str, dict[str, str]]:
    """``kafka-features.sh describe``: feature -> {SupportedMinVersion, SupportedMaxVersion,
    FinalizedVersionLevel} (the epoch differs between brokers and is left out)."""
    proc = feature_command(bootstrap, "describe")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, dict[str, str]] = {}
    for line in proc.stdout.splitlines():
        fields = dict(re.findall(r"(\w+):\s+(\S+)", line))
        if "Feature" in fields:
            out[fields["Feature"]] = {k: v for k, v in fields.items() if k not in ("Feature", "Epoch")}
    return out


def test_feature_command_describe(pair: Pair) -> None:
    """Kafka 4.3's seven features on both; strom's supported ranges and finalized levels equal
    Kafka's for the features it implements, and are 0 for those it lacks."""
    ours, theirs = describe(pair.strom.bootstrap), describe(pair.kafka.bootstrap)
    assert set(ours) == set(theirs) == {*STROM_FEATURES, *HONEST_ZERO}
    for name in STROM_FEATURES:
        assert ours[name] == theirs[name], name
    assert theirs[MV] == {"SupportedMinVersion": "3.3-IV3", "SupportedMaxVersion": "4.3-IV0",
                          "FinalizedVersionLevel": "4.3-IV0"}
    assert theirs["share.version"] == {"SupportedMinVersion": "0", "SupportedMaxVersion": "1",
                                       "FinalizedVersionLevel": "1"}
    for name in HONEST_ZERO:
        assert ours[name] == {"SupportedMinVersion": "0", "SupportedMaxVersion": "0", "FinalizedVersionLevel": "0"}


def consumer_protocol_errors(bootstrap: str) -> tuple[str, str]:
    """ConsumerGroupHeartbeat (join) and ConsumerGroupDescribe error codes for a new group."""
    hb = kio_schema("consumer_group_heartbeat", 0)
    desc = kio_schema("consumer_group_describe", 0)
    with WireClient(bootstrap) as c:
        joined = c.request(hb.ConsumerGroupHeartbeatRequest(
            group_id=f"gv-{uuid.uuid4().hex[:8]}", member_id="", member_epoch=0, instance_id=None, rack_id=None,
            rebalance_timeout=timedelta(seconds=30), subscribed_topic_names=("gv-topic",), server_assignor=None,
            topic_partitions=()))
        described = c.request(desc.ConsumerGroupDescribeRequest(group_ids=("gv-none",),
                                                                 include_authorized_operations=False))
    return ErrorCode(joined.error_code).name, ErrorCode(described.groups[0].error_code).name


def test_feature_command_group_version(pair: Pair) -> None:
    """``downgrade`` then ``upgrade --feature group.version=1`` (refused by strom before Kafka
    4.3 parity) act the same on both brokers; at level 0 both refuse the KIP-848 consumer
    protocol with UNSUPPORTED_VERSION, as Kafka's isConsumerGroupProtocolEnabled."""
    for args, level in ((("downgrade", "--feature", f"{GV}=0"), 0), (("upgrade", "--feature", f"{GV}=1"), 1)):
        errors = []
        for node in pair:
            proc = feature_command(node.bootstrap, *args)
            assert proc.returncode == 0, (node.bootstrap, args, proc.stdout, proc.stderr[-2000:])
            assert proc.stdout.strip() == f"{GV} was {'downgraded' if level == 0 else 'upgraded'} to {level}."
            wait_level(node.bootstrap, GV, level)
            errors.append(consumer_protocol_errors(node.bootstrap))
        if level == 0:
            assert errors[0] == errors[1] == ("unsupported_version", "unsupported_version"), errors
        else:  # served again (Kafka may first answer NOT_COORDINATOR while __consumer_offsets is created)
            assert "unsupported_version" not in {*errors[0], *errors[1]}, errors


def test_subject_message_literal(pair: Pair) -> None:
    """The subject's words in full, not only as equal to Kafka's."""
    answer = update(pair.strom.bootstrap, 2, [(TV, 9, UPGRADE)])
    assert answer.error == "invalid_update_version"
    assert answer.message == FAILED + "Invalid update version 9 for feature transaction.version. " \
                                      "Local controller 1 only supports versions 0-2"


# -- the controller alone (no Java needed) --------------------------------------------------------

def test_controller_commits_only_valid_requests(tmp_path: Path) -> None:
    """QuorumController.update_features in-process: a rejected or validate-only request appends
    nothing to the metadata log, a valid one appends one batch, and the level is replayed from
    the log (and from a snapshot) when the metadata system opens again."""

    async def scenario() -> None:
        cfg = BrokerConfig.from_mapping({"node.id": 1, "log.dirs": str(tmp_path / "logs"),
                                         "metadata.log.dir": str(tmp_path / "meta")})
        format_storage(cfg, random_uuid(), features={TV: 1})
        system = MetadataSystem.open(cfg)
        await system.start()
        c = system.controller
        try:
            assert system.image.transaction_version == 1
            end = system.raft.end_offset
            error = await c.update_features([(TV, 2, UPGRADE), ("no.such.feature", 1, UPGRADE)])
            assert error is not None and error.errno == ErrorCode.invalid_update_version
            assert await c.update_features([(TV, 2, UPGRADE)], validate_only=True) is None
            assert system.raft.end_offset == end and system.image.transaction_version == 1
            assert await c.update_features([(TV, 2, UPGRADE)]) is None
            assert system.raft.end_offset == end + 1 and system.image.transaction_version == 2
            assert system.image.offset == end  # the epoch ApiVersions reports: the record's offset
            error = await c.update_features([(MV, system.image.metadata_version - 1, SAFE)])
            assert error is not None and "Refusing to perform the requested downgrade" in (error.message or "")
        finally:
            await system.close()
        for from_snapshot in (False, True):
            system = MetadataSystem.open(cfg)
            await system.start()
            try:
                assert system.image.transaction_version == 2
                assert system.image.offset == end
                if not from_snapshot:
                    await system.snapshot()  # the next open loads the level from this snapshot
            finally:
                await system.close()

    asyncio.run(scenario())
