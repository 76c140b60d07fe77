"""Topic admin: CreateTopics (key 19, v2-7), CreatePartitions (key 37, v0-3), DeleteTopics
(key 20, v1-5) and DescribeConfigs (key 32, v1-4), through the ``BrokerView``.

CreateTopics, per topic (Kafka's ``ZkAdminManager``/``ControllerApis.createTopics``): a name
twice in one request is INVALID_REQUEST; an existing topic TOPIC_ALREADY_EXISTS; a name Kafka
refuses INVALID_TOPIC_EXCEPTION; partitions -1 take ``num.partitions``, below 1 otherwise
INVALID_PARTITIONS; a replication factor -1 takes 1 (``default.replication.factor``), any other
value above the number of brokers, or below 1, INVALID_REPLICATION_FACTOR; explicit assignments
together with a partition count or replication factor are INVALID_REQUEST, and each must name
exactly one live broker (INVALID_REPLICA_ASSIGNMENT); a config override with a null value, a key
that is no topic key or a value Kafka refuses INVALID_CONFIG.
``validate_only`` checks everything and creates nothing.

CreatePartitions: a topic named twice is INVALID_REQUEST, an unknown one
UNKNOWN_TOPIC_OR_PARTITION, a count not above the current one INVALID_PARTITIONS, assignments
that do not give each new partition one live broker INVALID_REPLICA_ASSIGNMENT.

DeleteTopics: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION. DescribeConfigs: topics (type 2)
report every key with DYNAMIC_TOPIC_CONFIG for an override and DEFAULT_CONFIG otherwise; the
broker (type 4, named by its node id) reports this server's settings as STATIC_BROKER_CONFIG;
``configuration_keys`` narrows the list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.codec import Request, build, response_class
from node.kafka.config import KEYS, SENSITIVE_KEYS, KafkaServerConfig
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.tls import KEYS as TLS_KEYS
from node.kafka.tls import SENSITIVE_KEYS as TLS_SENSITIVE_KEYS
from node.kafka.tls import TlsConfig
from node.kafka.versions import ApiKey
from storage import files
from storage.config import INTEGER_KEYS, TOPIC_KEYS, LogConfig
from storage.dotted_keys import LONG, to_properties
from storage.errors import InvalidConfigError, StorageError

DEFAULT_REPLICATION_FACTOR = 1
# Kafka's ConfigDef.Type as DescribeConfigs (v3+) reports it
UNKNOWN_TYPE, BOOLEAN_TYPE, STRING_TYPE, INT_TYPE, LONG_TYPE, DOUBLE_TYPE, LIST_TYPE = (
    0, 1, 2, 3, 5, 6, 7)
PASSWORD_TYPE = 9
TOPIC_CONFIG_TYPES = {"cleanup.policy": LIST_TYPE, "min.cleanable.dirty.ratio": DOUBLE_TYPE,
                      "preallocate": BOOLEAN_TYPE}
BROKER_CONFIG_TYPES = {"listeners": STRING_TYPE, "advertised.listeners": STRING_TYPE,
                       "sasl.enabled.mechanisms": LIST_TYPE,
                       "connections.max.idle.ms": LONG_TYPE}
TOPIC, BROKER = 2, 4                          # DescribeConfigs resource types
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def handle_create_topics(served: ServedDir, request: Request) -> Any:
    """The CreateTopics response to ``request``."""
    body = request.body
    view = served.view
    counts = Counter(topic.name for topic in body.topics)
    brokers = {b.node_id for b in view.brokers()}
    results = []
    for topic in body.topics:
        code, message, partitions = _check_topic(served, topic, counts, brokers)
        if code == ErrorCode.none and not body.validate_only:
            try:
                view.create_topic(topic.name, partitions,
                                  {c.name: c.value for c in topic.configs if c.value is not None})
            except StorageError as err:
                code, message = _config_or(err), str(err)
        results.append({"name": topic.name, "topic_id": None, "error_code": code,
                        "error_message": message,
                        "num_partitions": partitions if code == ErrorCode.none else -1,
                        "replication_factor": 1 if code == ErrorCode.none else -1,
                        "configs": None})
    return build(response_class(ApiKey.CREATE_TOPICS, request.api_version),
                 {"throttle_time": 0, "topics": results})


def _check_topic(served: ServedDir, topic: Any, counts: Counter[str],
                 brokers: set[int]) -> tuple[ErrorCode, str | None, int]:
    name = topic.name
    if counts[name] > 1:
        return ErrorCode.invalid_request, f"topic {name!r} is named more than once", -1
    try:
        files.validate_topic(name)
    except StorageError as err:
        return ErrorCode.invalid_topic_exception, str(err), -1
    if served.view.partition_count(name) is not None:
        return ErrorCode.topic_already_exists, f"topic {name!r} already exists", -1
    assignments = topic.assignments
    if assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return (ErrorCode.invalid_request, "both assignments and a partition count or "
                    "replication factor were given", -1)
        indexes = sorted(a.partition_index for a in assignments)
        if indexes != list(range(len(indexes))):
            return (ErrorCode.invalid_replica_assignment,
                    f"assigned partitions {indexes} are not 0..{len(indexes) - 1}", -1)
        for a in assignments:
            if len(a.broker_ids) != 1 or a.broker_ids[0] not in brokers:
                return (ErrorCode.invalid_replica_assignment,
                        f"partition {a.partition_index}: replicas {list(a.broker_ids)} are not "
                        f"one live broker of {sorted(brokers)}", -1)
        partitions = len(indexes)
    else:
        partitions = (served.config.num_partitions if topic.num_partitions == -1
                      else topic.num_partitions)
        if partitions < 1:
            return (ErrorCode.invalid_partitions,
                    f"number of partitions {topic.num_partitions} must be at least 1", -1)
        factor = (DEFAULT_REPLICATION_FACTOR if topic.replication_factor == -1
                  else topic.replication_factor)
        if factor < 1 or factor > len(brokers):
            return (ErrorCode.invalid_replication_factor,
                    f"replication factor {topic.replication_factor} is not between 1 and the "
                    f"{len(brokers)} live brokers", -1)
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        return (ErrorCode.invalid_config,
                "Null value not supported for topic configs: " + ",".join(nulls), -1)
    problem = topic_configs_problem(served.logdir.default_config,
                                    {c.name: c.value for c in topic.configs})
    if problem is not None:
        return ErrorCode.invalid_config, problem, -1
    return ErrorCode.none, None, partitions


def topic_configs_problem(default_config: LogConfig, overrides: Mapping[str, str]) -> str | None:
    """Why Kafka refuses ``overrides`` as a topic's config (INVALID_CONFIG), or None: a key that
    is no topic key (a broker key such as ``log.retention.ms`` too: Kafka's "Unknown topic config
    name"), else a value ``LogConfig`` refuses (its message names the key and the value)."""
    for key in overrides:
        if key not in TOPIC_KEYS:
            return f"Unknown topic config name: {key}"
    try:
        default_config.with_overrides(overrides)
    except InvalidConfigError as err:
        return str(err)
    return None


def _config_or(err: StorageError) -> ErrorCode:
    return ErrorCode.invalid_config if isinstance(err, InvalidConfigError) else error_code_for(err)


def handle_create_partitions(served: ServedDir, request: Request) -> Any:
    """The CreatePartitions response to ``request``."""
    body = request.body
    view = served.view
    counts = Counter(topic.name for topic in body.topics)
    brokers = {b.node_id for b in view.brokers()}
    results = []
    for topic in body.topics:
        current = view.partition_count(topic.name)
        code, message = ErrorCode.none, None
        if counts[topic.name] > 1:
            code, message = ErrorCode.invalid_request, f"topic {topic.name!r} is named twice"
        elif current is None:
            code, message = (ErrorCode.unknown_topic_or_partition,
                             f"topic {topic.name!r} does not exist")
        elif topic.count <= current:
            code, message = (ErrorCode.invalid_partitions,
                             f"topic {topic.name!r} has {current} partitions; the new count "
                             f"{topic.count} must be larger")
        elif topic.assignments is not None and (
                len(topic.assignments) != topic.count - current
                or any(len(a.broker_ids) != 1 or a.broker_ids[0] not in brokers
                       for a in topic.assignments)):
            code, message = (ErrorCode.invalid_replica_assignment,
                             f"the assignments must give each of the {topic.count - current} "
                             f"new partitions one live broker of {sorted(brokers)}")
        if code == ErrorCode.none and not body.validate_only:
            try:
                view.add_partitions(topic.name, topic.count)
            except StorageError as err:
                code, message = error_code_for(err), str(err)
        results.append({"name": topic.name, "error_code": code, "error_message": message})
    return build(response_class(ApiKey.CREATE_PARTITIONS, request.api_version),
                 {"throttle_time": 0, "results": results})


def handle_delete_topics(served: ServedDir, request: Request) -> Any:
    """The DeleteTopics response to ``request``."""
    view = served.view
    results = []
    for name in request.body.topic_names:
        if view.partition_count(name) is None:
            results.append({"name": name, "error_code": ErrorCode.unknown_topic_or_partition,
                            "error_message": f"topic {name!r} does not exist"})
            continue
        try:
            view.delete_topic(name)
            results.append({"name": name, "error_code": ErrorCode.none, "error_message": None})
        except StorageError as err:
            results.append({"name": name, "error_code": error_code_for(err),
                            "error_message": str(err)})
    return build(response_class(ApiKey.DELETE_TOPICS, request.api_version),
                 {"throttle_time": 0, "responses": results})


def handle_describe_configs(served: ServedDir, request: Request) -> Any:
    """The DescribeConfigs response to ``request``."""
    results = []
    for resource in request.body.resources:
        code, message, entries = _describe(served, resource.resource_type,
                                           resource.resource_name)
        keys = resource.configuration_keys
        if keys:
            entries = [e for e in entries if e["name"] in set(keys)]
        results.append({"error_code": code, "error_message": message,
                        "resource_type": resource.resource_type,
                        "resource_name": resource.resource_name, "configs": entries})
    return build(response_class(ApiKey.DESCRIBE_CONFIGS, request.api_version),
                 {"throttle_time": 0, "results": results})


def _describe(served: ServedDir, resource_type: int, name: str
              ) -> tuple[ErrorCode, str | None, list[dict[str, Any]]]:
    if resource_type == TOPIC:
        if served.view.partition_count(name) is None:
            return ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist", []
        return ErrorCode.none, None, [
            _entry(key, value, DYNAMIC_TOPIC_CONFIG if overridden else DEFAULT_CONFIG,
                   kind=topic_config_type(key))
            for key, (value, overridden) in sorted(served.view.topic_config(name).items())]
    if resource_type == BROKER:
        if name not in ("", str(served.view.node_id)):
            return (ErrorCode.invalid_request,
                    f"broker {name!r} is not this broker ({served.view.node_id})", [])
        settings = to_properties(served.config, KEYS)
        entries = [
            _entry(key, None if getattr(served.config, KEYS[key]) is None
                   or key in SENSITIVE_KEYS else value, STATIC_BROKER_CONFIG,
                   sensitive=key in SENSITIVE_KEYS, kind=broker_config_type(key))
            for key, value in settings.items()]
        if served.config.tls is not None:
            entries += _tls_entries(served.config.tls)
        return ErrorCode.none, None, sorted(entries, key=lambda entry: entry["name"])
    return (ErrorCode.invalid_request,
            f"resource type {resource_type} is not a topic (2) or a broker (4)", [])


def _tls_entries(tls: TlsConfig) -> list[dict[str, Any]]:
    """The ``ssl.*`` settings of a TLS listener, the passwords and the private key reported as
    sensitive, without their value (Kafka's PASSWORD type)."""
    entries = []
    for key, name in TLS_KEYS.items():
        value, sensitive = getattr(tls, name), key in TLS_SENSITIVE_KEYS
        entries.append(_entry(
            key, None if value is None or sensitive else str(value), STATIC_BROKER_CONFIG,
            sensitive=sensitive, kind=PASSWORD_TYPE if sensitive else
            LIST_TYPE if key in ("ssl.enabled.protocols", "ssl.cipher.suites") else STRING_TYPE))
    return entries


def _entry(key: str, value: str | None, source: int, sensitive: bool = False,
           kind: int = UNKNOWN_TYPE) -> dict[str, Any]:
    return {"name": key, "value": value, "read_only": source == STATIC_BROKER_CONFIG,
            "config_source": source, "is_sensitive": sensitive, "synonyms": [],
            "config_type": kind, "documentation": None}


def topic_config_type(key: str) -> int:
    """The type of topic config ``key`` as Kafka's LogConfig declares it."""
    if key in INTEGER_KEYS:
        return LONG_TYPE if INTEGER_KEYS[key][0] == LONG else INT_TYPE
    return TOPIC_CONFIG_TYPES.get(key, STRING_TYPE)


def broker_config_type(key: str) -> int:
    """The type of broker setting ``key`` as Kafka's KafkaConfig declares it (the settings
    holding passwords are PASSWORD)."""
    if key in SENSITIVE_KEYS:
        return PASSWORD_TYPE
    if key in BROKER_CONFIG_TYPES:
        return BROKER_CONFIG_TYPES[key]
    kind = str(KafkaServerConfig.__dataclass_fields__[KEYS[key]].type).split("|")[0].strip()
    return {"bool": BOOLEAN_TYPE, "int": INT_TYPE, "float": DOUBLE_TYPE}.get(kind, STRING_TYPE)
