"""FindCoordinator key type 2 (SHARE, KIP-932): strom against Apache Kafka 4.3.1.

A share-partition leader finds the share coordinator of ``<groupId>:<topicId>:<partition>``
(topic id in Kafka's base64 form) with FindCoordinator v6. Both brokers get the same keys -
well-formed ones, ones Kafka's ``SharePartitionKey`` parsing accepts at its edges (a group id
with colons, a trailing colon, a signed or negative partition, a padded id) and malformed ones -
at v6, at v4/v5 (before key type 2 existed), at v3 (one key, no batching), and an unknown key
type. Each key's error code and message and whether a node was named must be the same.

The first request also creates ``__share_group_state`` on first use (Kafka answers
COORDINATOR_NOT_AVAILABLE while it creates the topic), so the v6 request is repeated until no
key is answered that way.
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

from diff_wire import WireClient
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorV3
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as FindCoordinatorV4
from kio.schema.find_coordinator.v5.request import FindCoordinatorRequest as FindCoordinatorV5
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest as FindCoordinatorV6
from kio.static.primitive import i8
from ref_fixtures import HasBootstrap

TOPIC_ID = base64.urlsafe_b64encode(uuid.UUID(int=0x1234_5678_9ABC_DEF0_0FED_CBA9_8765_4321).bytes).decode().rstrip("=")

KEYS: dict[str, str] = {
    "plain": f"g1:{TOPIC_ID}:0",
    "other partition": f"g2:{TOPIC_ID}:7",
    "negative partition": f"g:{TOPIC_ID}:-1",
    "signed partition": f"g:{TOPIC_ID}:+3",
    "group with colons": f"a:b:{TOPIC_ID}:1",
    "trailing colon": f"g:{TOPIC_ID}:0:",
    "padded topic id": f"g:{TOPIC_ID}==:0",
    "partition beyond int32": f"g:{TOPIC_ID}:2147483648",
    "partition not a number": f"g:{TOPIC_ID}:x",
    "topic id not base64": "g:notauuid:0",
    "dashed uuid": f"g:{uuid.UUID(int=1)}:0",
    "empty group": f":{TOPIC_ID}:0",
    "two pieces": f"g:{TOPIC_ID}",
    "no colon": "garbage",
    "empty": "",
}


def _coordinators(resp: Any) -> dict[str, tuple[str, str | None, bool]]:
    name = {v: k for k, v in KEYS.items()}
    return {name.get(c.key, c.key): (ErrorCode(c.error_code).name, c.error_message, c.node_id >= 0)
            for c in resp.coordinators}


def scenario(bootstrap: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    keys = tuple(KEYS.values())
    with WireClient(bootstrap) as c:
        deadline = time.monotonic() + 60
        while True:
            v6 = _coordinators(c.request(FindCoordinatorV6(key_type=i8(2), coordinator_keys=keys)))
            if all(code != "coordinator_not_available" for code, _m, _n in v6.values()) or time.monotonic() > deadline:
                break
        seen["v6"] = v6
        seen["v5"] = _coordinators(c.request(FindCoordinatorV5(key_type=i8(2), coordinator_keys=(KEYS["plain"],))))
        seen["v4"] = _coordinators(c.request(FindCoordinatorV4(key_type=i8(2), coordinator_keys=(KEYS["plain"],))))
        seen["unknown key type v6"] = _coordinators(
            c.request(FindCoordinatorV6(key_type=i8(3), coordinator_keys=(KEYS["plain"], "x"))))
        v3 = c.request(FindCoordinatorV3(key_type=i8(2), key=KEYS["plain"]))
        seen["v3"] = (ErrorCode(v3.error_code).name, v3.error_message, v3.node_id >= 0)
        v3 = c.request(FindCoordinatorV3(key_type=i8(3), key="x"))
        seen["unknown key type v3"] = (ErrorCode(v3.error_code).name, v3.error_message, v3.node_id >= 0)
    return seen


def test_find_share_coordinator_as_kafka(kafka: HasBootstrap, strom: HasBootstrap) -> None:
    theirs = scenario(kafka.bootstrap)
    ours = scenario(strom.bootstrap)
    assert {k: v for k, v in ours.items() if v != theirs[k]} == {k: v for k, v in theirs.items() if v != ours[k]}
    # What Kafka 4.3.1 answered, so a change of the reference shows here and not as a strom bug.
    assert theirs["v6"]["plain"] == ("none", "", True)
    assert theirs["v6"]["no colon"] == ("invalid_request", "", False)
    assert theirs["v5"]["plain"] == ("invalid_request", "", False)
