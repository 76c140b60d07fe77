"""IncrementalAlterConfigs and AlterConfigs over the wire and through the clients' admin APIs:
topic overrides changed on the live logs and kept in ``topic-configs.json`` (a restarted server
reports and uses them), with Kafka's errors (``ConfigAdminManager``,
``ConfigurationControlManager``); CreateTopics overrides kept across a restart too."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kio.schema.errors import ErrorCode

from node import LogDir
from node.kafka.alter_configs import Operation, apply_operations
from node.kafka.server import KafkaServer
from node.kafka.versions import SUPPORTED, ApiKey
from storage.files import TOPIC_CONFIGS_FILE
from storage.record_format import Record
from tests.node.kafka.conftest import Serve, take_offline
from tests.node.kafka.wire import WireClient

TIMEOUT_S = 10
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def incremental(client: WireClient, *resources: dict[str, Any], validate_only: bool = False,
                version: int = 1) -> list[Any]:
    answer = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, {
        "resources": [{"resource_type": TOPIC, **r} for r in resources],
        "validate_only": validate_only})
    return list(answer.responses)


def legacy(client: WireClient, *resources: dict[str, Any], validate_only: bool = False,
           version: int = 2) -> list[Any]:
    answer = client.call(ApiKey.ALTER_CONFIGS, version, {
        "resources": [{"resource_type": TOPIC, **r} for r in resources],
        "validate_only": validate_only})
    return list(answer.responses)


def op(name: str, value: str | None, operation: int = SET) -> dict[str, Any]:
    """One AlterableConfig of an IncrementalAlterConfigs request."""
    return {"name": name, "config_operation": operation, "value": value}


def kept(logdir: LogDir) -> dict[str, Any]:
    path = logdir.path / TOPIC_CONFIGS_FILE
    return json.loads(path.read_text())["topics"] if path.exists() else {}


def described(admin: AdminClient, topic: str) -> dict[str, Any]:
    found = admin.describe_configs([ConfigResource("topic", topic)])
    return next(iter(found.values())).result(TIMEOUT_S)


def test_confluent_incremental_alter_configs_changes_the_live_logs(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("orders", [0, 1])
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    resource = ConfigResource("topic", "orders", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    for partition in (0, 1):
        config = logdir.log("orders", partition).config
        assert (config.retention_ms, config.cleanup_policy) == (1000, "delete,compact")
    configs = described(admin, "orders")
    assert configs["retention.ms"].value == "1000" and not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete,compact"
    assert kept(logdir) == {"orders": {"cleanup.policy": "delete,compact",
                                       "retention.ms": "1000"}}

    resource = ConfigResource("topic", "orders", incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "delete",
                    incremental_operation=AlterConfigOpType.SUBTRACT)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    config = logdir.log("orders", 0).config
    assert (config.retention_ms, config.cleanup_policy) == (
        logdir.default_config.retention_ms, "compact")
    configs = described(admin, "orders")
    assert configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "compact"
    assert kept(logdir) == {"orders": {"cleanup.policy": "compact"}}


def test_confluent_alter_configs_replaces_the_whole_override_set(
        logdir: LogDir, server: KafkaServer) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    admin.create_topics([NewTopic("orders", 1, 1, config={"retention.ms": "1000"})],
                        operation_timeout=5)["orders"].result(TIMEOUT_S)
    resource = ConfigResource("topic", "orders", set_config={"segment.ms": "60000"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # the client prefers incremental
        admin.alter_configs([resource])[resource].result(TIMEOUT_S)
    config = logdir.log("orders", 0).config
    assert (config.segment_ms, config.retention_ms) == (60000, logdir.default_config.retention_ms)
    assert kept(logdir) == {"orders": {"segment.ms": "60000"}}
    configs = described(admin, "orders")
    assert configs["retention.ms"].is_default and not configs["segment.ms"].is_default


def test_kafka_python_alter_configs_both_ways(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("events", [0])
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        changed = admin.alter_configs([KpConfigResource(
            ConfigResourceType.TOPIC, "events", configs={"retention.ms": "5000"})])
        assert logdir.log("events", 0).config.retention_ms == 5000
        replaced = admin.alter_configs([KpConfigResource(
            ConfigResourceType.TOPIC, "events", configs={"segment.bytes": "1048576"})],
            incremental=False)
    finally:
        admin.close()
    assert changed == replaced == {"topic": {"events": "OK"}}
    config = logdir.log("events", 0).config      # the client sent the kept override along
    assert (config.segment_bytes, config.retention_ms) == (1048576, 5000)
    assert kept(logdir) == {"events": {"retention.ms": "5000", "segment.bytes": "1048576"}}


def restarted(path: Path, serve: Serve, first: LogDir, server: KafkaServer
              ) -> tuple[LogDir, AdminClient]:
    """Stop ``server`` and close ``first``, then serve the directory at ``path`` again."""
    server.close()
    first.close()
    second = LogDir.open(path, start_tasks=False)
    again = serve(second)
    return second, AdminClient({"bootstrap.servers": again.bootstrap_servers})


def test_create_topics_overrides_survive_a_restart(tmp_path: Path, serve: Serve) -> None:
    first = LogDir.open(tmp_path / "d", start_tasks=False)
    server = serve(first)
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    admin.create_topics([NewTopic("created", 1, 1, config={"cleanup.policy": "compact"})],
                        operation_timeout=5)["created"].result(TIMEOUT_S)
    second, admin = restarted(tmp_path / "d", serve, first, server)
    try:
        created = described(admin, "created")
        assert created["cleanup.policy"].value == "compact"
        assert not created["cleanup.policy"].is_default
        assert second.log("created", 0).config.cleanup_policy == "compact"
    finally:
        second.close()


def test_altered_overrides_survive_a_restart(tmp_path: Path, serve: Serve) -> None:
    first = LogDir.open(tmp_path / "d", start_tasks=False)
    server = serve(first)
    first.create_logs("altered", [0])
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    resource = ConfigResource("topic", "altered", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    second, admin = restarted(tmp_path / "d", serve, first, server)
    try:
        altered = described(admin, "altered")
        assert altered["retention.ms"].value == "1000" and not altered["retention.ms"].is_default
        assert second.log("altered", 0).config.retention_ms == 1000
    finally:
        second.close()


def test_deleting_a_topic_drops_its_kept_overrides(logdir: LogDir, server: KafkaServer) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    admin.create_topics([NewTopic("gone", 1, 1, config={"retention.ms": "1000"})],
                        operation_timeout=5)["gone"].result(TIMEOUT_S)
    assert kept(logdir) == {"gone": {"retention.ms": "1000"}}
    admin.delete_topics(["gone"], operation_timeout=5)["gone"].result(TIMEOUT_S)
    assert kept(logdir) == {}
    admin.create_topics([NewTopic("gone", 1, 1)], operation_timeout=5)["gone"].result(TIMEOUT_S)
    assert logdir.log("gone", 0).config.retention_ms == logdir.default_config.retention_ms


def test_create_topics_refuses_broker_keys_and_null_values_and_validate_only_keeps_nothing(
        logdir: LogDir, server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": -1, "assignments": [],
             "configs": [{"name": key, "value": value}]}
            for name, key, value in (("fine", "retention.ms", "1000"),
                                     ("junk", "segment.bytes", "junk"),
                                     ("unknown", "no.such.key", "1"),
                                     ("broker", "log.retention.ms", "1"),
                                     ("null", "retention.ms", None))],
            "timeout": 5000, "validate_only": True})
    codes = {t.name: (t.error_code, t.error_message) for t in answer.topics}
    assert codes["fine"] == (ErrorCode.none, None)
    assert codes["junk"][0] == ErrorCode.invalid_config and "segment.bytes" in codes["junk"][1]
    assert codes["unknown"] == (ErrorCode.invalid_config,
                                "Unknown topic config name: no.such.key")
    assert codes["broker"] == (ErrorCode.invalid_config,
                               "Unknown topic config name: log.retention.ms")
    assert codes["null"] == (ErrorCode.invalid_config,
                             "Null value not supported for topic configs: retention.ms")
    assert not list(logdir.logs()) and kept(logdir) == {}


def test_alter_topic_configs_answer_kafkas_errors(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        answers = incremental(
            client,
            {"resource_name": "t", "configs": [op("no.such.key", "1")]},
            {"resource_name": "ghost", "configs": [op("retention.ms", "1")]},
            {"resource_name": "twice", "configs": []},
            {"resource_name": "twice", "configs": []},
            {"resource_name": "", "configs": [op("retention.ms", "1")]},
            {"resource_name": "bad name", "configs": [op("retention.ms", "1")]},
            {"resource_type": 3, "resource_name": "g", "configs": []})
        keys = [incremental(client, {"resource_name": "t", "configs": configs})[0]
                for configs in ([op("segment.bytes", "junk")],
                                [op("retention.ms", "1", APPEND)],
                                [op("retention.ms", "1"), op("retention.ms", "2")],
                                [op("retention.ms", None)],
                                [op("retention.ms", "1", 7)],
                                [op("log.retention.ms", "1")],
                                [op("cleanup.policy", "delete", SUBTRACT)])]
    assert [(a.resource_name, a.error_code) for a in answers] == [
        ("t", ErrorCode.invalid_config), ("ghost", ErrorCode.unknown_topic_or_partition),
        ("twice", ErrorCode.invalid_request), ("twice", ErrorCode.invalid_request),
        ("", ErrorCode.invalid_request), ("bad name", ErrorCode.invalid_topic_exception),
        ("g", ErrorCode.invalid_request)]
    assert answers[0].error_message == "Unknown topic config name: no.such.key"
    assert [a.error_code for a in keys] == [
        ErrorCode.invalid_config, ErrorCode.invalid_config, ErrorCode.invalid_request,
        ErrorCode.invalid_request, ErrorCode.invalid_request, ErrorCode.invalid_config,
        ErrorCode.invalid_config]
    assert "segment.bytes" in keys[0].error_message
    assert keys[1].error_message == ("Can't APPEND to key retention.ms because its type is "
                                     "not LIST.")
    assert "cleanup.policy" in keys[6].error_message      # nothing would be left of the list
    assert logdir.log("t", 0).config == logdir.default_config
    assert kept(logdir) == {}


def test_an_invalid_config_of_an_unknown_topic_is_invalid_config(server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answer, = incremental(client, {"resource_name": "ghost",
                                       "configs": [op("segment.bytes", "junk")]})
    assert answer.error_code == ErrorCode.invalid_config    # validated before existence


def test_validate_only_changes_nothing(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        checked = incremental(client, {"resource_name": "t",
                                       "configs": [op("retention.ms", "1000")]},
                              validate_only=True)
        replaced = legacy(client, {"resource_name": "t",
                                   "configs": [{"name": "retention.ms", "value": "1000"}]},
                          validate_only=True)
        refused = legacy(client, {"resource_name": "t",
                                  "configs": [{"name": "retention.ms", "value": "x"}]},
                         validate_only=True)
    assert [a.error_code for a in checked + replaced] == [ErrorCode.none, ErrorCode.none]
    assert refused[0].error_code == ErrorCode.invalid_config
    assert logdir.log("t", 0).config == logdir.default_config
    assert kept(logdir) == {}


def test_legacy_alter_configs_refuses_null_values_and_unknown_topics(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        answers = legacy(client,
                         {"resource_name": "t", "configs": [{"name": "retention.ms",
                                                             "value": None}]},
                         {"resource_name": "ghost", "configs": []})
    assert [a.error_code for a in answers] == [ErrorCode.invalid_request,
                                               ErrorCode.unknown_topic_or_partition]
    assert answers[0].error_message == "Null value not supported for : retention.ms"


def test_broker_configs_cannot_be_changed_dynamically(server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        answers = [incremental(client, {"resource_type": BROKER, "resource_name": name,
                                        "configs": configs})[0]
                   for name, configs in (("0", [op("num.partitions", "3")]),
                                         ("", [op("log.retention.ms", "3")]),
                                         ("7", []), ("zero", []),
                                         ("0", [op("num.partitions", None, DELETE)]))]
        replaced = legacy(client, {"resource_type": BROKER, "resource_name": "0",
                                   "configs": [{"name": "num.partitions", "value": "3"}]})
    assert [a.error_code for a in answers] == [ErrorCode.invalid_request] * 4 + [ErrorCode.none]
    assert answers[0].error_message == "Cannot update these configs dynamically: Set(num.partitions)"
    assert answers[2].error_message == "Unexpected broker id, expected 0, but received 7"
    assert answers[3].error_message == "Node id must be an integer, but it is: zero"
    assert replaced[0].error_code == ErrorCode.invalid_request


def test_confluent_incremental_alter_of_a_broker_config_fails_clearly(
        server: KafkaServer) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    resource = ConfigResource("broker", "0", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
        raised = None
    except KafkaException as err:
        raised = err.args[0]
    assert raised is not None and raised.code() == ErrorCode.invalid_request
    assert "Cannot update these configs dynamically" in raised.str()


def test_every_alter_configs_version_answers(logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    with WireClient(server.address) as client:
        for version in range(SUPPORTED[ApiKey.INCREMENTAL_ALTER_CONFIGS].min_version,
                             SUPPORTED[ApiKey.INCREMENTAL_ALTER_CONFIGS].max_version + 1):
            answer, = incremental(client, {"resource_name": "t", "configs": [
                op("retention.ms", str(1000 + version))]}, version=version)
            assert answer.error_code == ErrorCode.none
            assert logdir.log("t", 0).config.retention_ms == 1000 + version
        for version in range(SUPPORTED[ApiKey.ALTER_CONFIGS].min_version,
                             SUPPORTED[ApiKey.ALTER_CONFIGS].max_version + 1):
            answer, = legacy(client, {"resource_name": "t", "configs": [
                {"name": "retention.ms", "value": str(2000 + version)}]}, version=version)
            assert answer.error_code == ErrorCode.none
            assert logdir.log("t", 0).config.retention_ms == 2000 + version


def test_append_and_subtract_follow_kafkas_list_rules() -> None:
    """Kafka's ``testIncrementalAlterMultipleConfigValues``: APPEND starts from the effective
    value, adds only what is missing (an item already there is fine), SUBTRACT removes what is
    there (an item missing is fine)."""
    effective = {"cleanup.policy": "delete"}
    appended = apply_operations({}, effective, [
        Operation("cleanup.policy", APPEND, "compact,delete")])
    assert appended == {"cleanup.policy": "delete,compact"}
    assert apply_operations(appended, effective, [
        Operation("cleanup.policy", APPEND, "delete,compact")]) == appended
    subtracted = apply_operations(appended, effective, [
        Operation("cleanup.policy", SUBTRACT, "delete")])
    assert subtracted == {"cleanup.policy": "compact"}
    assert apply_operations(subtracted, effective, [
        Operation("cleanup.policy", SUBTRACT, "delete")]) == subtracted
    assert apply_operations(subtracted, effective, [
        Operation("cleanup.policy", DELETE, None),
        Operation("retention.ms", SET, "5")]) == {"retention.ms": "5"}


def test_an_override_equal_to_the_default_is_reported_as_an_override(
        logdir: LogDir, server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    default = str(logdir.default_config.retention_ms)
    with WireClient(server.address) as client:
        answer, = incremental(client, {"resource_name": "t",
                                       "configs": [op("retention.ms", default)]})
    assert answer.error_code == ErrorCode.none
    configs = described(AdminClient({"bootstrap.servers": server.bootstrap_servers}), "t")
    assert configs["retention.ms"].value == default and not configs["retention.ms"].is_default
    assert configs["retention.ms"].source == 1          # DYNAMIC_TOPIC_CONFIG, as in Kafka


def test_kafka_python_reset_configs_deletes_overrides(logdir: LogDir,
                                                      server: KafkaServer) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    admin.create_topics([NewTopic("t", 1, 1, config={"retention.ms": "1000",
                                                     "segment.ms": "60000"})],
                        operation_timeout=5)["t"].result(TIMEOUT_S)
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=5000)
    try:
        reset = client.reset_configs([KpConfigResource(ConfigResourceType.TOPIC, "t",
                                                       configs=["retention.ms"])])
    finally:
        client.close()
    assert reset == {"topic": {"t": "OK"}}
    config = logdir.log("t", 0).config
    assert (config.retention_ms, config.segment_ms) == (logdir.default_config.retention_ms,
                                                        60000)
    assert kept(logdir) == {"t": {"segment.ms": "60000"}}


def test_an_altered_retention_applies_to_the_live_log_at_once(logdir: LogDir,
                                                              server: KafkaServer) -> None:
    logdir.create_logs("t", [0])
    log = logdir.log("t", 0)
    for i in range(3):
        log.append([Record(value=b"v%d" % i, timestamp=logdir.clock.milliseconds())])
        log.roll()
    assert logdir.cleanup_logs() == 0
    with WireClient(server.address) as client:
        answer, = incremental(client, {"resource_name": "t",
                                       "configs": [op("retention.bytes", "0")]})
    assert answer.error_code == ErrorCode.none
    assert logdir.cleanup_logs() == 3
    assert log.log_start_offset == 3


def test_empty_requests_and_a_null_broker_value_answer_as_kafka(server: KafkaServer) -> None:
    """Kafka's ``testEmpty*AlterConfigsRequestWithKRaft`` and
    ``testInvalidLegacyAlterConfigsRequestWithKRaft``."""
    with WireClient(server.address) as client:
        assert incremental(client) == [] and legacy(client) == []
        answer, = legacy(client, {"resource_type": BROKER, "resource_name": "0",
                                  "configs": [{"name": "foo", "value": None}]},
                         validate_only=True, version=1)
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.invalid_request, "Null value not supported for : foo")


def test_an_alter_on_an_offline_directory_is_kafka_storage_error(
        logdir: LogDir, server: KafkaServer, tmp_path: Path) -> None:
    logdir.create_logs("t", [0])
    logdir.log("t", 0).append([Record(value=b"x", timestamp=1)])
    take_offline(logdir, "t", 0, tmp_path)
    with WireClient(server.address) as client:
        answer, = incremental(client, {"resource_name": "t",
                                       "configs": [op("retention.ms", "1000")]})
    assert answer.error_code == ErrorCode.kafka_storage_error
    assert kept(logdir) == {}
