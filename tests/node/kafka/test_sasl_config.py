"""The SASL settings of ``KafkaServerConfig``: a SASL_PLAINTEXT listener needs mechanisms and
users for each, PLAIN's from Kafka's JAAS text (read as Kafka's ``JaasConfig`` reads it), SCRAM's
from ``strata.sasl.scram.users``; every mistake is an ``InvalidConfigError`` naming the key and
never showing a password."""

from __future__ import annotations

from typing import Any

import pytest

from node.kafka.config import KafkaServerConfig
from node.kafka.credentials import CredentialCache
from node.kafka.jaas import parse_jaas_config, plain_users, scram_users
from node.kafka.scram import ScramMechanism
from storage.errors import InvalidConfigError

JAAS_KEY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
SCRAM_KEY = "strata.sasl.scram.users"
MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
JAAS = f'{MODULE} required user_alice="alice-secret" user_bob="bob-secret";'


def sasl(**overrides: Any) -> dict[str, Any]:
    props = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
             JAAS_KEY: JAAS, SCRAM_KEY: "carol:carol-secret,dave:dave-secret"}
    props.update(overrides)
    return {key: value for key, value in props.items() if value is not None}


def refused(props: dict[str, Any], key: str) -> InvalidConfigError:
    with pytest.raises(InvalidConfigError) as caught:
        KafkaServerConfig.from_properties(props)
    assert caught.value.key == key and key in str(caught.value)
    for secret in ("alice-secret", "bob-secret", "carol-secret"):
        assert secret not in str(caught.value) and secret not in repr(caught.value.value)
    return caught.value


def test_sasl_listener_with_mechanisms_and_users_is_accepted() -> None:
    config = KafkaServerConfig.from_properties(sasl())
    assert config.listener().name == "SASL_PLAINTEXT"
    assert config.enabled_mechanisms() == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert config.plain_users() == {"alice": "alice-secret", "bob": "bob-secret"}
    assert config.scram_users() == {"carol": "carol-secret", "dave": "dave-secret"}
    assert config.sasl_server_max_receive_size == 524288


def test_config_repr_shows_no_password() -> None:
    shown = repr(KafkaServerConfig.from_properties(sasl()))
    assert "secret" not in shown and "sasl_enabled_mechanisms='PLAIN" in shown


@pytest.mark.parametrize("mechanisms", [None, "", " , "])
def test_sasl_listener_without_mechanisms_names_sasl_enabled_mechanisms(
        mechanisms: str | None) -> None:
    refused(sasl(**{"sasl.enabled.mechanisms": mechanisms}), "sasl.enabled.mechanisms")


@pytest.mark.parametrize("mechanisms", ["GSSAPI", "PLAIN,OAUTHBEARER", "plain"])
def test_an_unserved_mechanism_names_sasl_enabled_mechanisms(mechanisms: str) -> None:
    refused(sasl(**{"sasl.enabled.mechanisms": mechanisms}), "sasl.enabled.mechanisms")


def test_plain_without_users_names_the_jaas_key() -> None:
    refused(sasl(**{JAAS_KEY: None}), JAAS_KEY)
    refused(sasl(**{JAAS_KEY: f'{MODULE} required username="admin" password="x";'}), JAAS_KEY)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_without_users_names_strata_sasl_scram_users(mechanism: str) -> None:
    refused(sasl(**{"sasl.enabled.mechanisms": mechanism, SCRAM_KEY: None}), SCRAM_KEY)
    refused(sasl(**{"sasl.enabled.mechanisms": mechanism, SCRAM_KEY: " , "}), SCRAM_KEY)


