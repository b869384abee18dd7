"""AlterUserScramCredentials (key 51, v0): add, replace and delete users' SCRAM credentials.

Kafka's ScramControlManager.alterCredentials, word for word in its checks and messages: ALTER on
the CLUSTER is required (else CLUSTER_AUTHORIZATION_FAILED for every user); a user altered twice
in one request is DUPLICATE_RESOURCE; an empty name or too few (< 4096) / too many (> 16384)
iterations UNACCEPTABLE_CREDENTIAL; an unknown mechanism UNSUPPORTED_SASL_MECHANISM; deleting
a credential that does not exist RESOURCE_NOT_FOUND. The client sends the salted password; the
controller keeps only the stored and server keys derived from it, as
``UserScramCredentialRecord`` / ``RemoveUserScramCredentialRecord`` in the metadata log, which
the SASL listeners' credential store replays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from strom.core.metadata.records import Message, RemoveUserScramCredentialRecord, UserScramCredentialRecord
from strom.core.protocol.messages import response_messages
from strom.core.security.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    credential_from_salted_password,
)
from strom.core.server.context import RequestContext
from strom.core.server.handlers._common import authorize_cluster, response_throttle

if TYPE_CHECKING:
    from strom.core.metadata.image import MetadataImage
    from strom.core.server.handlers._deps import ControllerDeps
    from strom.core.server.handlers._kio_types import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
    )

API_KEY = 51
VERSIONS = (0, 0)
_TWICE = "A user credential cannot be altered twice in the same request"


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


async def handle(deps: ControllerDeps, ctx: RequestContext,
                 request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    m = response_messages(API_KEY, ctx.api_version)
    throttle = response_throttle(deps, ctx)
    if not authorize_cluster(deps, ctx, "ALTER"):
        names = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        return m.make("AlterUserScramCredentialsResponse", throttle_time=throttle, results=tuple(
            m.make("AlterUserScramCredentialsResult", user=name, error_code=ErrorCode.cluster_authorization_failed,
                   error_message=None) for name in names))
    errors: dict[str, tuple[ErrorCode, str]] = {}
    results: list[tuple[str, ErrorCode, str | None]] = []

    def build(image: MetadataImage) -> list[Message]:
        errors.clear()
        results.clear()
        deletions: dict[str, tuple[str, int]] = {}
        upserts: dict[str, tuple[str, int, int, bytes, bytes]] = {}
        for d in request.deletions:
            if d.name in errors:
                continue
            if deletions.pop(d.name, None) is not None:
                errors[d.name] = (ErrorCode.duplicate_resource, _TWICE)
                continue
            error = _check_name_and_mechanism(d.name, int(d.mechanism))
            if error is None and (d.name, int(d.mechanism)) not in image.scram:
                error = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
            if error is not None:
                errors[d.name] = error
            else:
                deletions[d.name] = (d.name, int(d.mechanism))
        for u in request.upsertions:
            if u.name in errors:
                continue
            if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
                errors[u.name] = (ErrorCode.duplicate_resource, _TWICE)
                continue
            error = _check_name_and_mechanism(u.name, int(u.mechanism))
            if error is None and int(u.iterations) < MIN_ITERATIONS:
                error = (ErrorCode.unacceptable_credential, "Too few iterations")
            elif error is None and int(u.iterations) > MAX_ITERATIONS:
                error = (ErrorCode.unacceptable_credential, "Too many iterations")
            if error is not None:
                errors[u.name] = error
            else:
                upserts[u.name] = (u.name, int(u.mechanism), int(u.iterations), bytes(u.salt),
                                   bytes(u.salted_password))
        records: list[Message] = []
        for name, mechanism in deletions.values():
            results.append((name, ErrorCode.none, None))
            records.append(RemoveUserScramCredentialRecord(name=name, mechanism=mechanism))
        for name, mechanism, iterations, salt, salted in upserts.values():
            credential = credential_from_salted_password(MECHANISM_NAMES[mechanism], salt, salted, iterations)
            results.append((name, ErrorCode.none, None))
            records.append(UserScramCredentialRecord(name=name, mechanism=mechanism, salt=salt,
                                                     stored_key=credential.stored_key,
                                                     server_key=credential.server_key, iterations=iterations))
        return records

    await deps.controller.write(build)
    results.extend((name, code, message) for name, (code, message) in errors.items())
    return m.make("AlterUserScramCredentialsResponse", throttle_time=throttle, results=tuple(
        m.make("AlterUserScramCredentialsResult", user=name, error_code=code, error_message=message)
        for name, code, message in results))
