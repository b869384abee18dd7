"""AclPublisher: the committed ACLs of the metadata log, replayed into the authorizer.

Kafka's ``AclPublisher``: a metadata publisher that hands the authorizer (a
:class:`~strom.plugins.hookspecs.authorizers.ClusterMetadataAuthorizer`) every ACL of the image
once (at start-up, after the log or a snapshot is replayed) and then each committed change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from uuid import UUID

from strom.core.metadata.delta import MetadataDelta
from strom.core.metadata.image import MetadataImage
from strom.core.metadata.publisher import ImageMapPublisher
from strom.core.metadata.records import AccessControlEntryRecord
from strom.core.security.acl_control import binding_of
from strom.plugins.hookspecs.authorizers import ClusterMetadataAuthorizer

log = logging.getLogger(__name__)


class AclPublisher(ImageMapPublisher[UUID, AccessControlEntryRecord]):
    """Feeds one authorizer from the metadata loader (runs on the event loop)."""

    def __init__(self, authorizer: ClusterMetadataAuthorizer) -> None:
        super().__init__()
        self.authorizer = authorizer

    def image_map(self, image: MetadataImage) -> Mapping[UUID, AccessControlEntryRecord]:
        return image.acls

    def load(self, entries: Mapping[UUID, AccessControlEntryRecord]) -> None:
        self.authorizer.load_snapshot({str(i): binding_of(r) for i, r in entries.items()})

    def apply_changes(self, delta: MetadataDelta, entries: Mapping[UUID, AccessControlEntryRecord]) -> None:
        for acl_id, record in delta.changed_acls.items():
            if record is None:
                self.authorizer.remove_acl(str(acl_id))
            else:
                self.authorizer.add_acl(str(acl_id), binding_of(record))
