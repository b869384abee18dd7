"""UpdateFeatures (key 57): change finalized feature levels (``kafka-features.sh upgrade``).

Kafka 4's answers, which this module reproduces (measured on 4.3.1):

- ALTER on CLUSTER is required; without it the top-level error is CLUSTER_AUTHORIZATION_FAILED.
- The request is all or nothing: the first invalid update fails every feature, with the
  top-level error (INVALID_UPDATE_VERSION) and the message "The update failed for all features
  since the following feature had an error: " + the reason; ``results`` is then empty in every
  version.
- On success the top-level message is null; v0 and v1 list every requested feature with error
  0 and the message "NONE" (Kafka's ``Errors.NONE.message()``); v2 has no per-feature results.
- v0's ``AllowDowngrade`` is ignored: Kafka's controller reads the v1+ ``UpgradeType`` field,
  whose default is UPGRADE, so a v0 downgrade is refused.
- ``ValidateOnly`` (v1+) checks everything and writes nothing.

The checks themselves live in :meth:`QuorumController.update_features`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.controller.quorum_controller import UPGRADE
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.server.handlers._deps import ControllerDeps
    from strom.core.server.handlers._kio_types import UpdateFeaturesRequest, UpdateFeaturesResponse

API_KEY = 57
VERSIONS = (0, 2)

FAILED_PREFIX = "The update failed for all features since the following feature had an error: "


async def handle(deps: ControllerDeps, ctx: RequestContext, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    m = response_messages(API_KEY, ctx.api_version)
    has_results = ctx.api_version <= 1

    def respond(code: int, message: str | None, results: tuple[Any, ...] = ()) -> Any:
        extra = {"results": results} if has_results else {}
        return m.make("UpdateFeaturesResponse", throttle_time=response_throttle(deps, ctx),
                      error_code=code, error_message=message, **extra)

    if not authorize_cluster(deps, ctx, "ALTER"):
        return respond(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    updates = [(u.feature, int(u.max_version_level), int(getattr(u, "upgrade_type", UPGRADE)))
               for u in request.feature_updates]
    error = await deps.controller.update_features(
        updates, validate_only=bool(getattr(request, "validate_only", False)))
    if error is not None:
        return respond(error.errno, FAILED_PREFIX + (error.message or ""))
    results = tuple(m.make("UpdatableFeatureResult", feature=name, error_code=ErrorCode.none, error_message="NONE")
                    for name, _, _ in updates) if has_results else ()
    return respond(ErrorCode.none, None, results)