def test_each_mechanism_needs_only_its_own_users() -> None:
    only_plain = KafkaServerConfig.from_properties(
        sasl(**{"sasl.enabled.mechanisms": "PLAIN", SCRAM_KEY: None}))
    assert only_plain.scram_users() == {}
    only_scram = KafkaServerConfig.from_properties(
        sasl(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512", JAAS_KEY: None}))
    assert only_scram.plain_users() == {}


@pytest.mark.parametrize("text", [
    f'{MODULE} required user_alice="alice-secret"',                      # no ';'
    f'{MODULE} user_alice="alice-secret";',                               # no control flag
    f'{MODULE} mandatory user_alice="alice-secret";',                     # a wrong flag
    f'{MODULE} required user_alice=;',                                    # no value
    f'{MODULE} required user_alice "alice-secret";',                      # no '='
    f'{JAAS} {JAAS}',                                                     # two modules
    'org.apache.kafka.common.security.scram.ScramLoginModule required user_alice="alice-secret";',
    f'{MODULE} required user_alice="alice-secret" # comment;',            # not a JAAS comment
    "",
])
def test_a_malformed_jaas_text_names_the_key_and_hides_it(text: str) -> None:
    error = refused(sasl(**{JAAS_KEY: text}), JAAS_KEY)
    assert error.value == "[hidden]"


def test_jaas_text_is_read_as_kafka_reads_it() -> None:
    entry = parse_jaas_config(JAAS_KEY, f"""
        // the brokers' users
        {MODULE} /* flags are case-insensitive */ REQUIRED
            username="admin" user_admin="a \\"quoted\\" pw\\\\" user_bare=bare-word.1
            user_alice = "x;y=z";""")
    assert (entry.login_module, entry.control_flag) == (MODULE, "required")
    assert entry.options == {"username": "admin", "user_admin": 'a "quoted" pw\\',
                             "user_bare": "bare-word.1", "user_alice": "x;y=z"}
    assert plain_users(JAAS_KEY, f"{MODULE} optional user_admin=\"p\" user_=\"x\";") == {
        "admin": "p"}


@pytest.mark.parametrize("text", ["alice", "alice:", ":pw", "alice:a,alice:b"])
def test_malformed_scram_users_name_the_key(text: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        scram_users(SCRAM_KEY, text)
    assert caught.value.key == SCRAM_KEY and caught.value.value == "[hidden]"


def test_scram_users_keep_colons_in_passwords() -> None:
    assert scram_users(SCRAM_KEY, " alice:a:b , bob:pw ") == {"alice": "a:b", "bob": "pw"}


def test_sasl_server_max_receive_size_and_failed_authentication_delay_are_checked() -> None:
    refused(sasl(**{"sasl.server.max.receive.size": "0"}), "sasl.server.max.receive.size")
    refused(sasl(**{"connection.failed.authentication.delay.ms": "-1"}),
            "connection.failed.authentication.delay.ms")


def test_advertised_listener_must_be_the_listener() -> None:
    refused(sasl(**{"advertised.listeners": "PLAINTEXT://broker:9092"}), "advertised.listeners")
    config = KafkaServerConfig.from_properties(
        sasl(**{"advertised.listeners": "SASL_PLAINTEXT://broker:9092"}))
    assert config.advertised_listener().host == "broker"


def test_plaintext_listener_needs_no_sasl_settings() -> None:
    config = KafkaServerConfig.from_properties({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert config.listener().name == "PLAINTEXT" and config.sasl_enabled_mechanisms is None


def test_credential_cache_salts_scram_passwords_per_mechanism() -> None:
    cache = CredentialCache.from_config(KafkaServerConfig.from_properties(sasl()))
    sha256 = cache.scram[ScramMechanism.SCRAM_SHA_256]["carol"]
    sha512 = cache.scram[ScramMechanism.SCRAM_SHA_512]["carol"]
    assert sha256.iterations == sha512.iterations == 4096
    assert len(sha256.stored_key) == 32 and len(sha512.stored_key) == 64
    assert sha256.salt != sha512.salt
    assert cache.server("GSSAPI") is None and cache.server("PLAIN") is not None
    assert "secret" not in repr(cache)
