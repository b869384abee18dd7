"""Kafka's rules for topic names."""

from __future__ import annotations

import re

from strom.core.errors import InvalidTopicError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicError unless ``name`` is a legal Kafka topic name; the message is the one
    CreateTopics answers with (the controller's)."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}")
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'")


def unify_collision_chars(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka forbids topics that differ only by them."""
    return name.replace(".", "_")
