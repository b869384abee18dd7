"""A small classic-group membership client: FindCoordinator, JoinGroup, SyncGroup, Heartbeat and
LeaveGroup over one socket, with kio request/response types.

The Connect runtime otherwise talks to brokers through confluent-kafka, but librdkafka cannot
join a group whose protocol type is ``connect``, so distributed workers use this. It is
synchronous and thread-safe (one request at a time on the socket); a background heartbeat
thread keeps the session alive while the group is stable and flags when a rebalance is needed.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import logging
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as find_coordinator_req
from kio.schema.heartbeat.v4 import request as heartbeat_req
from kio.schema.join_group.v7 import request as join_req
from kio.schema.leave_group.v4 import request as leave_req
from kio.schema.sync_group.v5 import request as sync_req
from kio.schema.types import GroupId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32, i32Timedelta

from strom.client_security import open_socket
from strom.connect.exceptions import MembershipError

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18
@dataclass(frozen=True)
class JoinResult:
    generation: int
    member_id: str
    leader_id: str
    protocol_name: str
    members: dict[str, bytes]  # member id -> metadata of the chosen protocol (leader only)

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


class _Connection:
    """One Kafka connection: frame requests with kio, read and decode responses in order."""

    def __init__(self, host: str, port: int, client_id: str, timeout: float,
                 security: Mapping[str, Any] | None = None) -> None:
        # TLS and SASL as the worker's other clients (librdkafka-named settings)
        self.sock = open_socket(host, port, security or {}, timeout, client_id)
        self.client_id = client_id.encode()
        self.correlation_id = 0

    def call(self, request: Any, timeout: float) -> Any:
        api_key, version = int(request.__api_key__), int(request.__version__)
        self.correlation_id += 1
        cid = self.correlation_id
        flexible = bool(request.__flexible__)
        body = io.BytesIO()
        entity_writer(type(request))(body, request)
        header = struct.pack(">hhih", api_key, version, cid, len(self.client_id)) + self.client_id
        payload = header + (b"\x00" if flexible else b"") + body.getvalue()
        self.sock.settimeout(timeout)
        self.sock.sendall(_SIZE.pack(len(payload)) + payload)
        (size,) = _SIZE.unpack(self._recv(4))
        frame = self._recv(size)
        (got,) = _SIZE.unpack_from(frame, 0)
        if got != cid:
            raise MembershipError(ErrorCode.network_exception, f"correlation id {got}, expected {cid}")
        cls = load_response_schema(api_key, version)
        pos = 4
        if cls.__flexible__ and api_key != API_VERSIONS_KEY:
            pos = _skip_tags(frame, pos)
        response, _ = entity_reader(cls)(frame, pos)
        return response

    def _recv(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise MembershipError(ErrorCode.network_exception, "connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _skip_tags(buf: bytes, pos: int) -> int:
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def _split(server: str) -> tuple[str, int]:
    host, port = server.strip().rsplit(":", 1)
    return host.strip("[]"), int(port)


class GroupMembership:
    """Membership of one worker in a classic group of protocol type ``connect``.

    Call :meth:`join` with the (name, metadata) protocols, then :meth:`sync` (the leader passes
    every member's assignment). :meth:`start_heartbeats` keeps the session alive afterwards;
    :attr:`rejoin_needed` is set when the coordinator asks for a rebalance or the session ended.
    """

    def __init__(self, bootstrap_servers: str, group_id: str, *, client_id: str = "strom-connect",
                 protocol_type: str = "connect", session_timeout_ms: int = 10000,
                 rebalance_timeout_ms: int = 60000, heartbeat_interval_ms: int = 3000,
                 request_timeout_ms: int = 40000, security: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = [_split(s) for s in bootstrap_servers.split(",") if s.strip()]
        self.security = dict(security or {})
        self.group_id = group_id
        self.client_id = client_id
        self.protocol_type = protocol_type
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.request_timeout_ms = request_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.rejoin_needed = threading.Event()
        self.rejoin_needed.set()
        self._conn: _Connection | None = None
        self._lock = threading.RLock()
        self._stable = False
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None

    # -- connection ---------------------------------------------------------------------------

    def _call(self, request: Any, timeout_ms: int | None = None) -> Any:
        timeout = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        with self._lock:
            conn = self._coordinator()
            try:
                return conn.call(request, timeout)
            except (OSError, MembershipError) as e:
                self._drop()
                if isinstance(e, MembershipError):
                    raise
                raise MembershipError(ErrorCode.network_exception, f"coordinator connection failed: {e}") from e

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _coordinator(self) -> _Connection:
        if self._conn is not None:
            return self._conn
        errors = []
        for host, port in self.bootstrap:
            try:
                boot = _Connection(host, port, self.client_id, self.request_timeout_ms / 1000, self.security)
            except OSError as e:
                errors.append(f"{host}:{port}: {e}")
                continue
            try:
                resp = boot.call(find_coordinator_req.FindCoordinatorRequest(
                    key_type=i8(0), coordinator_keys=(self.group_id,)), self.request_timeout_ms / 1000)
            except (OSError, MembershipError) as e:
                errors.append(f"{host}:{port}: {e}")
                boot.close()
                continue
            coord = resp.coordinators[0]
            if coord.error_code != ErrorCode.none:
                boot.close()
                raise MembershipError(coord.error_code, f"FindCoordinator({self.group_id}): {coord.error_code.name}")
            if (coord.host, int(coord.port)) == (host, port):
                self._conn = boot
            else:
                boot.close()
                self._conn = _Connection(coord.host, int(coord.port), self.client_id, self.request_timeout_ms / 1000,
                                         self.security)
            return self._conn
        raise MembershipError(ErrorCode.network_exception, "no bootstrap server reachable: " + "; ".join(errors))

    # -- group calls --------------------------------------------------------------------------

    def join(self, protocols: list[tuple[str, bytes]]) -> JoinResult:
        """JoinGroup until a generation forms; blocks up to the rebalance timeout."""
        self._stable = False
        for _ in range(3):  # MEMBER_ID_REQUIRED gives us an id to come back with
            request = join_req.JoinGroupRequest(
                group_id=GroupId(self.group_id),
                session_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=self.session_timeout_ms)),
                rebalance_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=self.rebalance_timeout_ms)),
                member_id=self.member_id, group_instance_id=None, protocol_type=self.protocol_type,
                protocols=tuple(join_req.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols))
            resp = self._call(request, self.rebalance_timeout_ms + 5000)
            if resp.error_code == ErrorCode.member_id_required:
                self.member_id = resp.member_id
                continue
            if resp.error_code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
                self.member_id, self.generation = "", -1
            if resp.error_code != ErrorCode.none:
                raise MembershipError(resp.error_code, f"JoinGroup({self.group_id}): {resp.error_code.name}")
            self.member_id = resp.member_id
            self.generation = int(resp.generation_id)
            return JoinResult(self.generation, resp.member_id, resp.leader, resp.protocol_name or "",
                              {m.member_id: bytes(m.metadata) for m in resp.members})
        raise MembershipError(ErrorCode.member_id_required, "JoinGroup kept asking for a member id")

    def sync(self, assignments: dict[str, bytes], protocol_name: str | None = None) -> bytes:
        """SyncGroup: the leader passes all assignments, followers none; returns ours."""
        request = sync_req.SyncGroupRequest(
            group_id=GroupId(self.group_id), generation_id=i32(self.generation), member_id=self.member_id,
            group_instance_id=None, protocol_type=self.protocol_type, protocol_name=protocol_name,
            assignments=tuple(sync_req.SyncGroupRequestAssignment(member_id=m, assignment=a)
                              for m, a in assignments.items()))
        resp = self._call(request, self.rebalance_timeout_ms + 5000)
        if resp.error_code != ErrorCode.none:
            if resp.error_code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
                self.member_id, self.generation = "", -1
            self.rejoin_needed.set()
            raise MembershipError(resp.error_code, f"SyncGroup({self.group_id}): {resp.error_code.name}")
        self.rejoin_needed.clear()
        self._stable = True
        return bytes(resp.assignment)

    def heartbeat(self) -> ErrorCode:
        resp = self._call(heartbeat_req.HeartbeatRequest(
            group_id=GroupId(self.group_id), generation_id=i32(self.generation), member_id=self.member_id,
            group_instance_id=None))
        code: ErrorCode = resp.error_code
        if code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            self.member_id, self.generation = "", -1
        if code != ErrorCode.none:
            self._stable = False
            self.rejoin_needed.set()
        return code

    def leave(self) -> None:
        """LeaveGroup, so the others rebalance at once instead of after our session timeout."""
        if not self.member_id:
            return
        try:
            resp = self._call(leave_req.LeaveGroupRequest(
                group_id=GroupId(self.group_id), members=(leave_req.MemberIdentity(member_id=self.member_id,
                                                                          group_instance_id=None),)))
            if resp.error_code != ErrorCode.none:
                log.info("LeaveGroup(%s): %s", self.group_id, resp.error_code.name)
        except (MembershipError, OSError) as e:
            log.info("LeaveGroup(%s) failed: %s", self.group_id, e)
        self.member_id, self.generation, self._stable = "", -1, False

    # -- heartbeats ---------------------------------------------------------------------------

    def start_heartbeats(self) -> None:
        if self._hb_thread is not None:
            return
        self._hb_stop.clear()
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                           name=f"connect-heartbeat-{self.group_id}")
        self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._hb_stop.wait(self.heartbeat_interval_ms / 1000):
            if not self._stable:
                continue
            try:
                code = self.heartbeat()
            except MembershipError as e:
                log.info("heartbeat of %s failed: %s", self.group_id, e)
                continue
            except Exception:  # keep the thread alive: the next beat may succeed
                log.exception("heartbeat of %s failed", self.group_id)
                continue
            if code != ErrorCode.none:
                log.info("heartbeat of %s: %s, rejoining", self.group_id, code.name)

    def close(self, leave: bool = True) -> None:
        self._hb_stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(5)
            self._hb_thread = None
        if leave:
            self.leave()
        with self._lock:
            self._drop()

