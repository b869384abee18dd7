"""ApiVersions (key 18): the API ranges this broker implements, and its feature levels.

An unknown request version is answered with UNSUPPORTED_VERSION in a v0 response that still
lists the supported ranges, so the client can retry with a version both sides know.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from strom.core.metadata.bootstrap import LATEST_METADATA_VERSION, MINIMUM_METADATA_VERSION
from strom.core.metadata.features import FEATURES, METADATA_VERSION_FEATURE
from strom.core.protocol.messages import response_messages
from strom.core.server.context import RequestContext

if TYPE_CHECKING:
    from collections.abc import Mapping

    from strom.core.server.handlers._deps import ApiVersionsDeps
    from strom.core.server.handlers._kio_types import ApiVersionsRequest, ApiVersionsResponse

API_KEY = 18
VERSIONS = (0, 4)


def build(deps: ApiVersionsDeps, version: int, error: ErrorCode = ErrorCode.none,
          api_keys: Mapping[int, tuple[int, int]] | None = None) -> Any:
    """``api_keys``: the ranges to list (default: the broker listener's, ``deps.api_versions()``;
    the controller listener lists its own)."""
    m = response_messages(API_KEY, version)
    listed = deps.api_versions() if api_keys is None else api_keys
    keys = tuple(m.make("ApiVersion", api_key=k, min_version=lo, max_version=hi)
                 for k, (lo, hi) in sorted(listed.items()))
    level, epoch = deps.metadata_version_level()
    if not hasattr(m.module, "SupportedFeatureKey"):  # v0-v2 carry no features
        return m.make("ApiVersionsResponse", error_code=error, api_keys=keys, throttle_time=0)
    # What this node supports (the controller's range, UpdateFeatures accepts up to it): every
    # metadata.version level strom reads and writes, and each feature at the levels whose
    # behaviour strom has (kraft.version and streams.version: 0 only; share.version up to 1).
    ranges = {METADATA_VERSION_FEATURE: (MINIMUM_METADATA_VERSION, LATEST_METADATA_VERSION)}
    ranges.update({name: (spec.min_level, spec.max_level) for name, spec in FEATURES.items()})
    # KIP-1022: a supported minimum of 0 is only shown from v4; older clients would reject it.
    supported = tuple(m.make("SupportedFeatureKey", name=name, min_version=lo, max_version=hi)
                      for name, (lo, hi) in sorted(ranges.items()) if lo > 0 or version >= 4)
    levels = {name: lvl for name, lvl in deps.image.features.items() if lvl > 0}
    levels[METADATA_VERSION_FEATURE] = level
    finalized = tuple(m.make("FinalizedFeatureKey", name=name, max_version_level=lvl, min_version_level=lvl)
                      for name, lvl in sorted(levels.items()))
    return m.make("ApiVersionsResponse", error_code=error, api_keys=keys, throttle_time=0,
                  supported_features=supported, finalized_features_epoch=epoch,
                  finalized_features=finalized)


async def handle(deps: ApiVersionsDeps, ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return build(deps, ctx.api_version)
