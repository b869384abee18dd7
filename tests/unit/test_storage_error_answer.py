"""An I/O error that escapes the log under a partition is answered KAFKA_STORAGE_ERROR.

The log reports the I/O errors it expects through the log dir failure channel (appends, reads,
flushes: KafkaStorageError). One it does not wrap - here a ListOffsets lookup by timestamp whose
segment file descriptor has gone bad - must still be answered as Kafka answers an IOException
under a partition, not UNKNOWN_SERVER_ERROR (issue 29). A real UnifiedLog under a real Partition;
the fault is injected by closing the segment's descriptor.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from strom.core.config import LogConfig
from strom.core.log.log import UnifiedLog
from strom.core.records.builder import SimpleRecord, build_batch
from strom.core.replica.partition import Partition
from strom.core.server.handlers._common import error_of


@pytest.fixture
def partition(tmp_path: Path) -> Iterator[Partition]:
    part = Partition("topic", 0, uuid.uuid4(), UnifiedLog(tmp_path / "topic-0", LogConfig.defaults()), local_id=1)
    part.apply_registration((1,), (1,), leader=1, leader_epoch=0, partition_epoch=0)
    yield part


def test_an_os_error_under_a_partition_answers_kafka_storage_error(partition: Partition) -> None:
    now = int(time.time() * 1000)
    partition.append_records_as_leader(build_batch([SimpleRecord(b"k", b"v", (), now)]), -1)
    assert partition.fetch_offset_for_timestamp(now) is not None
    segment = partition.log.log_segments()[0]
    os.close(segment.fd)  # the file under the segment is gone bad (EBADF on every read)
    with pytest.raises(OSError) as raised:
        partition.fetch_offset_for_timestamp(now)
    code, message = error_of(raised.value)
    assert code == ErrorCode.kafka_storage_error
    assert message is not None and "OSError" in message
