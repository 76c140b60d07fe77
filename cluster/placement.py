"""Where a new partition goes: the directory with the most room (peers.md §3 row 9: not partition
counts alone, as Kafka does).

Order of preference, each a tie-break of the one before:

1. most free bytes on the directory's file system, where free bytes within ``tolerance`` (a
   fraction of the larger, default 1 %) count as equal — directories sharing one file system
   (every directory of a laptop or of this test machine) always tie here;
2. fewest bytes already held by the directory's partitions;
3. fewest partitions (this is the round-robin that spreads an empty cluster evenly);
4. directory name, so the choice is deterministic.

Each choice is counted before the next one is made, so one ``place`` call of many partitions
spreads them too. Offline directories are never chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

DEFAULT_TOLERANCE = 0.01


@dataclass(frozen=True)
class DirRoom:
    """What placement knows of one directory."""

    log_dir: str
    free_bytes: int
    log_bytes: int
    partitions: int
    online: bool = True


def place(rooms: list[DirRoom], count: int, *,
          tolerance: float = DEFAULT_TOLERANCE) -> list[str]:
    """The directory of each of ``count`` new partitions, in partition order."""
    live = {r.log_dir: r for r in rooms if r.online}
    if not live and count:
        raise ValueError("no online log directory to place partitions in")
    chosen: list[str] = []
    for _ in range(count):
        best = choose(list(live.values()), tolerance=tolerance)
        chosen.append(best.log_dir)
        live[best.log_dir] = replace(best, partitions=best.partitions + 1)
    return chosen


def choose(rooms: list[DirRoom], *, tolerance: float = DEFAULT_TOLERANCE) -> DirRoom:
    most_free = max(r.free_bytes for r in rooms)
    roomy = [r for r in rooms if r.free_bytes >= most_free * (1 - tolerance)]
    return min(roomy, key=lambda r: (r.log_bytes, r.partitions, r.log_dir))
