"""Two Ray nodes on this host, each with its own log directory: node actors land next to their
disks, cleaners on their host, and produce and cleaning work across the nodes. The scenario runs
in a process of its own (tests/cluster/two_nodes.py): a second Ray cluster cannot share this
process with the session's ``ray.init``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def test_node_actors_land_next_to_their_disks_and_clean_across_two_ray_nodes(
        tmp_path: Path) -> None:
    before = {p.pid for p in psutil.process_iter()}
    result = subprocess.run([sys.executable, "-m", "tests.cluster.two_nodes", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert any(line.startswith("TWO-NODES OK ") for line in result.stdout.splitlines()), \
        result.stdout
    leftovers = [p for p in psutil.process_iter(["pid", "cmdline"])
                 if p.pid not in before and "strata-2n-" in " ".join(p.info["cmdline"] or [])]
    assert leftovers == [], "the two-node cluster left Ray processes behind"
