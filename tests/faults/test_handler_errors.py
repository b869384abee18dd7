"""A handler that fails unexpectedly answers as Kafka does, in one log line.

The failure is real: a third-party authorizer plugin (loaded through ``STROM_PLUGINS``, as an
operator would) whose backend is down raises from ``authorize``. Kafka answers such a request
with the API's error response (``AbstractRequest.getErrorResponse``: UNKNOWN_SERVER_ERROR);
strom does so for every API whose response has a top-level error code (FindCoordinator v3
here), logs one line without a traceback, and keeps the connection usable.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_wire import connect, roundtrip
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.static.primitive import i8

from strom.core.testing import BrokerProcess

UNKNOWN_SERVER_ERROR = -1

PLUGIN = '''
from strom.plugins.hookspecs.authorizers import AuthorizationResult
from strom.plugins.markers import hookimpl


class DownAuthorizer:
    """Allows everything but groups, whose ACL backend is unreachable."""

    def __init__(self, config):
        pass

    def authorize(self, ctx, actions):
        if any(a.resource.resource_type.name == "GROUP" for a in actions):
            raise ConnectionRefusedError("ACL backend at 10.0.0.9:8443 refused the connection")
        return [AuthorizationResult.ALLOWED] * len(actions)


@hookimpl
def strom_authorizers():
    return {"down-for-groups": DownAuthorizer}
'''


@pytest.fixture
def broker_with_down_authorizer(tmp_path: Path) -> Iterator[BrokerProcess]:
    (tmp_path / "down_authorizer.py").write_text(PLUGIN)
    proc = BrokerProcess(tmp_path / "data", config={"authorizer.class.name": "down-for-groups"},
                         env={"PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
                              "STROM_PLUGINS": "down_authorizer"})
    with proc:
        yield proc


def test_failing_handler_answers_unknown_server_error(broker_with_down_authorizer: BrokerProcess) -> None:
    broker = broker_with_down_authorizer
    with connect(broker.bootstrap) as sock:
        for correlation_id in (1, 2, 3):
            resp = roundtrip(sock, FindCoordinatorRequest(key="g1", key_type=i8(0)), correlation_id=correlation_id)
            assert int(resp.error_code) == UNKNOWN_SERVER_ERROR, resp
        # The connection is still usable.
        assert int(roundtrip(sock, ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                             correlation_id=4).error_code) == 0
    assert broker.wait_for_log("FindCoordinator v3")
    lines = [x for x in broker.output if "FindCoordinator v3" in x]
    assert "UNKNOWN_SERVER_ERROR" in lines[0] and "ConnectionRefusedError" in lines[0], lines[0]
    assert "Traceback" not in broker.log_text()
