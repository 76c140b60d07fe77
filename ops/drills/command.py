"""``strata drill NAME|all``: run failover drills and write their reports.

Without ``--address`` a drill starts a cluster of its own (a local Ray head, temporary
directories) and removes it afterwards; ``all`` shares one Ray head between its drills. With
``--address`` it joins that Ray cluster and drills the Strata cluster of ``--namespace`` (its own
topics only; ``disk-full`` and ``disk-fail`` start a small cluster of their own there, because
they need a directory on a file system they may fill or lock).

Each drill prints its table and writes its JSON report (``--report FILE``; by default
``./data/drills/<drill>-<time>.json``). Exit code: 0 when every drill passed (or was skipped
with a reason), 1 when any lost or duplicated an acknowledged record, failed a check or crashed,
2 for usage errors.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DEFAULT_REPORT_DIR = Path("data") / "drills"


def register(subparsers: argparse._SubParsersAction) -> None:
    from ops.drills import DRILLS

    parser = subparsers.add_parser(
        "drill", help="run a failover/recovery drill against a cluster and report any loss",
        description="Run one drill (or all of them in turn) with busy producers and cleaners, "
                    "verify every acknowledged record against the drill's own ledger, print a "
                    "table and write a JSON report. See ops/README.md, the runbook.")
    parser.add_argument("name", choices=[*DRILLS, "all"], metavar="NAME",
                        help=f"one of {', '.join(DRILLS)}, or all")
    parser.add_argument("--address", help="Ray address of a running cluster (default: start a "
                                          "local one with temporary directories)")
    parser.add_argument("--namespace", default="strata",
                        help="Strata namespace to drill with --address (default: strata)")
    parser.add_argument("--report", type=Path, metavar="FILE",
                        help="JSON report path (with all: a directory); default ./data/drills/")
    parser.add_argument("--workdir", type=Path, help="where temporary directories go")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the faults")
    parser.add_argument("--warmup-records", type=int, default=3000,
                        help="records acknowledged before the fault (default 3000)")
    parser.add_argument("--after-records", type=int, default=1000,
                        help="records acknowledged after the repair (default 1000)")
    parser.add_argument("--producers", type=int, default=2, help="concurrent producers (default 2)")
    parser.add_argument("--timeout", type=float, default=180.0,
                        help="seconds to wait for any condition (default 180)")
    parser.add_argument("--keep-topics", action="store_true",
                        help="keep the drill's topics on a cluster joined with --address")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import json
    import logging

    from ops.cli import ray_messages_to_stderr
    from ops.tools import UsageError
    from ops.drills import DRILLS, DrillOptions, run_drill
    from ops.drills.report import print_report, summary_table, write_report

    logging.basicConfig(level=logging.WARNING)
    ray_messages_to_stderr()      # stdout holds the reports alone
    names = list(DRILLS) if args.name == "all" else [args.name]
    if args.warmup_records <= 0 or args.after_records <= 0 or args.producers <= 0:
        raise UsageError("--warmup-records, --after-records and --producers must be positive")
    options = DrillOptions(address=args.address, namespace=args.namespace,
                           workdir=args.workdir, seed=args.seed,
                           warmup_records=args.warmup_records, after_records=args.after_records,
                           producers=args.producers, timeout_s=args.timeout,
                           keep_topics=args.keep_topics)
    owns_ray = False
    if args.address is None and len(names) > 1:
        import ray

        from cluster.runtime.head import head_system_config

        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
                 log_to_driver=False, _system_config=head_system_config())
        owns_ray = True
    stamp = time.strftime("%Y%m%d-%H%M%S")
    reports = []
    try:
        for name in names:
            report = run_drill(name, DRILLS[name], options)
            reports.append(report)
            target = _report_path(args.report, name, stamp, single=len(names) == 1)
            write_report(report, target)
            if args.json:
                print(json.dumps(report.to_json(), default=str))
            else:
                print_report(report)
                print(f"report: {target}")
    finally:
        if owns_ray:
            import ray
            ray.shutdown()
    if len(reports) > 1 and not args.json:
        summary_table(reports)
    return max(r.exit_code for r in reports)


def _report_path(given: Path | None, name: str, stamp: str, single: bool) -> Path:
    if given is not None and single:
        return given
    folder = given if given is not None else DEFAULT_REPORT_DIR
    return folder / f"{name}-{stamp}.json"
