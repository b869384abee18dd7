"""Kafka Connect's REST API for strom.connect (aiohttp, own thread and loop, over a Herder)."""

from strom.connect.rest.server import DEFAULT_LISTENER, RestServer, parse_listeners

__all__ = ["DEFAULT_LISTENER", "RestServer", "parse_listeners"]
