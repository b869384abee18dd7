"""Distributed Connect workers: group membership, the incremental cooperative assignor, the
Kafka-backed config/status/offset stores and the :class:`DistributedHerder` over them."""

from __future__ import annotations

from strom.connect.runtime.distributed.herder import DistributedHerder

__all__ = ["DistributedHerder"]
