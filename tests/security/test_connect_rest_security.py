"""Connect REST security (issue 23 item 5): https listeners and BasicAuthSecurityRestExtension.

Two distributed workers of one group on a (plain) BrokerProcess, each serving its REST API only
on ``https://127.0.0.1:<port>`` (``listeners.https.ssl.*``: a PEM key store from a throwaway CA)
with basic authentication against a credentials file named by a JAAS ``KafkaConnect`` section.
Right credentials pass, wrong or missing ones get Kafka's 401; a write sent to the follower is
forwarded to the leader over https with the caller's credentials; the requests workers send each
other are exempt as in Kafka. With ``ssl.client.auth=required`` a client needs a certificate, and
a follower presents its own when it forwards. Bad settings fail the start naming the key.
"""

from __future__ import annotations

import socket
import ssl
import urllib.error
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_util import Cluster, datagen
from secure_broker_helpers import BASIC_AUTH_EXTENSION, basic_auth_jaas, rest_call
from tls_certs import Pki, make_pki, make_rest_pki

from strom.connect.exceptions import ConfigException
from strom.connect.rest import RestServer
from strom.connect.runtime.config import WorkerConfig
from strom.connect.runtime.distributed import DistributedHerder
from strom.core.testing import BrokerProcess, wait_for

ADMIN = ("admin", "admin-secret")
UNAUTHORIZED = "User cannot access the resource."


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def plain_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("rest-sec"), config={"group.initial.rebalance.delay.ms": "100"}) as b:
        yield b


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("rest-pki"))


def _secure(pki: Pki, jaas: Path) -> dict[str, str]:
    """The REST security settings of a worker, by Kafka Connect's names."""
    return {"listeners.https.ssl.keystore.type": "PEM",
            "listeners.https.ssl.keystore.location": str(pki.server_keystore),
            "listeners.https.ssl.truststore.type": "PEM",
            "listeners.https.ssl.truststore.location": str(pki.ca_cert),
            "listeners.https.ssl.client.auth": "none",
            "rest.extension.classes": BASIC_AUTH_EXTENSION,
            "java.security.auth.login.config": str(jaas)}


class SecureWorkers:
    """Distributed herders, each with its https REST server."""

    def __init__(self, broker: BrokerProcess, extra: dict[str, str]) -> None:
        self.cluster = Cluster(broker, extra)
        self.servers: list[RestServer] = []

    def worker(self) -> tuple[DistributedHerder, str]:
        port = _free_port()
        config = WorkerConfig.from_mapping({**self.cluster.base, "listeners": f"https://127.0.0.1:{port}"})
        herder = DistributedHerder(config, self.cluster.registry)
        server = RestServer.from_worker_config(herder, config).start()
        self.servers.append(server)
        herder.start()
        self.cluster.herders.append(herder)
        return herder, server.url

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
        self.cluster.stop_all()


def _leader(*herders: DistributedHerder) -> DistributedHerder:
    return wait_for(lambda: next((h for h in herders if h.leader_url() is None and not h._rebalancing
                                  and h._leader_id), None), what="a leader")


