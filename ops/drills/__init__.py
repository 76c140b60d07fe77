"""Failover and recovery drills (``strata drill NAME|all``): each runs against a live cluster with
busy producers and cleaners, injects one kind of fault, verifies every partition against its own
ledger of acknowledged records, and ends with a report (``ops.drills.report``). ``ops/README.md``
is the runbook.

``DRILLS`` maps each name to its function, in the order ``strata drill all`` runs them. Importing
this package is cheap (no ray, no storage): the drill modules import those inside their functions.
"""

from __future__ import annotations

from ops.drills.base import Drill, DrillOptions, run_drill
from ops.drills.coordinators import group_coordinator, transaction_coordinator
from ops.drills.disks import corrupt, disk_fail, disk_full, torn_write
from ops.drills.moves import move
from ops.drills.processes import kill_cleaner, kill_coordinator, kill_node, restart_all

DRILLS: dict[str, Drill] = {
    "kill-node": kill_node,
    "kill-cleaner": kill_cleaner,
    "kill-coordinator": kill_coordinator,
    "disk-full": disk_full,
    "disk-fail": disk_fail,
    "torn-write": torn_write,
    "corrupt": corrupt,
    "restart-all": restart_all,
    "move": move,
    "group-coordinator": group_coordinator,
    "transaction-coordinator": transaction_coordinator,
}

__all__ = ["DRILLS", "DrillOptions", "run_drill"]
