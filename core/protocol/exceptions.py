"""Errors of the protocol layer."""

from strom.core.exceptions import BrokerError


class MalformedRequestError(BrokerError):
    """A frame that cannot be parsed: the connection that sent it is closed."""


class UnsupportedVersionRequestError(BrokerError):
    """A request version outside the range ApiVersions advertises."""
