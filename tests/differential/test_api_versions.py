# mypy: disable-error-code="arg-type,union-attr"
# (kio types fields with phantom NewTypes - i32, TopicName, i32Timedelta - and loads response
# types as unions; plain ints/strs are what they are at run time, so only the checker objects.)
"""Differential: the ApiVersions ranges strom advertises against Apache Kafka's.

Every API strom advertises must exist in Kafka with strom's [min, max] inside Kafka's range
(a client that negotiates against Kafka must be able to use strom the same way). APIs Kafka
has and strom lacks are printed, not failed: strom grows API by API.
"""

from __future__ import annotations

from diff_wire import WireClient
from kafka_ref import KafkaRef
from kio.index import api_key_map, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from ref_fixtures import HasBootstrap

# KIP-714's GetTelemetrySubscriptions (71) and PushTelemetry (72): Kafka advertises them only when
# a metrics reporter implementing ClientTelemetry is configured (the reference has none); strom's
# receiver is built in (core/server/client_metrics.py), so it always serves them.
TELEMETRY_APIS = frozenset({71, 72})


def api_name(key: int) -> str:
    return f"{api_key_map.get(key, '?')}({key})"


def compare_ranges(subject: dict[int, tuple[int, int]], reference: dict[int, tuple[int, int]]) -> tuple[list[str], list[str]]:
    """(violations, notes): violations break compatibility, notes are APIs strom lacks or
    versions it does not (yet) cover."""
    violations: list[str] = []
    notes: list[str] = []
    for key, (lo, hi) in sorted(subject.items()):
        if key not in reference and key in TELEMETRY_APIS:
            notes.append(f"{api_name(key)}: strom v{lo}-v{hi}; Kafka only with a client-telemetry metrics reporter")
            continue
        if key not in reference:
            violations.append(f"{api_name(key)}: strom advertises v{lo}-v{hi}, Kafka does not have it")
            continue
        rlo, rhi = reference[key]
        if lo < rlo or hi > rhi:
            violations.append(f"{api_name(key)}: strom v{lo}-v{hi} is outside Kafka's v{rlo}-v{rhi}")
        elif (lo, hi) != (rlo, rhi):
            notes.append(f"{api_name(key)}: strom v{lo}-v{hi}, Kafka v{rlo}-v{rhi}")
    for key in sorted(set(reference) - set(subject)):
        notes.append(f"{api_name(key)}: only Kafka (v{reference[key][0]}-v{reference[key][1]})")
    return violations, notes


def test_api_version_ranges_within_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    with WireClient(strom.bootstrap) as s, WireClient(kafka.bootstrap) as k:
        ours, theirs = s.api_versions(), k.api_versions()
    violations, notes = compare_ranges(ours, theirs)
    print("\n".join(["ApiVersions differences:", *violations, *notes]))
    assert ours, "strom advertises no API"
    assert not violations, "\n".join(violations)


def unsupported_api_versions_answer(bootstrap: str) -> tuple[int, tuple[int, int] | None]:
    """Ask for ApiVersions v127: the broker must answer in a v0 response with
    UNSUPPORTED_VERSION and its own ApiVersions range, so the client can retry lower."""
    body = b"\x0bstrom-diff\x021\x00"  # a v3 body: compact strings + empty tagged fields
    with WireClient(bootstrap) as c:
        frame = c.send_raw(18, 127, body, flexible=True)
    resp, _ = entity_reader(load_response_schema(18, 0))(frame, 0)
    own = next(((int(k.min_version), int(k.max_version)) for k in resp.api_keys if k.api_key == 18), None)
    return int(resp.error_code), own


def test_unsupported_api_versions_version(strom: HasBootstrap, kafka: KafkaRef) -> None:
    theirs = unsupported_api_versions_answer(kafka.bootstrap)
    assert theirs[0] == ErrorCode.unsupported_version
    ours = unsupported_api_versions_answer(strom.bootstrap)
    assert ours[0] == theirs[0]
    assert ours[1] is not None
    assert theirs[1] is not None and theirs[1][0] <= ours[1][0] <= ours[1][1] <= theirs[1][1]


