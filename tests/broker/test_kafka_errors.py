"""The generated Kafka error classes (strom.core.errors): one class per code of kio's ErrorCode,
with Kafka's numbers, names and retriability, under the broker's error root."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from strom.core import errors
from strom.core.exceptions import BrokerError, KafkaError
from strom.exceptions import StromError

CODES = [code for code in ErrorCode if code is not ErrorCode.none]

# (code, Kafka's exception class, retriable) from Kafka 4.3's Errors.java: a RetriableException
# subclass or not. Written out here so the test does not read the table it checks.
KAFKA_TABLE = [
    (ErrorCode.unknown_server_error, "UnknownServerException", False),
    (ErrorCode.offset_out_of_range, "OffsetOutOfRangeException", False),
    (ErrorCode.corrupt_message, "CorruptRecordException", True),
    (ErrorCode.unknown_topic_or_partition, "UnknownTopicOrPartitionException", True),
    (ErrorCode.not_leader_or_follower, "NotLeaderOrFollowerException", True),
    (ErrorCode.message_too_large, "RecordTooLargeException", False),
    (ErrorCode.coordinator_load_in_progress, "CoordinatorLoadInProgressException", True),
    (ErrorCode.not_coordinator, "NotCoordinatorException", True),
    (ErrorCode.topic_authorization_failed, "TopicAuthorizationException", False),
    (ErrorCode.out_of_order_sequence_number, "OutOfOrderSequenceException", False),
    (ErrorCode.invalid_producer_epoch, "InvalidProducerEpochException", False),
    (ErrorCode.concurrent_transactions, "ConcurrentTransactionsException", True),
    (ErrorCode.kafka_storage_error, "KafkaStorageException", True),
    (ErrorCode.producer_fenced, "ProducerFencedException", False),
]


@pytest.mark.parametrize("code", CODES, ids=lambda c: c.name)
def test_every_code_has_its_class(code: ErrorCode) -> None:
    cls = errors.for_code(code)
    assert cls.errno == int(code)
    assert cls.code is code
    assert cls.retriable is code.retriable
    assert cls.description
    assert issubclass(cls, KafkaError) and issubclass(cls, BrokerError) and issubclass(cls, StromError)
    assert getattr(errors, cls.__name__) is cls
    raised = cls("why")
    assert (raised.errno, raised.message, str(raised)) == (int(code), "why", "why")
    assert str(cls()) == code.name and cls().message == ""


def test_class_names_are_unique() -> None:
    classes = [errors.for_code(code) for code in CODES]
    assert len({cls.__name__ for cls in classes}) == len(CODES)


@pytest.mark.parametrize(("code", "java_class", "retriable"), KAFKA_TABLE, ids=lambda v: str(v))
def test_names_and_retriable_are_kafkas(code: ErrorCode, java_class: str, retriable: bool) -> None:
    cls = errors.for_code(code)
    assert cls.__name__ == java_class.removesuffix("Exception") + "Error"
    assert cls.retriable is retriable


def test_request_timed_out_does_not_shadow_the_builtin() -> None:
    assert errors.for_code(ErrorCode.request_timed_out).__name__ == "RequestTimedOutError"
    assert not hasattr(errors, "TimeoutError")


def test_none_and_unknown_codes_are_the_base() -> None:
    assert errors.for_code(ErrorCode.none) is KafkaError
    assert errors.for_code(32000) is KafkaError
    assert KafkaError.errno == int(ErrorCode.unknown_server_error)


def test_code_names_are_importable_from_core_errors() -> None:
    # The names the broker used before the classes were generated: Kafka's error-code names.
    for code in CODES:
        old = "".join(part.capitalize() for part in code.name.split("_")) + "Error"
        if old.endswith(("ErrorError", "ExceptionError")):
            continue
        assert getattr(errors, old) is errors.for_code(code), old
    with pytest.raises(AttributeError):
        _ = errors.NoSuchThingError  # type: ignore[attr-defined]


def test_core_exceptions_does_not_import_the_generated_classes() -> None:
    # One direction only: core/errors.py imports the base from core/exceptions.py, never back.
    code = ("import sys\nimport strom.core.exceptions as x\n"
            "assert 'strom.core.errors' not in sys.modules, 'core.exceptions imported core.errors'\n"
            "assert not hasattr(x, 'NotLeaderOrFollowerError')\n"
            "from strom.core.errors import NotLeaderOrFollowerError, for_code\n"
            "assert for_code(6) is NotLeaderOrFollowerError and issubclass(NotLeaderOrFollowerError, x.KafkaError)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


REPO = Path(__file__).resolve().parents[2]
KAFKA_LIB = REPO / ".cache" / "kafka-ref" / "lib"


@pytest.mark.reference
@pytest.mark.skipif(shutil.which("java") is None or not any(KAFKA_LIB.glob("kafka-clients-*.jar")),
                    reason="needs java and Kafka's jars (scripts/setup-test-deps.sh)")
def test_checked_in_module_is_what_the_generator_writes_from_kafkas_table() -> None:
    # Runs Kafka's own Errors table: codes, retriability and class names against kio and core/errors.py.
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_kafka_errors.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