def test_https_basic_auth_and_forwarding(plain_broker: BrokerProcess, pki: Pki, tmp_path: Path) -> None:
    jaas = basic_auth_jaas(tmp_path / "auth", {ADMIN[0]: ADMIN[1], "reader": "r"})
    workers = SecureWorkers(plain_broker, _secure(pki, jaas))
    try:
        (a, url_a), (b, url_b) = workers.worker(), workers.worker()
        assert url_a.startswith("https://") and a.url.startswith("https://")
        # plain http to an https listener gets no REST answer
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            rest_call(url_a.replace("https://", "http://") + "/", auth=ADMIN, timeout=5)
        # and a client that trusts only the system's CAs, not the worker's, is refused by TLS
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            rest_call(url_a + "/", auth=ADMIN, timeout=5)
        for url in (url_a, url_b):
            assert rest_call(url + "/connectors", ca=pki.ca_cert)[:2] == (401, UNAUTHORIZED)
            assert rest_call(url + "/connectors", ca=pki.ca_cert, auth=(ADMIN[0], "wrong"))[:2] == (401, UNAUTHORIZED)
            assert rest_call(url + "/connectors", ca=pki.ca_cert, auth=("nobody", ADMIN[1]))[0] == 401
            assert rest_call(url + "/connectors", ca=pki.ca_cert, auth=("reader", "r"))[0] == 200
        # the requests workers send each other are not asked for credentials (Kafka's
        # INTERNAL_REQUEST_MATCHERS): whatever they answer, it is not 401
        assert rest_call(url_a + "/connectors/x/tasks", "POST", [], ca=pki.ca_cert)[0] != 401
        assert rest_call(url_a + "/connectors/x/fence", "PUT", {}, ca=pki.ca_cert)[0] != 401
        assert rest_call(url_a + "/connectors/x/tasks", "GET", ca=pki.ca_cert)[0] == 401

        leader = _leader(a, b)
        follower_url = url_b if leader is a else url_a
        leader_url = url_a if leader is a else url_b
        name = f"dg-{uuid.uuid4().hex[:6]}"
        body: dict[str, Any] = {"name": name, "config": datagen(f"t-{name}", 1)}
        # a follower refuses a caller without credentials itself...
        assert rest_call(follower_url + "/connectors", "POST", body, ca=pki.ca_cert)[0] == 401
        # ...and forwards an authenticated one to the leader over https, credentials included
        status, text, _ = rest_call(follower_url + "/connectors", "POST", body, ca=pki.ca_cert, auth=ADMIN)
        assert status == 201, text
        status, text, _ = rest_call(leader_url + "/connectors", ca=pki.ca_cert, auth=ADMIN)
        assert status == 200 and name in text
        # once the follower has read the new config, a delete through it is forwarded too
        wait_for(lambda: rest_call(follower_url + f"/connectors/{name}", ca=pki.ca_cert, auth=ADMIN)[0] == 200,
                 timeout=30, what="the follower to know the connector")
        status, text, _ = rest_call(follower_url + f"/connectors/{name}", "DELETE", ca=pki.ca_cert, auth=ADMIN)
        assert status == 204, text
    finally:
        workers.stop()


def test_client_auth_required_and_forwarding_presents_the_worker_certificate(
        plain_broker: BrokerProcess, tmp_path: Path) -> None:
    """ssl.client.auth=required from the worker's own ssl.* (no listeners.https.* key): a client
    without a certificate is refused by TLS, one with a certificate of the CA is served, and a
    follower forwards to the leader presenting its key store."""
    ca, worker_store, client_store = make_rest_pki(tmp_path / "pki")
    workers = SecureWorkers(plain_broker, {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(worker_store),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca), "ssl.client.auth": "required"})
    try:
        (a, url_a), (b, url_b) = workers.worker(), workers.worker()
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            rest_call(url_a + "/connectors", ca=ca, timeout=5)
        assert rest_call(url_a + "/connectors", ca=ca, cert=client_store)[0] == 200
        leader = _leader(a, b)
        follower_url = url_b if leader is a else url_a
        name = f"dg-{uuid.uuid4().hex[:6]}"
        status, text, _ = rest_call(follower_url + "/connectors", "POST",
                                    {"name": name, "config": datagen(f"t-{name}", 1)}, ca=ca, cert=client_store)
        assert status == 201, text
    finally:
        workers.stop()


def test_bad_settings_name_the_key(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ConfigException, match=r"listeners\.https\.ssl\.keystore\.location"):
        RestServer(None, "https://127.0.0.1:0", security={"listeners.https.ssl.keystore.type": "PEM"})
    with pytest.raises(ConfigException, match=r"java\.security\.auth\.login\.config"):
        RestServer(None, "http://127.0.0.1:0", security={"rest.extension.classes": BASIC_AUTH_EXTENSION})
    with pytest.raises(ConfigException, match=r"rest\.extension\.classes"):
        RestServer(None, "http://127.0.0.1:0", security={"rest.extension.classes": "com.example.Ext"})
    with pytest.raises(ConfigException, match=r"rest\.advertised\.listener"):
        RestServer(None, "http://127.0.0.1:0", advertised_listener="ftp")
    no_section = tmp_path / "other.conf"
    no_section.write_text('KafkaServer { x.Y required file="f"; };\n')
    with pytest.raises(ConfigException, match="KafkaConnect"):
        RestServer(None, "http://127.0.0.1:0", security={"rest.extension.classes": BASIC_AUTH_EXTENSION,
                                                         "java.security.auth.login.config": str(no_section)})
    # the worker's own ssl.* serve the https listener when no listeners.https.* key is given
    server = RestServer(None, "https://127.0.0.1:0", security={
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_keystore)})
    assert server.authenticator is None and server.advertised_scheme == "https"
    # off by default: loopback http, no authentication
    default = RestServer(None)
    assert default.listeners == [("127.0.0.1", 8083)] and default.schemes == ["http"]
    assert default.authenticator is None