def test_compare_ranges_flags_out_of_range() -> None:
    """The comparison itself: a wider max, a lower min and an unknown API are violations."""
    kafka = {0: (3, 13), 1: (4, 18), 18: (0, 4)}
    violations, notes = compare_ranges({0: (3, 14), 1: (2, 12), 99: (0, 0)}, kafka)
    assert len(violations) == 3
    assert any("only Kafka" in n for n in notes)
    assert compare_ranges({0: (3, 13), 18: (0, 4)}, kafka)[0] == []




def features(bootstrap: str, version: int) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """(supported ranges, finalized levels) from an ApiVersions request of ``version`` (3 or 4)."""
    from importlib import import_module

    request = import_module(f"kio.schema.api_versions.v{version}.request").ApiVersionsRequest
    with WireClient(bootstrap) as c:
        resp = c.request(request(client_software_name="strom-diff", client_software_version="1"))
    supported = {f.name: (int(f.min_version), int(f.max_version)) for f in resp.supported_features}
    finalized = {f.name: int(f.max_version_level) for f in resp.finalized_features}
    return supported, finalized


def test_transaction_version_feature_as_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """A new cluster finalizes transaction.version 2 (KIP-890), which is what makes the Java client
    use transactions v2; a minimum of 0 is only shown to v4 requests (KIP-1022)."""
    for version in (3, 4):
        ours_supported, ours_finalized = features(strom.bootstrap, version)
        theirs_supported, theirs_finalized = features(kafka.bootstrap, version)
        name = "transaction.version"
        assert ours_supported.get(name) == theirs_supported.get(name), version
        assert ours_finalized.get(name) == theirs_finalized.get(name) == 2, version
        # Every feature strom shows, Kafka shows with a range that contains strom's.
        for feature, (lo, hi) in ours_supported.items():
            assert feature in theirs_supported, feature
            assert theirs_supported[feature][0] <= lo <= hi <= theirs_supported[feature][1], feature
        assert set(ours_finalized) <= set(theirs_finalized)


# KIP-932's APIs (issue 25: "at the versions Kafka 4.3 uses"): ShareGroupHeartbeat (76),
# ShareGroupDescribe (77), ShareFetch (78), ShareAcknowledge (79), Initialize/Read/Write/Delete
# ShareGroupState and ReadShareGroupStateSummary (83-87), Describe/Alter/DeleteShareGroupOffsets
# (90-92), and the APIs that list, describe, delete and find share groups and their coordinators.
SHARE_APIS = frozenset({76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92, 10, 16, 42})


def test_share_group_apis_and_feature_as_kafka(strom: HasBootstrap, kafka: KafkaRef) -> None:
    """Every share-group API at exactly Kafka 4.3.1's range, and share.version supported and
    finalized at the same levels (a new cluster finalizes 1: share groups are on)."""
    with WireClient(strom.bootstrap) as s, WireClient(kafka.bootstrap) as k:
        ours, theirs = s.api_versions(), k.api_versions()
    assert not SHARE_APIS - set(theirs), sorted(SHARE_APIS - set(theirs))
    ours_share = {api_name(key): ours.get(key) for key in sorted(SHARE_APIS)}
    theirs_share = {api_name(key): theirs[key] for key in sorted(SHARE_APIS)}
    assert ours_share == theirs_share
    for version in (3, 4):
        ours_supported, ours_finalized = features(strom.bootstrap, version)
        theirs_supported, theirs_finalized = features(kafka.bootstrap, version)
        assert ours_supported.get("share.version") == theirs_supported.get("share.version"), version
        assert ours_finalized.get("share.version") == theirs_finalized.get("share.version") == 1, version
