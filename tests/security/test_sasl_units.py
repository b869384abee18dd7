"""SASL pieces without a broker: Kafka's JAAS syntax, the SCRAM server against RFC 7677's exchange,
PLAIN's checks and ``--add-scram`` parsing."""

from __future__ import annotations

import base64

import pytest

from strom.core.security.jaas import JaasConfigError, parse_jaas_config, parse_single
from strom.core.security.sasl import SaslAuthenticationError, SaslCredentialError
from strom.core.security.sasl.plain import PlainSaslServer, users_from_jaas
from strom.core.security.sasl.scram import ScramCredentialStore, ScramSaslServer, credential_from_password
from strom.core.security.scram_parser import ScramFormatError, parse_add_scram


def test_jaas_syntax() -> None:
    entry = parse_single('''
        // a comment
        org.apache.kafka.common.security.plain.PlainLoginModule required /* another */
            username="admin" password="a \\"quoted\\" secret" user_alice=alice-secret
            user_bob="b;o=b";''')
    assert entry.flag == "required"
    assert entry.options == {"username": "admin", "password": 'a "quoted" secret', "user_alice": "alice-secret",
                             "user_bob": "b;o=b"}
    assert users_from_jaas(entry) == {"alice": "alice-secret", "bob": "b;o=b"}
    two = "a.B required; c.D optional x=1;"
    assert [e.login_module for e in parse_jaas_config(two)] == ["a.B", "c.D"]
    for bad, message in [(two, "should be 1 module"), ("a.B always;", "control flag"), ("a.B required x=1", "';'"),
                         ('a.B required x="open;', "unterminated")]:
        with pytest.raises(JaasConfigError, match=message):
            parse_single(bad)


def test_scram_sha_256_rfc7677_exchange() -> None:
    """RFC 7677 section 3: user "user", password "pencil" (salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096)."""
    store = ScramCredentialStore()
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    c = credential_from_password("SCRAM-SHA-256", "pencil", salt=salt, iterations=4096)
    store.load([("user", 1, c.salt, c.stored_key, c.server_key, c.iterations)])
    server = ScramSaslServer("SCRAM-SHA-256", store, server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"
    wrong = ScramSaslServer("SCRAM-SHA-256", store, server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    wrong.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(SaslCredentialError, match="Invalid client credentials"):
        wrong.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                       b"p=AAAAAapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    with pytest.raises(SaslCredentialError, match="Invalid user credentials"):
        ScramSaslServer("SCRAM-SHA-256", store).evaluate(b"n,,n=nobody,r=abc")
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        ScramSaslServer("SCRAM-SHA-256", store).evaluate(b"n,a=admin,n=user,r=abc")


def test_plain_checks() -> None:
    def run(token: bytes) -> str:
        server = PlainSaslServer({"alice": "alice-secret"})
        try:
            server.evaluate(token)
        except SaslAuthenticationError as e:
            return str(e)
        return server.authorization_id

    assert run(b"\0alice\0alice-secret") == "alice"
    assert run(b"alice\0alice\0alice-secret") == "alice"
    assert run(b"\0alice\0wrong") == "Authentication failed: Invalid username or password"
    assert run(b"\0\0x") == "Authentication failed: username not specified"
    assert run(b"\0alice\0") == "Authentication failed: password not specified"
    assert run(b"bob\0alice\0alice-secret").endswith("authorization id that is different from username")
    assert run(b"only-one") == "Invalid SASL/PLAIN response: expected 3 tokens, got 1"


def test_add_scram_arguments_as_kafka_storage_takes_them() -> None:
    record = parse_add_scram("SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"c2FsdHNhbHRzYWx0\",password=pw]")
    assert (record.name, record.mechanism, record.iterations, record.salt) == ("alice", 2, 8192, b"saltsaltsalt")
    for bad, message in [("SCRAM-SHA-1=[name=a,password=b]", "is not supported"),
                         ("SCRAM-SHA-256=name=a", "start with \\["), ("SCRAM-SHA-256=[name=a]", "one of 'password'"),
                         ("SCRAM-SHA-256=[name=a,saltedpassword=AAAA]", "supply 'salt'"),
                         ("SCRAM-SHA-256=[name=a,password=b,iterations=10]", "must be >= 4096"),
                         ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour")]:
        with pytest.raises(ScramFormatError, match=message):
            parse_add_scram(bad)


def test_scram_publisher_follows_a_snapshot_that_drops_a_user() -> None:
    """A snapshot load replays into a delta over an empty image: a user the snapshot no longer
    holds must leave the store even though no record of the delta names it."""
    from strom.core.metadata.delta import MetadataDelta
    from strom.core.metadata.image import MetadataImage
    from strom.core.metadata.records import UserScramCredentialRecord
    from strom.core.security.sasl.scram import ScramPublisher

    c = credential_from_password("SCRAM-SHA-256", "alice-secret", iterations=4096)
    store = ScramCredentialStore()
    publisher = ScramPublisher(store)
    delta = MetadataDelta(MetadataImage())
    delta.replay(UserScramCredentialRecord("alice", 1, c.salt, c.stored_key, c.server_key, c.iterations))
    publisher.on_metadata_update(delta, delta.apply(1, 1))
    assert store.get("alice", "SCRAM-SHA-256") is not None
    snapshot = MetadataDelta(MetadataImage())  # as MetadataLoader.handle_load_snapshot builds it
    publisher.on_metadata_update(snapshot, snapshot.apply(5, 1))
    assert store.get("alice", "SCRAM-SHA-256") is None and len(store) == 0
