"""Batches of records moving through a sub-topology together (issue 26).

The stream thread hands a task the records of one poll for one source partition at a time; the
runtime deserializes them as one :class:`SourceRecords` and pushes a :class:`Batch` through the
linear part of the sub-topology. A batch keeps keys and values in two lists; timestamps and
headers are not copied per element: each element points back (``src``) at the source record it
came from, which also gives the record metadata, the raw bytes an error handler sees and the
stream time at which a per-record processor down the line must see it. Stateless DSL operators
keep timestamps and headers, so one index list is all a batch carries besides keys and values.

A processor takes part by defining ``process_batch(batch)`` and forwarding with
``context.forward_batch(batch)``; every other processor receives the batch record by record (the
runtime unrolls it), so user processors, joins, windowed operators and suppression see exactly
the records and clocks they saw before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Headers = Sequence[tuple[str, bytes | None]] | None


class SourceRecords:
    """The records of one poll from one source partition, as the consumer returned them."""

    __slots__ = ("_stream_times", "headers", "offsets", "partition", "raw_keys", "raw_values",
                 "stream_time_before", "timestamps", "topic")

    def __init__(self, topic: str, partition: int, offsets: list[int], raw_keys: list[bytes | None],
                 raw_values: list[bytes | None], timestamps: list[int], headers: list[Headers],
                 stream_time_before: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offsets = offsets
        self.raw_keys = raw_keys
        self.raw_values = raw_values
        self.timestamps = timestamps
        self.headers = headers
        #: the task's stream time before the first of these records
        self.stream_time_before = stream_time_before
        self._stream_times: list[int] | None = None

    def stream_time_at(self, i: int) -> int:
        """Stream time while record ``i`` is processed (the records before it and it counted)."""
        times = self._stream_times
        if times is None:
            # built only when a per-record processor or an error needs it
            times = []
            st = self.stream_time_before
            for ts in self.timestamps:
                if ts > st:
                    st = ts
                times.append(st)
            self._stream_times = times
        return times[i]


class Batch:
    """Keys and values of one batch; element ``i`` comes from source record ``src[i]`` (``src``
    None: from source record ``i``)."""

    __slots__ = ("keys", "origin", "src", "values")

    def __init__(self, keys: list[Any], values: list[Any], src: list[int] | None,
                 origin: SourceRecords) -> None:
        self.keys = keys
        self.values = values
        self.src = src
        self.origin = origin

    def __len__(self) -> int:
        return len(self.keys)

    def source_index(self, i: int) -> int:
        return i if self.src is None else self.src[i]

    def timestamps(self) -> list[int]:
        ts = self.origin.timestamps
        return ts if self.src is None else [ts[i] for i in self.src]

    def headers(self) -> list[Headers]:
        hs = self.origin.headers
        return hs if self.src is None else [hs[i] for i in self.src]

    def slice(self, start: int, stop: int) -> Batch:
        """Elements ``start`` to ``stop - 1``, as a new batch."""
        src = self.src
        return Batch(self.keys[start:stop], self.values[start:stop],
                     list(range(start, stop)) if src is None else src[start:stop], self.origin)

    def select(self, keep: list[int]) -> Batch:
        """The elements at positions ``keep`` (ascending), as a new batch."""
        keys, values, src = self.keys, self.values, self.src
        return Batch([keys[i] for i in keep], [values[i] for i in keep],
                     keep if src is None else [src[i] for i in keep], self.origin)
