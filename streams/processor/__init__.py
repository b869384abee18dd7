"""Processor API: user processors, their context, records and punctuation."""

from strom.streams.processor.api import (
    Cancellable,
    Processor,
    ProcessorContext,
    ProcessorSupplier,
    PunctuationType,
    Record,
    RecordMetadata,
)

__all__ = ["Cancellable", "Processor", "ProcessorContext", "ProcessorSupplier", "PunctuationType",
           "Record", "RecordMetadata"]
