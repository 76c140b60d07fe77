"""group.initial.rebalance.delay.ms, ported from Kafka's GroupMetadataManagerTest
(testDelayInitialRebalance..., testResetRebalanceDelay...,
testDelayRebalanceUptoRebalanceTimeout)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.node.groups.harness import Harness, join_request

DELAY = 3000


def test_first_join_to_an_empty_group_waits_the_initial_delay(groups: Harness) -> None:
    future = groups.join(join_request(require_known_member_id=False))
    assert not future.done()
    groups.sleep(DELAY // 2)
    assert not future.done()
    groups.sleep(DELAY // 2 + 1)
    assert future.result(0).error_code == ErrorCode.none


def test_a_member_arriving_during_the_delay_extends_it(groups: Harness) -> None:
    request = join_request(require_known_member_id=False, rebalance_timeout_ms=DELAY * 3)
    first = groups.join(request)
    groups.sleep(DELAY - 1)
    second = groups.join(request)
    groups.sleep(2)
    groups.sleep(DELAY // 2 + 1)
    assert not first.done() and not second.done()
    groups.sleep(DELAY // 2)
    assert first.result(0).error_code == ErrorCode.none
    assert second.result(0).error_code == ErrorCode.none


def test_the_delay_is_bounded_by_the_rebalance_timeout(groups: Harness) -> None:
    request = join_request(require_known_member_id=False, rebalance_timeout_ms=DELAY * 2)
    first = groups.join(request)
    second = groups.join(request)
    groups.sleep(DELAY + 1)
    third = groups.join(request)
    groups.sleep(DELAY - 1)
    assert not any(f.done() for f in (first, second, third))
    groups.sleep(1)
    assert [f.result(0).error_code for f in (first, second, third)] == [ErrorCode.none] * 3
