"""Transaction log records and the transaction state machine (pure functions, no broker)."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from strom.core.coordinator.txn import records, state
from strom.core.coordinator.txn.records import TransactionLogValue, TxnPartitions
from strom.core.coordinator.txn.state import TransactionMetadata, TxnState
from strom.core.errors import CorruptMessageError, KafkaError

NOW = 1_700_000_000_000


# -- records ----------------------------------------------------------------------------------


def test_key_is_version_prefixed_non_flexible_string() -> None:
    key = records.encode_key("tx-é")
    raw = "tx-é".encode()
    assert key == struct.pack(">hh", 0, len(raw)) + raw
    assert records.decode_key(key) == "tx-é"


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\x00\x01\x00\x05ab", b"\x00\x00\x00\x01ab", b"\x00\x00\xff\xff"])
def test_corrupt_keys_are_rejected(bad: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        records.decode_key(bad)


def _value() -> TransactionLogValue:
    return TransactionLogValue(producer_id=4000, previous_producer_id=3999, producer_epoch=7,
                               transaction_timeout_ms=60000, transaction_status=int(TxnState.PREPARE_COMMIT),
                               transaction_partitions=[TxnPartitions("a", [0, 2]), TxnPartitions("b", [1])],
                               transaction_last_update_timestamp_ms=NOW, transaction_start_timestamp_ms=NOW - 5)


def test_value_v1_roundtrip_and_layout() -> None:
    data = records.encode_value(_value())
    assert data[:2] == b"\x00\x01"
    # v1 is flexible: producer id, then epoch (PreviousProducerId is a tagged field at the end).
    assert struct.unpack(">qhib", data[2:17]) == (4000, 7, 60000, int(TxnState.PREPARE_COMMIT))
    assert records.decode_value(data) == _value()


def test_value_v1_without_previous_producer_id_has_no_tagged_fields() -> None:
    v = TransactionLogValue(producer_id=1, producer_epoch=0, transaction_timeout_ms=1000, transaction_status=0,
                            transaction_partitions=[], transaction_last_update_timestamp_ms=NOW,
                            transaction_start_timestamp_ms=-1)
    data = records.encode_value(v)
    assert data[-1] == 0  # empty tagged-field section
    assert records.decode_value(data) == v


def test_value_v0_as_kafka_writes_it_decodes() -> None:
    v0 = records.encode_value_v0(_value())
    decoded = records.decode_value(v0)
    # v0 has no PreviousProducerId: it decodes to the default.
    assert decoded.previous_producer_id == -1
    assert decoded.transaction_partitions == _value().transaction_partitions
    assert (decoded.producer_id, decoded.producer_epoch, decoded.transaction_status) == (4000, 7, 2)


@pytest.mark.parametrize("cut", [1, 3, 10, 17, 25])
def test_truncated_values_are_corrupt(cut: int) -> None:
    for data in (records.encode_value(_value()), records.encode_value_v0(_value())):
        with pytest.raises(CorruptMessageError):
            records.decode_value(data[:cut])


def test_unknown_value_version_is_corrupt() -> None:
    with pytest.raises(CorruptMessageError):
        records.decode_value(b"\x00\x07" + records.encode_value(_value())[2:])


def test_metadata_roundtrips_through_the_log_value() -> None:
    md = TransactionMetadata("t", 5, 3, 4, -1, 30000, TxnState.ONGOING, frozenset({("x", 1), ("x", 0), ("y", 2)}),
                             NOW - 10, NOW)
    again = TransactionMetadata.from_log_value("t", records.decode_value(records.encode_value(md.to_log_value())))
    assert again == md
    assert md.topics() == {"x": [0, 1], "y": [2]}


def test_unknown_status_in_a_record_is_corrupt() -> None:
    v = TransactionLogValue(producer_id=1, transaction_status=42, transaction_partitions=[])
    with pytest.raises(CorruptMessageError):
        TransactionMetadata.from_log_value("t", v)


def test_state_display_names_match_kafka() -> None:
    assert [s.display for s in TxnState] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                             "CompleteAbort", "Dead", "PrepareEpochFence"]


# -- InitProducerId ---------------------------------------------------------------------------


def _fresh(pid: int = 100) -> TransactionMetadata:
    md = state.new_metadata("t", pid, 60000, NOW)
    plan = state.plan_init_producer_id(md, 60000, None, NOW)
    assert plan.metadata is not None and not plan.abort_ongoing and not plan.needs_new_producer_id
    return plan.metadata


def test_first_init_gets_epoch_zero() -> None:
    md = _fresh()
    assert (md.producer_id, md.producer_epoch, md.state) == (100, 0, TxnState.EMPTY)


def test_second_init_bumps_the_epoch_and_fences_the_first_producer() -> None:
    md = _fresh()
    plan = state.plan_init_producer_id(md, 60000, None, NOW + 1)
    assert plan.metadata is not None
    new = plan.metadata
    assert new.producer_epoch == 1
    with pytest.raises(KafkaError) as e:
        state.add_partitions(new, 100, 0, {("a", 0)}, NOW + 2)
    assert e.value.code == ErrorCode.producer_fenced
    with pytest.raises(KafkaError) as e:
        state.end_transaction(new, 100, 0, True, NOW + 2)
    assert e.value.code == ErrorCode.producer_fenced


def test_init_with_an_ongoing_transaction_aborts_it_under_a_bumped_epoch() -> None:
    md = state.add_partitions(_fresh(), 100, 0, {("a", 0)}, NOW)
    assert md is not None
    plan = state.plan_init_producer_id(md, 60000, None, NOW + 1)
    assert plan.abort_ongoing and plan.metadata is not None
    assert plan.metadata.state == TxnState.PREPARE_ABORT
    assert plan.metadata.producer_epoch == 1
    assert plan.metadata.partitions == {("a", 0)}
    # While the abort completes, every request is told to retry.
    with pytest.raises(KafkaError) as e:
        state.plan_init_producer_id(plan.metadata, 60000, None, NOW + 2)
    assert e.value.code == ErrorCode.concurrent_transactions
    done = state.complete(plan.metadata, NOW + 3)
    retry = state.plan_init_producer_id(done, 60000, None, NOW + 4)
    assert retry.metadata is not None and retry.metadata.producer_epoch == 2


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    md = TransactionMetadata("t", 100, state.SHORT_MAX - 1, state=TxnState.COMPLETE_COMMIT, last_update_ms=NOW)
    plan = state.plan_init_producer_id(md, 60000, None, NOW)
    assert plan.needs_new_producer_id and plan.metadata is not None
    assert plan.metadata.producer_epoch == 0
    assert plan.metadata.last_producer_id == 100


def test_kip360_recovery_bumps_with_the_current_epoch_and_retries_are_idempotent() -> None:
    md = _fresh()
    plan = state.plan_init_producer_id(md, 60000, (100, 0), NOW)
    assert plan.metadata is not None
    bumped = plan.metadata
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (1, 0)
    # The same request again (answer lost): same id/epoch, nothing written.
    assert state.plan_init_producer_id(bumped, 60000, (100, 0), NOW).metadata is None
    # A stale epoch that is neither current nor last is fenced.
    with pytest.raises(KafkaError) as e:
        state.plan_init_producer_id(bumped, 60000, (100, 5), NOW)
    assert e.value.code == ErrorCode.producer_fenced
    # Someone else's producer id is fenced.
    with pytest.raises(KafkaError) as e:
        state.plan_init_producer_id(bumped, 60000, (7, 1), NOW)
    assert e.value.code == ErrorCode.producer_fenced


# -- AddPartitions / EndTxn -------------------------------------------------------------------


def test_add_partitions_starts_the_transaction_once() -> None:
    md = _fresh()
    with pytest.raises(KafkaError) as e:
        state.add_partitions(md, 99, 0, {("a", 0)}, NOW)
    assert e.value.code == ErrorCode.invalid_producer_id_mapping
    on = state.add_partitions(md, 100, 0, {("a", 0)}, NOW + 1)
    assert on is not None and on.state == TxnState.ONGOING and on.txn_start_ms == NOW + 1
    assert state.add_partitions(on, 100, 0, {("a", 0)}, NOW + 2) is None  # nothing new: no write
    more = state.add_partitions(on, 100, 0, {("b", 3)}, NOW + 3)
    assert more is not None and more.partitions == {("a", 0), ("b", 3)} and more.txn_start_ms == NOW + 1
    assert state.verify_partitions(more, 100, 0, [("a", 0), ("c", 0)]) == {
        ("a", 0): ErrorCode.none, ("c", 0): ErrorCode.transaction_abortable}


@pytest.mark.parametrize("commit", [True, False])
def test_end_transaction_two_phase(commit: bool) -> None:
    on = state.add_partitions(_fresh(), 100, 0, {("a", 0)}, NOW)
    assert on is not None
    prep = state.end_transaction(on, 100, 0, commit, NOW + 1).metadata
    assert prep is not None
    assert prep.producer_epoch == 0   # transaction version 1: no bump
    assert prep.state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    with pytest.raises(KafkaError) as e:   # a retry while the markers are written
        state.end_transaction(prep, 100, 0, commit, NOW + 2)
    assert e.value.code == ErrorCode.concurrent_transactions
    with pytest.raises(KafkaError) as e:   # the opposite decision
        state.end_transaction(prep, 100, 0, not commit, NOW + 2)
    assert e.value.code == ErrorCode.invalid_txn_state
    with pytest.raises(KafkaError) as e:   # no new partitions while preparing
        state.add_partitions(prep, 100, 0, {("b", 0)}, NOW + 2)
    assert e.value.code == ErrorCode.concurrent_transactions
    done = state.complete(prep, NOW + 3)
    assert done.state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert done.partitions == frozenset()
    assert state.end_transaction(done, 100, 0, commit, NOW + 4).metadata is None   # retried end: OK
    with pytest.raises(KafkaError) as e:
        state.end_transaction(done, 100, 0, not commit, NOW + 4)
    assert e.value.code == ErrorCode.invalid_txn_state
    again = state.add_partitions(done, 100, 0, {("a", 0)}, NOW + 5)   # the next transaction
    assert again is not None and again.state == TxnState.ONGOING and again.txn_start_ms == NOW + 5


def test_end_without_a_transaction_is_invalid() -> None:
    with pytest.raises(KafkaError) as e:
        state.end_transaction(_fresh(), 100, 0, True, NOW)
    assert e.value.code == ErrorCode.invalid_txn_state


def test_complete_requires_a_prepare_state() -> None:
    with pytest.raises(ValueError):
        state.complete(_fresh(), NOW)


# -- timeouts / expiration --------------------------------------------------------------------


def test_timeout_abort_fences_the_producer() -> None:
    on = state.add_partitions(_fresh(), 100, 0, {("a", 0)}, NOW)
    assert on is not None
    assert not state.timed_out(on, NOW + 60000)
    assert state.timed_out(on, NOW + 60001)
    fenced = state.fence_for_abort(on, NOW + 60001)
    assert (fenced.state, fenced.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    done = state.complete(fenced, NOW + 60002)
    for op in (lambda: state.end_transaction(done, 100, 0, False, NOW),
               lambda: state.add_partitions(done, 100, 0, {("a", 0)}, NOW)):
        with pytest.raises(KafkaError) as e:
            op()
        assert e.value.code == ErrorCode.producer_fenced
    # The zombie's KIP-360 recovery attempt with its old epoch is fenced too.
    with pytest.raises(KafkaError) as e:
        state.plan_init_producer_id(done, 60000, (100, 0), NOW)
    assert e.value.code == ErrorCode.producer_fenced


def test_fencing_at_the_last_epoch_keeps_the_epoch() -> None:
    md = TransactionMetadata("t", 1, state.SHORT_MAX - 1, state=TxnState.ONGOING, partitions=frozenset({("a", 0)}),
                             txn_start_ms=NOW)
    assert state.fence_for_abort(md, NOW).producer_epoch == state.SHORT_MAX - 1


def test_expiration_only_for_idle_ids() -> None:
    md = _fresh()
    assert not state.expired(md, NOW + 10, 100)
    assert state.expired(md, NOW + 100, 100)
    on = state.add_partitions(md, 100, 0, {("a", 0)}, NOW)
    assert on is not None and not state.expired(on, NOW + 10**9, 100)


# -- transaction version 2 (KIP-890): EndTxn v5 ---------------------------------------------------


def _ongoing_v2(epoch: int = 5) -> state.TransactionMetadata:
    md = replace(_fresh(), producer_epoch=epoch)
    on = state.add_partitions(md, 100, epoch, {("a", 0)}, NOW, client_version=2)
    assert on is not None and on.client_transaction_version == 2
    return on


@pytest.mark.parametrize("commit", [True, False])
def test_v2_end_bumps_the_epoch_and_answers_the_bumped_one(commit: bool) -> None:
    on = _ongoing_v2()
    plan = state.end_transaction(on, 100, 5, commit, NOW + 1, client_version=2)
    prep = plan.metadata
    assert prep is not None and not plan.needs_new_producer_id
    assert (prep.producer_epoch, prep.last_producer_epoch) == (6, 5)   # the markers carry 6
    assert prep.partitions == {("a", 0)} and prep.txn_start_ms == NOW
    assert state.producer_after_end(prep) == (100, 6)
    # A retry with the old epoch while the markers are written: the client waits.
    with pytest.raises(KafkaError) as e:
        state.end_transaction(prep, 100, 5, commit, NOW + 2, client_version=2)
    assert e.value.code == ErrorCode.concurrent_transactions
    # Anything else while the markers are written waits too: Kafka 4.3 answers a pending
    # completion before it looks at the producer (KAFKA-18464).
    for epoch, decision in ((5, not commit), (6, commit), (4, commit)):
        with pytest.raises(KafkaError) as e:
            state.end_transaction(prep, 100, epoch, decision, NOW + 2, client_version=2)
        assert e.value.code == ErrorCode.concurrent_transactions
    done = state.complete(prep, NOW + 3)
    assert (done.producer_id, done.producer_epoch) == (100, 6)
    # A retry after completion gets the producer's new epoch again.
    retry = state.end_transaction(done, 100, 5, commit, NOW + 4, client_version=2)
    assert retry.metadata is None and state.producer_after_end(done) == (100, 6)
    # The next transaction runs at the bumped epoch; the old one is fenced.
    with pytest.raises(KafkaError) as e:
        state.add_partitions(done, 100, 5, {("a", 0)}, NOW + 5, client_version=2)
    assert e.value.code == ErrorCode.producer_fenced
    assert state.add_partitions(done, 100, 6, {("a", 0)}, NOW + 5, client_version=2) is not None


@pytest.mark.parametrize("start", [TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT])
def test_v2_abort_with_nothing_open_still_bumps(start: TxnState) -> None:
    """A TV2 producer cannot know whether its first batch was added: it may abort an empty transaction."""
    md = replace(_fresh(), producer_epoch=3, state=start)
    prep = state.end_transaction(md, 100, 3, False, NOW, client_version=2).metadata
    assert prep is not None and prep.state == TxnState.PREPARE_ABORT
    assert prep.producer_epoch == 4 and prep.partitions == frozenset() and prep.txn_start_ms == NOW
    with pytest.raises(KafkaError) as e:   # but there is nothing to commit
        state.end_transaction(md, 100, 3, True, NOW, client_version=2)
    assert e.value.code == ErrorCode.invalid_txn_state


def test_v2_retry_rules_after_completion() -> None:
    done = replace(_fresh(), producer_epoch=6, last_producer_epoch=5, state=TxnState.COMPLETE_COMMIT)
    with pytest.raises(KafkaError) as e:   # an abort retry of a committed transaction
        state.end_transaction(done, 100, 5, False, NOW, client_version=2)
    assert e.value.code == ErrorCode.invalid_txn_state
    with pytest.raises(KafkaError) as e:   # two epochs behind: a zombie
        state.end_transaction(done, 100, 4, True, NOW, client_version=2)
    assert e.value.code == ErrorCode.producer_fenced
    with pytest.raises(KafkaError) as e:
        state.end_transaction(done, 999, 6, False, NOW, client_version=2)
    assert e.value.code == ErrorCode.invalid_producer_id_mapping


def test_v2_exhausted_epoch_rotates_the_producer_id_at_completion() -> None:
    on = _ongoing_v2(epoch=state.SHORT_MAX - 1)
    plan = state.end_transaction(on, 100, state.SHORT_MAX - 1, True, NOW, client_version=2)
    assert plan.needs_new_producer_id and plan.metadata is not None
    prep = replace(plan.metadata, next_producer_id=200)   # what the coordinator fills in
    assert prep.producer_epoch == state.SHORT_MAX   # the markers still go out under 100
    assert state.producer_after_end(prep) == (200, 0)
    done = state.complete(prep, NOW + 1)
    assert (done.producer_id, done.producer_epoch, done.last_producer_id, done.next_producer_id) == (200, 0, 100, -1)
    # The client's retry with the old id at the last usable epoch is recognised.
    retry = state.end_transaction(done, 100, state.SHORT_MAX - 1, True, NOW + 2, client_version=2)
    assert retry.metadata is None and state.producer_after_end(done) == (200, 0)


def test_v2_fields_survive_the_log() -> None:
    prep = replace(_ongoing_v2(), state=TxnState.PREPARE_COMMIT, next_producer_id=777)
    back = state.TransactionMetadata.from_log_value("t", records.decode_value(records.encode_value(prep.to_log_value())))
    assert (back.next_producer_id, back.client_transaction_version) == (777, 2)


_i64 = st.integers(-(1 << 63), (1 << 63) - 1)


@settings(max_examples=300, deadline=None)
@given(producer_id=_i64, previous=st.one_of(st.just(-1), _i64), next_id=st.one_of(st.just(-1), _i64),
       epoch=st.integers(-(1 << 15), (1 << 15) - 1), timeout=st.integers(-(1 << 31), (1 << 31) - 1),
       status=st.sampled_from(list(TxnState)),
       partitions=st.frozensets(st.tuples(st.text(min_size=0, max_size=300), st.integers(0, (1 << 31) - 1)),
                                max_size=40),
       update_ms=_i64, start_ms=_i64, client_version=st.sampled_from([0, 1, 2, -1, 300]))
def test_metadata_value_packs_the_codecs_bytes(producer_id: int, previous: int, next_id: int, epoch: int,
                                               timeout: int, status: TxnState, partitions: frozenset[tuple[str, int]],
                                               update_ms: int, start_ms: int, client_version: int) -> None:
    """The hand-packed v1 value the coordinator writes is byte for byte the generic codec's."""
    md = TransactionMetadata("t", producer_id, epoch, last_producer_id=previous, timeout_ms=timeout,
                             state=status, partitions=partitions, txn_start_ms=start_ms, last_update_ms=update_ms,
                             next_producer_id=next_id, client_transaction_version=client_version)
    packed = md.log_value_bytes()
    assert packed == records.encode_value(md.to_log_value())
    assert TransactionMetadata.from_log_value("t", records.decode_value(packed)) == replace(md, last_producer_epoch=-1)
