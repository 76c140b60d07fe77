"""FindCoordinator: every key is COORDINATOR_NOT_AVAILABLE (groups and transactions are not
served over the protocol yet), in the single-key form (v0-3) and the batched one (v4); an
unknown key type is INVALID_REQUEST."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from node.kafka.server import KafkaServer
from node.kafka.versions import ApiKey
from tests.node.kafka.wire import WireClient


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_group_coordinator_is_not_available(server: KafkaServer, version: int) -> None:
    values = {"key": "g1"} if version == 0 else {"key": "g1", "key_type": 0}
    with WireClient(server.address) as client:
        answer = client.call(ApiKey.FIND_COORDINATOR, version, values)
    assert answer.error_code == ErrorCode.coordinator_not_available
    assert answer.node_id == -1
    if version >= 1:
        assert "not served" in answer.error_message


def test_the_batched_form_answers_every_key_and_refuses_an_unknown_key_type(
        server: KafkaServer) -> None:
    with WireClient(server.address) as client:
        groups = client.call(ApiKey.FIND_COORDINATOR, 4,
                             {"key_type": 0, "coordinator_keys": ["a", "b"]})
        txns = client.call(ApiKey.FIND_COORDINATOR, 4,
                           {"key_type": 1, "coordinator_keys": ["tx"]})
        odd = client.call(ApiKey.FIND_COORDINATOR, 4,
                          {"key_type": 7, "coordinator_keys": ["x"]})
    assert [(c.key, c.error_code) for c in groups.coordinators] == [
        ("a", ErrorCode.coordinator_not_available), ("b", ErrorCode.coordinator_not_available)]
    assert [c.error_code for c in txns.coordinators] == [ErrorCode.coordinator_not_available]
    assert [c.error_code for c in odd.coordinators] == [ErrorCode.invalid_request]
