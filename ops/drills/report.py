"""The drill report: one JSON document per drill run, and its table.

Schema ``strata-drill-report/1`` (every key always present)::

    schema        "strata-drill-report/1"
    drill         the drill's name ("kill-node", ...)
    status        "passed" | "failed" | "skipped" | "error"
    reason        why it was skipped or errored (null otherwise)
    started_at    ISO-8601 UTC time the drill started
    duration_s    seconds it ran
    cluster       {namespace, log_dirs, cleaners, started_by_drill, address}
    settings      the drill's knobs (sizes, seed, ...)
    injections    [{what, target, at, ...}]: each fault, where it went and when (s from start)
    checks        [{name, ok, detail}]: every property the drill asserted
    ledger        {acknowledged_records, acknowledged_batches, in_doubt_records, partitions,
                   compacted_topics}
    verification  {ok, partitions, log_records, acknowledged, lost, misplaced, duplicated,
                   phantom, in_doubt_present, in_doubt_absent, excused, examples}
                  (null when the drill stopped before verifying)
    producers     {producers, acked_batches, duplicates_dropped, retries, refused, gave_up,
                   errors, each}
    recovery      what the directories reported on their way back (load results, bytes and
                  records truncated), drill-specific keys
    samples       stats samples taken during the run (``ops.plot``; plotted by
                  ``strata stats --plot DIR --from-report FILE``)

A drill has passed when every check holds and verification found nothing lost, misplaced,
duplicated or invented. ``exit_code``: 0 passed or skipped, 1 otherwise.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "strata-drill-report/1"
STATUSES = ("passed", "failed", "skipped", "error")
KEYS = ("schema", "drill", "status", "reason", "started_at", "duration_s", "cluster", "settings",
        "injections", "checks", "ledger", "verification", "producers", "recovery", "samples")
LOSS_KEYS = ("lost", "misplaced", "duplicated", "phantom")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": bool(self.ok), "detail": self.detail}


@dataclass
class DrillReport:
    drill: str
    started_at: str
    status: str = "failed"
    reason: str | None = None
    duration_s: float = 0.0
    cluster: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    injections: list[dict[str, Any]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)
    verification: dict[str, Any] | None = None
    producers: dict[str, Any] = field(default_factory=dict)
    recovery: dict[str, Any] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)

    def decide(self) -> str:
        """The status from the checks and the verification (unless skipped or errored)."""
        if self.status in ("skipped", "error"):
            return self.status
        ok = all(c.ok for c in self.checks) and self.verification is not None \
            and bool(self.verification.get("ok"))
        self.status = "passed" if ok else "failed"
        return self.status

    @property
    def exit_code(self) -> int:
        return 0 if self.status in ("passed", "skipped") else 1

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "drill": self.drill, "status": self.status,
                "reason": self.reason, "started_at": self.started_at,
                "duration_s": round(self.duration_s, 3), "cluster": self.cluster,
                "settings": self.settings, "injections": self.injections,
                "checks": [c.to_json() for c in self.checks], "ledger": self.ledger,
                "verification": self.verification, "producers": self.producers,
                "recovery": self.recovery, "samples": self.samples}


def schema_problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with a report document (empty when it follows the schema)."""
    problems = [f"missing key {k!r}" for k in KEYS if k not in doc]
    problems += [f"unknown key {k!r}" for k in doc if k not in KEYS]
    if problems:
        return problems
    if doc["schema"] != SCHEMA:
        problems.append(f"schema is {doc['schema']!r}, not {SCHEMA!r}")
    if doc["status"] not in STATUSES:
        problems.append(f"status {doc['status']!r} is not one of {STATUSES}")
    if not isinstance(doc["duration_s"], (int, float)) or doc["duration_s"] < 0:
        problems.append("duration_s is not a non-negative number")
    for check in doc["checks"]:
        if set(check) != {"name", "ok", "detail"} or not isinstance(check["ok"], bool):
            problems.append(f"malformed check {check!r}")
    for injection in doc["injections"]:
        if not {"what", "target", "at"} <= set(injection):
            problems.append(f"injection without what/target/at: {injection!r}")
    v = doc["verification"]
    if v is not None:
        for key in ("ok", *LOSS_KEYS, "acknowledged", "log_records", "examples"):
            if key not in v:
                problems.append(f"verification lacks {key!r}")
    if doc["status"] == "passed":
        if v is None or not v.get("ok") or any(v.get(k) for k in LOSS_KEYS):
            problems.append("passed without a clean verification")
        if not all(c["ok"] for c in doc["checks"]):
            problems.append("passed with a failing check")
    for sample in doc["samples"]:
        if "t" not in sample:
            problems.append("a sample without t")
            break
    return problems


def write_report(report: DrillReport, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


def print_report(report: DrillReport, console: Any = None) -> None:
    """The report as rich tables: the checks, then loss and duplicates."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    colour = {"passed": "green", "skipped": "yellow"}.get(report.status, "red")
    table = Table(title=f"drill {report.drill}: [{colour}]{report.status.upper()}[/{colour}]"
                        f" in {report.duration_s:.1f} s", show_lines=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for injection in report.injections:
        table.add_row(f"inject: {injection['what']}", "", f"{injection['target']} "
                      f"at {injection['at']:.1f} s")
    for check in report.checks:
        table.add_row(check.name, "[green]ok[/green]" if check.ok else "[red]FAILED[/red]",
                      check.detail)
    v = report.verification
    if v is not None:
        for key in LOSS_KEYS:
            table.add_row(f"{key} records", "[green]0[/green]" if not v[key]
                          else f"[red]{v[key]}[/red]",
                          "" if not v[key] else json.dumps(v["examples"].get(key, [])[:3]))
        table.add_row("acknowledged records checked", str(v["acknowledged"]),
                      f"{v['log_records']} records read back from {v['partitions']} partitions; "
                      f"in doubt: {v['in_doubt_present']} present, {v['in_doubt_absent']} absent"
                      + (f"; destroyed on purpose: {v['excused']}" if v["excused"] else ""))
    if report.reason:
        table.add_row("reason", "", report.reason)
    console.print(table)


def summary_table(reports: list[DrillReport], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title="strata drill all")
    for column in ("drill", "status", "seconds", "acknowledged", "lost", "duplicated", "note"):
        table.add_column(column)
    for r in reports:
        v = r.verification or {}
        colour = {"passed": "green", "skipped": "yellow"}.get(r.status, "red")
        failed = [c.name for c in r.checks if not c.ok]
        table.add_row(r.drill, f"[{colour}]{r.status}[/{colour}]", f"{r.duration_s:.1f}",
                      str(v.get("acknowledged", "-")), str(v.get("lost", "-")),
                      str(v.get("duplicated", "-")),
                      r.reason or (", ".join(failed) if failed else ""))
    console.print(table)
