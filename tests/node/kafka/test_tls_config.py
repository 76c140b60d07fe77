"""The ``ssl.*`` keys of an ``SSL`` or ``SASL_SSL`` listener, read as Kafka's
``DefaultSslEngineFactory`` and broker config read them: the key store rules of its
``createKeystore`` / ``createTruststore`` (each refusal naming the key), the values Kafka
validates, the listener-prefixed overrides, a Java key store refused with its conversion, and no
password or key in a repr or an error."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.kafka.listeners import directory_properties
from node.kafka.config import KafkaServerConfig
from node.kafka.tls import KEYS as TLS_KEYS
from node.kafka.tls import TlsConfig
from storage.errors import InvalidConfigError
from tests.node.kafka.certificates import (KEY_PASSWORD, STORE_PASSWORD, Certificates,
                                           make_certificates)

SSL = {"listeners": "SSL://127.0.0.1:0"}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("pki"))


def refused(properties: dict[str, str], key: str) -> InvalidConfigError:
    with pytest.raises(InvalidConfigError) as caught:
        tls = KafkaServerConfig.from_properties({**SSL, **properties}).tls
        assert tls is not None
        tls.server_context()
    assert caught.value.key == key, caught.value
    assert str(caught.value).startswith(key), caught.value
    return caught.value


def test_an_ssl_listener_without_a_key_store_is_refused_naming_the_location() -> None:
    error = refused({}, "ssl.keystore.location")
    assert "ssl.keystore.key" in str(error)


@pytest.mark.parametrize("properties, key", [
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem",
      "ssl.keystore.password": "pw"}, "ssl.keystore.password"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "/k.p12"},
     "ssl.keystore.password"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "KEY"}, "ssl.keystore.certificate.chain"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "CHAIN"}, "ssl.keystore.key"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.key": "KEY",
      "ssl.keystore.certificate.chain": "CHAIN"}, "ssl.keystore.key"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "KEY",
      "ssl.keystore.certificate.chain": "CHAIN", "ssl.keystore.location": "/k.pem"},
     "ssl.keystore.location"),
    ({"ssl.truststore.type": "JKS", "ssl.truststore.certificates": "CERTS"},
     "ssl.truststore.certificates"),
    ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/t.pem",
      "ssl.truststore.password": "pw"}, "ssl.truststore.password"),
    ({"ssl.truststore.password": "pw"}, "ssl.truststore.password"),
    ({"ssl.client.auth": "always"}, "ssl.client.auth"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "ssl.enabled.protocols"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol"),
    ({"ssl.keystore.type": "BKS"}, "ssl.keystore.type"),
    ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "ssl.cipher.suites"),
])
def test_kafkas_key_store_rules_and_values_are_refused_naming_the_key(
        certs: Certificates, properties: dict[str, str], key: str) -> None:
    store = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_pem)}
    with pytest.raises(InvalidConfigError) as caught:
        KafkaServerConfig.from_properties({**SSL, **store, **properties})
    assert caught.value.key == key, caught.value
    assert key in str(caught.value)


def test_a_java_key_store_is_refused_with_the_keytool_command_that_converts_it(
        tmp_path: Path) -> None:
    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    error = refused({"ssl.keystore.location": str(jks), "ssl.keystore.password": "pw"},
                    "ssl.keystore.location")
    assert str(jks) in str(error)
    assert (f"keytool -importkeystore -srckeystore {jks} -destkeystore {tmp_path}/broker.p12 "
            "-deststoretype PKCS12") in str(error)
    assert "ssl.keystore.type=PKCS12" in str(error)


def test_a_java_trust_store_is_refused_too(certs: Certificates, tmp_path: Path) -> None:
    jks = tmp_path / "trust.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    with pytest.raises(InvalidConfigError, match="ssl.truststore.type=PKCS12") as caught:
        KafkaServerConfig.from_properties({
            **SSL, "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_pem),
            "ssl.client.auth": "required", "ssl.truststore.location": str(jks)}
        ).tls.server_context()  # type: ignore[union-attr]
    assert caught.value.key == "ssl.truststore.location"


def test_a_missing_or_wrong_key_store_file_is_named_with_its_key(certs: Certificates) -> None:
    assert "/nowhere/k.pem" in str(refused(
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nowhere/k.pem"},
        "ssl.keystore.location"))
    assert str(certs.ca) in str(refused(      # a certificate without its key
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.ca)},
        "ssl.keystore.location"))
    assert str(certs.server_encrypted_pem) in str(refused(    # no ssl.key.password
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_encrypted_pem)},
        "ssl.keystore.location"))


def test_no_password_or_private_key_appears_in_the_repr(certs: Certificates) -> None:
    config = KafkaServerConfig.from_properties({
        **SSL, "ssl.keystore.type": "PEM", "ssl.keystore.key": certs.server_key,
        "ssl.keystore.certificate.chain": certs.server_chain, "ssl.key.password": "k-secret"})
    text = repr(config)
    assert "PRIVATE KEY" not in text and "k-secret" not in text
    p12 = KafkaServerConfig.from_properties({
        **SSL, "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs.server_p12),
        "ssl.keystore.password": STORE_PASSWORD, "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(certs.server_p12),
        "ssl.truststore.password": STORE_PASSWORD})
    assert STORE_PASSWORD not in repr(p12)


def test_the_listener_prefixed_key_overrides_and_another_listeners_is_left_alone() -> None:
    tls = TlsConfig.from_properties({
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/plain.pem",
        "listener.name.ssl.ssl.keystore.location": "/ssl.pem",
        "listener.name.sasl_ssl.ssl.keystore.location": "/sasl.pem",
        "ssl.enabled.protocols": "TLSv1.3"}, "SSL")
    assert (tls.keystore_location, tls.enabled_protocols) == ("/ssl.pem", "TLSv1.3")
    sasl = TlsConfig.from_properties({
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/plain.pem",
        "listener.name.ssl.ssl.keystore.location": "/ssl.pem"}, "SASL_SSL")
    assert sasl.keystore_location == "/plain.pem"


def test_sasl_ssl_takes_ssl_client_auth_only_from_its_prefixed_key(
        caplog: pytest.LogCaptureFixture) -> None:
    store = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/k.pem"}
    assert TlsConfig.from_properties({**store, "ssl.client.auth": "required"},
                                     "SSL").client_auth == "required"
    assert not caplog.records
    assert TlsConfig.from_properties({**store, "ssl.client.auth": "required"},
                                     "SASL_SSL").client_auth == "none"
    assert "a SASL_SSL listener asks for client certificates by " \
           "listener.name.sasl_ssl.ssl.client.auth" in caplog.text
    assert TlsConfig.from_properties(
        {**store, "ssl.client.auth": "none",
         "listener.name.sasl_ssl.ssl.client.auth": "requested"}, "SASL_SSL"
    ).client_auth == "requested"


def test_kafkas_defaults_and_empty_values() -> None:
    tls = TlsConfig.from_properties({"ssl.keystore.location": "/k.p12",
                                     "ssl.keystore.password": "pw", "ssl.cipher.suites": "",
                                     "ssl.enabled.protocols": " "}, "SSL")
    assert (tls.keystore_type, tls.truststore_type, tls.client_auth, tls.protocol,
            tls.enabled_protocols, tls.cipher_suites) == (
        "JKS", "JKS", "none", "TLSv1.3", "TLSv1.2,TLSv1.3", None)


def test_ssl_keys_are_ignored_by_a_listener_without_tls() -> None:
    config = KafkaServerConfig.from_properties({"listeners": "PLAINTEXT://127.0.0.1:0",
                                                "ssl.keystore.location": "/k.jks"})
    assert config.tls is None


def test_a_sasl_ssl_listener_needs_its_own_plain_jaas_key() -> None:
    base = {"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/k.pem", "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'}
    with pytest.raises(InvalidConfigError) as caught:
        KafkaServerConfig.from_properties(base)
    assert caught.value.key == "listener.name.sasl_ssl.plain.sasl.jaas.config"


def test_a_cluster_hands_every_directory_its_tls_keys() -> None:
    chosen = directory_properties({
        "listeners": "SSL://127.0.0.1:9093", "ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": "/k.pem", "ssl.client.auth": "none",
        "ssl.endpoint.identification.algorithm": "https"}, 1)
    assert chosen == {"listeners": "SSL://127.0.0.1:9094", "ssl.keystore.type": "PEM",
                      "listener.name.ssl.ssl.keystore.location": "/k.pem",
                      "ssl.client.auth": "none"}


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(TLS_KEYS) + [
    "listener.name.ssl.ssl.keystore.location", "listener.name.ssl.ssl.client.auth"]),
    st.text(max_size=30), max_size=8))
def test_any_ssl_keys_give_a_config_or_an_error_naming_a_key(properties: dict[str, str]) -> None:
    try:
        config = KafkaServerConfig.from_properties({**SSL, **properties})
    except InvalidConfigError as err:
        assert err.fields.get("key") is not None, err
        return
    assert config.tls is not None and config.tls.has_keystore


# ---- the scenarios of Kafka's DefaultSslEngineFactoryTest ---------------------------------------
@pytest.mark.parametrize("form", ["no password", "key password", "trailing new lines",
                                  "leading new lines", "CRLF"])
def test_an_inline_pem_key_store_loads(certs: Certificates, form: str) -> None:
    key, password = ((certs.server_key, None) if form == "no password" else
                     (certs.server_encrypted_key, KEY_PASSWORD))
    key = {"trailing new lines": key + "\n\n", "leading new lines": "\n\n" + key,
           "CRLF": key.replace("\n", "\r\n")}.get(form, key)
    tls = TlsConfig(keystore_type="PEM", keystore_key=key,
                    keystore_certificate_chain=certs.server_chain, key_password=password)
    context = tls.server_context()
    assert context.verify_mode == ssl.CERT_NONE


@pytest.mark.parametrize("authorities", [1, 2])
def test_an_inline_pem_trust_store_holds_each_of_its_certificates(
        certs: Certificates, authorities: int) -> None:
    pems = [certs.ca.read_text(), certs.other_ca.read_text()][:authorities]
    tls = TlsConfig(keystore_type="PEM", keystore_location=str(certs.server_pem),
                    truststore_type="PEM", truststore_certificates="".join(pems),
                    client_auth="required")
    subjects = [dict(part[0] for part in ca["subject"])["commonName"]
                for ca in tls.server_context().get_ca_certs()]
    assert subjects == ["strata test CA", "another CA"][:authorities]


def test_a_pem_trust_store_file_holds_its_certificate(certs: Certificates) -> None:
    tls = TlsConfig(keystore_type="PEM", keystore_location=str(certs.server_pem),
                    truststore_type="PEM", truststore_location=str(certs.ca),
                    client_auth="requested")
    context = tls.server_context()
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert [dict(part[0] for part in ca["subject"])["commonName"]
            for ca in context.get_ca_certs()] == ["strata test CA"]


def test_an_encrypted_pem_key_store_file_needs_its_key_password(certs: Certificates) -> None:
    with_password = TlsConfig(keystore_type="PEM",
                              keystore_location=str(certs.server_encrypted_pem),
                              key_password=KEY_PASSWORD)
    with_password.server_context()
    wrong = TlsConfig(keystore_type="PEM", keystore_location=str(certs.server_encrypted_pem),
                      key_password="not-it")
    with pytest.raises(InvalidConfigError, match="ssl.keystore.location") as caught:
        wrong.server_context()
    assert "not-it" not in str(caught.value)
