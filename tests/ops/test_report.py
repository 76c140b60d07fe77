"""The JSON report: its schema, and a pass that needs a clean verification."""

from __future__ import annotations

import json
from pathlib import Path

from ops.drills.ledger import Ledger, LogRecord, verify
from ops.drills.report import (
    SCHEMA,
    Check,
    DrillReport,
    print_report,
    schema_problems,
    write_report,
)


def report_with(lost: bool) -> DrillReport:
    ledger = Ledger()
    ledger.acknowledge("t", 0, 0, [(b"k", b"v0"), (b"k", b"v1")])
    log = [LogRecord(0, b"k", b"v0")] + ([] if lost else [LogRecord(1, b"k", b"v1")])
    report = DrillReport(drill="kill-node", started_at="2026-01-01T00:00:00+00:00")
    report.injections.append({"what": "kill -9", "target": "/d0", "at": 1.0})
    report.checks.append(Check("restarted", True, "pid 1 -> 2"))
    report.verification = verify(ledger, lambda t, p: log).to_json()
    report.ledger = ledger.summary()
    report.samples.append({"t": 0.0, "log_dirs": {}, "partitions": {}, "cleans": []})
    report.decide()
    return report


def test_a_clean_run_passes_and_follows_the_schema(tmp_path: Path) -> None:
    report = report_with(lost=False)
    assert report.status == "passed" and report.exit_code == 0
    path = write_report(report, tmp_path / "r" / "kill-node.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA and schema_problems(doc) == []
    assert doc["verification"]["lost"] == 0 and doc["checks"][0]["ok"] is True


def test_a_run_that_lost_a_record_fails_with_exit_code_1() -> None:
    report = report_with(lost=True)
    assert report.status == "failed" and report.exit_code == 1
    doc = report.to_json()
    assert schema_problems(doc) == [] and doc["verification"]["lost"] == 1
    doc["status"] = "passed"
    assert "passed without a clean verification" in schema_problems(doc)


def test_a_failing_check_fails_the_run_and_the_schema_refuses_strays() -> None:
    report = report_with(lost=False)
    report.checks.append(Check("came back", False, "still offline"))
    assert report.decide() == "failed"
    doc = report.to_json()
    doc["extra"] = 1
    del doc["samples"]
    assert schema_problems(doc) == ["missing key 'samples'", "unknown key 'extra'"]


def test_the_table_names_the_loss(capsys) -> None:
    from rich.console import Console

    console = Console(width=140, force_terminal=False)
    print_report(report_with(lost=True), console)
    out = capsys.readouterr().out
    assert "FAILED" in out and "lost records" in out and '"offset": 1' in out
