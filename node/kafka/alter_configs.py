"""IncrementalAlterConfigs (key 44, v0-1) and AlterConfigs (key 33, v0-2): change a topic's
config overrides through the ``BrokerView`` (``alter_topic_config``: kept durably, applied to the
live logs).

Per resource, in Kafka's order (``ConfigAdminManager.preprocess``, then the controller's
``ConfigurationControlManager`` and ``ControllerConfigurationValidator``):

* a resource named twice in one request: INVALID_REQUEST for both; a key twice in one resource:
  INVALID_REQUEST; a null value (for IncrementalAlterConfigs, outside a DELETE): INVALID_REQUEST;
* a topic (type 2): an empty name INVALID_REQUEST, a name Kafka refuses INVALID_TOPIC_EXCEPTION.
  The new override set is the current one with the operations applied (IncrementalAlterConfigs:
  SET 0, DELETE 1, APPEND 2 and SUBTRACT 3, the last two on list keys only, such as
  ``cleanup.policy``, else INVALID_CONFIG; another operation INVALID_REQUEST), or the request's
  configs alone (AlterConfigs replaces the whole set: a key left out returns to its default).
  A key that is no topic key, or a value Kafka refuses, is INVALID_CONFIG naming the key; then a
  topic no broker holds is UNKNOWN_TOPIC_OR_PARTITION. ``validate_only`` checks everything and
  changes nothing;
* a broker (type 4, named by its node id or empty for the cluster default; another id or a
  name that is no integer is INVALID_REQUEST): none of this server's settings can change while
  it runs, so a change that leaves any key set is INVALID_REQUEST "Cannot update these configs
  dynamically", Kafka's answer for a static broker key (DELETE of keys never set changes
  nothing and succeeds);
* any other resource type (broker loggers, 8, included): INVALID_REQUEST.

Alterations of this process are made one at a time (``_ALTERING``), as Kafka's controller applies
them, so two connections changing one topic at once cannot lose either change (each reads the
current overrides and writes the whole new set).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from node.kafka.admin import BROKER, TOPIC, topic_configs_problem
from node.kafka.codec import Request, build, response_class
from node.kafka.context import ServedDir
from node.kafka.errors import error_code_for
from node.kafka.versions import ApiKey
from storage import files
from storage.errors import InvalidConfigError, StorageError

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
LIST_KEYS = frozenset({"cleanup.policy"})      # the topic keys of type LIST we know
_ALTERING = threading.Lock()


@dataclass(frozen=True, slots=True)
class Operation:
    """One change of one key: ``operation`` (SET, DELETE, APPEND, SUBTRACT) with ``value``."""

    name: str
    operation: int
    value: str | None


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer for one resource: ``error_code`` and its message (None for NONE)."""

    error_code: ErrorCode
    message: str | None = None


OK = Outcome(ErrorCode.none)


