"""The report of ``strata recover``: the JSON document (also ``<DIR>/recovery-report.json``) and
its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ops.tools.output import human_bytes, json_line
from ops.tools.recover_check import DirCheck, QUARANTINE, REBUILD, TRUNCATE


REPORT_NAME = "recovery-report.json"
REPORT_VERSION = 1


def build_report(result: DirCheck, *, dry_run: bool, started_ms: int,
                 finished_ms: int) -> dict[str, Any]:
    """The report document (also ``recovery-report.json``)."""
    partitions = result.partitions
    findings = [f for _, f in result.all_findings()]
    if dry_run or not result.needs_repair:
        status = "needs-repair" if result.needs_repair else "healthy"
    else:
        status = "repaired" if all(p.status != "failed" for p in partitions) else "failed"
    return {
        "version": REPORT_VERSION, "logDir": str(result.directory), "dryRun": dry_run,
        "status": status, "startedMs": started_ms, "finishedMs": finished_ms,
        "summary": {
            "partitions": len(partitions),
            "partitionsNeedingRepair": sum(p.needs_repair for p in partitions),
            "segments": sum(p.segments for p in partitions),
            "bytes": sum(p.bytes for p in partitions),
            "truncatedBytes": sum(f.bytes for f in findings if f.action == TRUNCATE)
            + sum(f.bytes for f in findings if f.kind == "after-truncation"),
            "truncatedRecords": sum(f.records for f in findings if f.action == TRUNCATE)
            + sum(f.records for f in findings if f.kind == "after-truncation"),
            "indexesToRebuild": sum(f.action == REBUILD for f in findings),
            "tempFiles": sum(f.kind == "temp-file" for f in findings),
            "quarantine": sum(f.action in (TRUNCATE, QUARANTINE) for f in findings)},
        "findings": [f.to_json() for f in result.findings],
        "skipped": result.skipped,
        "partitions": [p.to_json() for p in partitions]}


def _write_report(path: Path, report: dict[str, Any]) -> None:
    from storage.durable import atomic_write

    atomic_write(path, (json_line(report) + "\n").encode("utf-8"))


def print_report(report: dict[str, Any]) -> None:
    from ops.tools.output import console, print_table

    out = console()
    rows = [(p["partition"], f["file"], f["position"], f["message"], f["action"])
            for p in [{"partition": "", "findings": report["findings"]}, *report["partitions"]]
            for f in p["findings"]]
    if rows:
        state = "dry run: nothing changed" if report["dryRun"] else "repaired"
        print_table(out, f"{report['logDir']}: {len(rows)} findings ({state})",
                    ("partition", "file", "position", "problem", "action"), rows,
                    wrap=("problem",))
    s = report["summary"]
    out.print(f"{report['logDir']}: {report['status']}: {s['partitions']} partitions, "
              f"{s['segments']} segments, {human_bytes(s['bytes'])} checked", markup=False)
    if s["truncatedBytes"] or s["indexesToRebuild"] or s["tempFiles"] or s["quarantine"]:
        words = (("would truncate", "rebuild", "remove", "quarantine") if report["dryRun"]
                 else ("truncated", "rebuilt", "removed", "quarantined"))
        out.print(f"{words[0]} {s['truncatedBytes']} bytes ({s['truncatedRecords']} records), "
                  f"{words[1]} {s['indexesToRebuild']} damaged or missing indexes, {words[2]} "
                  f"{s['tempFiles']} temporary files, {words[3]} {s['quarantine']} files",
                  markup=False)
    for skipped in report["skipped"]:
        out.print(f"skipped {skipped['directory']}: {skipped['reason']}", markup=False)
    for partition in report["partitions"]:
        for moved in (partition["repair"] or {}).get("quarantined", []):
            out.print(f"kept {moved['file']} from position {moved['position']} in "
                      f"{moved['movedTo']}", markup=False)
        if partition["status"] == "failed":
            repair = partition["repair"]
            why = repair.get("error") or json_line(repair["remaining"])
            out.print(f"{partition['partition']}: not repaired: {why}", markup=False,
                      style="bold red")
    if not report["dryRun"]:
        out.print(f"report: {Path(report['logDir']) / REPORT_NAME}", markup=False)
