"""The built-in plugins: strom's default behaviour, registered like any third-party plugin.

:data:`BUILTIN_PLUGINS` maps each plugin's registration name (what ``strom.plugins.blocklist``
takes) to its module. A third-party plugin replaces a built-in by offering its own
implementation and being selected in the config, or by blocking the built-in.
"""

from __future__ import annotations

BUILTIN_PLUGINS: dict[str, str] = {
    "allow_all": "strom.plugins.builtin.allow_all",
    "standard_authorizer": "strom.plugins.builtin.standard_authorizer",
    "client_quotas": "strom.plugins.builtin.client_quotas",
    "unlimited_quotas": "strom.plugins.builtin.unlimited_quotas",
    "uniform_assignor": "strom.plugins.builtin.uniform_assignor",
    "range_assignor": "strom.plugins.builtin.range_assignor",
    "simple_assignor": "strom.core.coordinator.share.assignor",  # share groups (KIP-932)
    "local_tier": "strom.plugins.builtin.local_tier",
    "s3_tier": "strom.plugins.builtin.s3_tier",
    "topic_based_rlmm": "strom.plugins.builtin.topic_based_rlmm",
    "connect_builtins": "strom.connect.builtin",
}