class _Refused(Exception):
    """A resource answered with ``outcome`` (control flow inside this module only)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.outcome = Outcome(code, message)


def handle_incremental_alter_configs(served: ServedDir, request: Request) -> Any:
    """The IncrementalAlterConfigs response to ``request``."""
    body = request.body
    changes = [[Operation(c.name, c.config_operation, c.value) for c in r.configs]
               for r in body.resources]
    outcomes = _alter(served, body.resources, changes, body.validate_only, incremental=True)
    return _response(ApiKey.INCREMENTAL_ALTER_CONFIGS, request, body.resources, outcomes)


def handle_alter_configs(served: ServedDir, request: Request) -> Any:
    """The AlterConfigs response to ``request``."""
    body = request.body
    changes = [[Operation(c.name, SET, c.value) for c in r.configs] for r in body.resources]
    outcomes = _alter(served, body.resources, changes, body.validate_only, incremental=False)
    return _response(ApiKey.ALTER_CONFIGS, request, body.resources, outcomes)


def _response(key: ApiKey, request: Request, resources: Iterable[Any],
              outcomes: list[Outcome]) -> Any:
    return build(response_class(key, request.api_version), {
        "throttle_time": 0,
        "responses": [{"error_code": o.error_code, "error_message": o.message,
                       "resource_type": r.resource_type, "resource_name": r.resource_name}
                      for r, o in zip(resources, outcomes)]})


def _alter(served: ServedDir, resources: Any, changes: list[list[Operation]],
           validate_only: bool, incremental: bool) -> list[Outcome]:
    named = Counter((r.resource_type, r.resource_name) for r in resources)
    outcomes = []
    for resource, operations in zip(resources, changes):
        if named[(resource.resource_type, resource.resource_name)] > 1:
            outcomes.append(Outcome(ErrorCode.invalid_request,
                                    "Each resource must appear at most once."))
            continue
        try:
            with _ALTERING:
                outcomes.append(_alter_one(served, resource.resource_type,
                                           resource.resource_name, operations, validate_only,
                                           incremental))
        except _Refused as refused:
            outcomes.append(refused.outcome)
        except StorageError as err:          # the directory went offline, for one
            outcomes.append(Outcome(error_code_for(err), str(err)))
    return outcomes


def _alter_one(served: ServedDir, resource_type: int, name: str, operations: list[Operation],
               validate_only: bool, incremental: bool) -> Outcome:
    if any(n > 1 for n in Counter(op.name for op in operations).values()):
        raise _Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
    nulls = [op.name for op in operations
             if op.value is None and not (incremental and op.operation == DELETE)]
    if nulls:
        raise _Refused(ErrorCode.invalid_request,
                       "Null value not supported for : " + ", ".join(nulls))
    if resource_type == TOPIC:
        return _alter_topic(served, name, operations, validate_only, incremental)
    if resource_type == BROKER:
        return _alter_broker(served, name, operations)
    raise _Refused(ErrorCode.invalid_request, f"Unknown resource type {resource_type}")


def _alter_topic(served: ServedDir, name: str, operations: list[Operation],
                 validate_only: bool, incremental: bool) -> Outcome:
    if not name:
        raise _Refused(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    try:
        files.validate_topic(name)
    except StorageError as err:
        raise _Refused(ErrorCode.invalid_topic_exception, str(err)) from None
    view = served.view
    exists = view.partition_count(name) is not None
    current = view.topic_config(name) if exists else {}
    overrides = {k: v for k, (v, overridden) in current.items() if overridden}
    if incremental:
        effective = {k: v for k, (v, _) in current.items()} or \
            served.logdir.default_config.to_properties()
        updated = apply_operations(overrides, effective, operations)
    else:
        updated = {op.name: op.value or "" for op in operations}
    check_topic_overrides(served, updated)
    if not exists:
        raise _Refused(ErrorCode.unknown_topic_or_partition,
                       f"topic {name!r} does not exist")
    if not validate_only:
        try:
            view.alter_topic_config(name, updated)
        except StorageError as err:
            code = (ErrorCode.invalid_config if isinstance(err, InvalidConfigError)
                    else error_code_for(err))
            raise _Refused(code, str(err)) from None
    return OK


def apply_operations(overrides: Mapping[str, str], effective: Mapping[str, str],
                     operations: Iterable[Operation]) -> dict[str, str]:
    """``overrides`` with ``operations`` applied (Kafka's ``incrementalAlterConfigResource``):
    SET replaces, DELETE drops the override, APPEND adds the comma-separated items not in the
    list yet and SUBTRACT removes them, starting from the override, else from the ``effective``
    value. ``_Refused`` for an unknown operation or APPEND/SUBTRACT on a key that is no list."""
    updated = dict(overrides)
    for op in operations:
        if op.operation == SET:
            updated[op.name] = op.value or ""
        elif op.operation == DELETE:
            updated.pop(op.name, None)
        elif op.operation in (APPEND, SUBTRACT):
            if op.name not in LIST_KEYS:
                raise _Refused(ErrorCode.invalid_config,
                               f"Can't {OPERATION_NAMES[op.operation]} to key {op.name} because "
                               f"its type is not LIST.")
            base = updated.get(op.name, effective.get(op.name))
            items = [p for p in (base or "").split(",") if p]
            given = (op.value or "").split(",")
            if op.operation == APPEND:
                items += [v for v in dict.fromkeys(given) if v not in items]
            else:
                for v in given:
                    if v in items:
                        items.remove(v)
            updated[op.name] = ",".join(items)
        else:
            raise _Refused(ErrorCode.invalid_request,
                           f"Unknown operations type {op.operation}")
    return updated


def check_topic_overrides(served: ServedDir, overrides: Mapping[str, str]) -> None:
    """``_Refused`` with INVALID_CONFIG naming the key for a key that is no topic key (a broker
    key such as ``log.retention.ms`` included) or a value Kafka refuses."""
    problem = topic_configs_problem(served.logdir.default_config, overrides)
    if problem is not None:
        raise _Refused(ErrorCode.invalid_config, problem)


def _alter_broker(served: ServedDir, name: str, operations: list[Operation]) -> Outcome:
    node_id = served.view.node_id
    if name:
        try:
            asked = int(name)
        except ValueError:
            raise _Refused(ErrorCode.invalid_request,
                           f"Node id must be an integer, but it is: {name}") from None
        if asked != node_id:
            raise _Refused(ErrorCode.invalid_request,
                           f"Unexpected broker id, expected {node_id}, but received {name}")
    for op in operations:
        if op.operation not in OPERATION_NAMES:
            raise _Refused(ErrorCode.invalid_request,
                           f"Unknown operations type {op.operation}")
    kept = sorted({op.name for op in operations if op.operation != DELETE})
    if kept:
        raise _Refused(ErrorCode.invalid_request,
                       f"Cannot update these configs dynamically: Set({', '.join(kept)})")
    return OK
