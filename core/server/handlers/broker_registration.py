"""BrokerRegistration (key 62), served on the controller listener only (KIP-631).

Another broker registers with this node's controller: the request becomes a
:class:`~strom.core.controller.quorum_controller.RemoteBrokerRegistration` and
``QuorumController.register_remote_broker`` writes its RegisterBrokerRecord (Kafka's
``ClusterControlManager.registerBroker``). The answer carries the broker epoch, or one of
Kafka's error codes with epoch -1 (the response has no error message). Like Kafka's
ControllerApis, the caller needs CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, TypeAlias

from kio.schema.errors import ErrorCode

from strom.core.controller.quorum_controller import RemoteBrokerRegistration
from strom.core.errors import KafkaError
from strom.core.protocol.exceptions import MalformedRequestError
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster

if TYPE_CHECKING:
    import kio.schema.broker_registration.v0.request
    import kio.schema.broker_registration.v0.response
    import kio.schema.broker_registration.v1.request
    import kio.schema.broker_registration.v1.response
    import kio.schema.broker_registration.v2.request
    import kio.schema.broker_registration.v2.response
    import kio.schema.broker_registration.v3.request
    import kio.schema.broker_registration.v3.response
    import kio.schema.broker_registration.v4.request
    import kio.schema.broker_registration.v4.response

    from strom.core.server.handlers._deps import BrokerLifecycleDeps

    BrokerRegistrationRequest: TypeAlias = (
        kio.schema.broker_registration.v0.request.BrokerRegistrationRequest
        | kio.schema.broker_registration.v1.request.BrokerRegistrationRequest
        | kio.schema.broker_registration.v2.request.BrokerRegistrationRequest
        | kio.schema.broker_registration.v3.request.BrokerRegistrationRequest
        | kio.schema.broker_registration.v4.request.BrokerRegistrationRequest
    )
    BrokerRegistrationResponse: TypeAlias = (
        kio.schema.broker_registration.v0.response.BrokerRegistrationResponse
        | kio.schema.broker_registration.v1.response.BrokerRegistrationResponse
        | kio.schema.broker_registration.v2.response.BrokerRegistrationResponse
        | kio.schema.broker_registration.v3.response.BrokerRegistrationResponse
        | kio.schema.broker_registration.v4.response.BrokerRegistrationResponse
    )

API_KEY = 62
VERSIONS = (0, 4)
LISTENER = "controller"
_ZERO = uuid.UUID(int=0)


async def handle(deps: BrokerLifecycleDeps, ctx: RequestContext,
                 request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
    m = response_messages(API_KEY, ctx.api_version)
    if not authorize_cluster(deps, ctx, "CLUSTER_ACTION"):
        return m.make("BrokerRegistrationResponse", throttle_time=0,
                      error_code=ErrorCode.cluster_authorization_failed, broker_epoch=-1)
    log_dirs = getattr(request, "log_dirs", ())
    if log_dirs is None:
        # LogDirs is not nullable; strom's frame check lets a null []uuid through, Kafka's reader
        # refuses it and closes the connection.
        raise MalformedRequestError("non-nullable field log_dirs was serialized as null")
    registration = RemoteBrokerRegistration(
        broker_id=int(request.broker_id), cluster_id=request.cluster_id,
        incarnation_id=request.incarnation_id or _ZERO,
        listeners=[(ln.name, ln.host, int(ln.port), int(ln.security_protocol)) for ln in request.listeners],
        features=[(f.name, int(f.min_supported_version), int(f.max_supported_version)) for f in request.features],
        rack=request.rack,
        log_dirs=[d or _ZERO for d in log_dirs],
        is_migrating_zk_broker=bool(getattr(request, "is_migrating_zk_broker", False)),
        # PreviousBrokerEpoch is v3+; Kafka takes an older request as after an unclean shutdown.
        previous_broker_epoch=int(getattr(request, "previous_broker_epoch", -1)))
    try:
        epoch = await deps.controller.register_remote_broker(registration, deps.cluster_id)
    except KafkaError as e:
        return m.make("BrokerRegistrationResponse", throttle_time=0, error_code=ErrorCode(e.errno), broker_epoch=-1)
    return m.make("BrokerRegistrationResponse", throttle_time=0, error_code=ErrorCode.none, broker_epoch=epoch)
