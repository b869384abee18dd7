"""GlobalKTable: a table replicated in full on every instance (Kafka's ``GlobalKTable``).

Its own module because both KStream (joins) and the builder need the class at run time and it
needs neither of them.
"""

from __future__ import annotations


class GlobalKTable:
    """A table replicated in full on every instance; joined by a key mapped from the stream."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    @property
    def queryable_store_name(self) -> str:
        return self.store_name
