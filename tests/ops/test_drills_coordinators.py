"""The coordinator drills at the small size: a consumer group's members (confluent-kafka) go on
through kills -9 of the node hosting the group's coordinator mid-rebalance and mid-commit, and a transactional producer
(librdkafka) through a kill -9 of the coordinator actor, with what each drill checks passing."""

from __future__ import annotations

import pytest

from ops.drills import DRILLS, DrillOptions, run_drill
from ops.drills.report import Check, DrillReport


def _passed(name: str, options: DrillOptions) -> tuple[dict[str, Check], DrillReport]:
    """Run the drill; its checks by name and its report, once it passed."""
    report = run_drill(name, DRILLS[name], options)
    failed = [c.to_json() for c in report.checks if not c.ok]
    assert report.status == "passed", (report.reason, failed, report.verification)
    assert report.injections
    return {c.name: c for c in report.checks}, report


@pytest.mark.slow
def test_a_consumer_group_processes_every_record_through_kills_of_its_coordinator(
        drill_options: DrillOptions) -> None:
    checks, report = _passed("group-coordinator", drill_options)
    assert [i["what"] for i in report.injections] == [
        "kill -9 of the node actor hosting the group's coordinator mid-rebalance",
        "kill -9 of the node actor hosting the group's coordinator mid-commit"]
    assert checks["every record of the topic was processed at least once"].ok
    assert checks["no partition's committed offset went backwards"].ok
    assert checks["the final committed offsets are the log end offsets"].ok
    assert report.recovery["records"] == report.verification["acknowledged"] > 0
    assert report.verification["lost"] == report.verification["duplicated"] == 0


@pytest.mark.slow
def test_a_transactional_producer_commits_every_transaction_once_through_a_kill_of_the_coordinator(
        drill_options: DrillOptions) -> None:
    checks, report = _passed("transaction-coordinator", drill_options)
    assert checks["the producer finished its loop"].ok
    assert checks["no transaction left open: the last stable offset is the log end"].ok
    v = report.verification
    assert v["acknowledged"] == drill_options.warmup_records + drill_options.after_records
    assert v["log_records"] == v["acknowledged"]
    assert v["lost"] == v["duplicated"] == v["phantom"] == 0
