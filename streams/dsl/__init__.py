"""The DSL: StreamsBuilder, KStream, KTable, groupings and their parameter objects."""

from strom.streams.dsl.builder import StreamsBuilder
from strom.streams.dsl.globalktable import GlobalKTable
from strom.streams.dsl.kstream import BranchedKStream, KGroupedStream, KStream
from strom.streams.dsl.ktable import KGroupedTable, KTable
from strom.streams.dsl.options import (
    Branched,
    Consumed,
    Grouped,
    Joined,
    Materialized,
    Named,
    Produced,
    Repartitioned,
)
from strom.streams.dsl.processors import Change

__all__ = ["Branched", "BranchedKStream", "Change", "Consumed", "GlobalKTable", "Grouped", "Joined",
           "KGroupedStream", "KGroupedTable", "KStream", "KTable", "Materialized", "Named", "Produced",
           "Repartitioned", "StreamsBuilder"]
