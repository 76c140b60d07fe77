"""Every drill at a small size on the session's Ray head: each must pass with zero loss and zero
duplicates (or be skipped with a reason where the machine cannot mount a tmpfs or chattr), and
write a report that follows the schema. A drill fed a record that was never stored must fail."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ops.drills import DRILLS, DrillOptions, run_drill
from ops.drills.report import schema_problems, write_report


@pytest.mark.parametrize("name", list(DRILLS))
def test_drill_reports_no_loss(name: str, drill_options: DrillOptions, tmp_path: Path) -> None:
    report = run_drill(name, DRILLS[name], drill_options)
    doc = json.loads(write_report(report, tmp_path / f"{name}.json").read_text())
    assert schema_problems(doc) == []
    if report.status == "skipped":
        assert name in ("disk-full", "disk-fail") and report.reason
        pytest.skip(report.reason)
    failed = [c.to_json() for c in report.checks if not c.ok]
    assert report.status == "passed", (report.reason, failed, doc["verification"])
    v = doc["verification"]
    assert v["lost"] == v["duplicated"] == v["misplaced"] == v["phantom"] == 0
    assert v["acknowledged"] >= drill_options.warmup_records
    assert doc["injections"] and doc["samples"]


def test_a_drill_reports_loss_when_an_acknowledged_record_is_missing(
        drill_options: DrillOptions) -> None:
    def lossy(ctx) -> None:
        ctx.open_env()
        ctx.setup()
        ctx.start_producers()
        ctx.wait_acked(100)
        ctx.stop_producers()
        # a record the ledger says was acknowledged at the log end, never written
        topic = ctx.log_topic
        end = ctx.env.cluster.offsets(topic, 0)[1]
        ctx.ledger.acknowledge(topic, 0, end, [(b"ghost", b"never stored")])
        ctx.finish()

    report = run_drill("lossy", lossy, drill_options)
    assert report.status == "failed" and report.exit_code == 1
    assert report.verification["lost"] == 1
    assert report.verification["examples"]["lost"][0]["value"] == "never stored"


def test_the_drill_command_parses_names_and_writes_the_report_path(tmp_path: Path) -> None:
    from ops.drills import command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    args = parser.parse_args(["drill", "all", "--report", str(tmp_path)])
    assert args.handler is command.run and args.name == "all"
    assert command._report_path(tmp_path, "kill-node", "s", single=False) == \
        tmp_path / "kill-node-s.json"
    assert command._report_path(None, "corrupt", "s", single=True) == \
        command.DEFAULT_REPORT_DIR / "corrupt-s.json"
    with pytest.raises(SystemExit):
        parser.parse_args(["drill", "no-such-drill"])
