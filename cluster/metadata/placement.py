"""Where a new partition goes: spread over the directories in proportion to their room.

Kafka places a new log in the directory holding the fewest partitions; on disks of unequal size
that fills the small disk as fast as the large one. Placing by "most free bytes" instead sends
every new partition to the emptiest disk until it is as full as the others: the opposite of
per-disk parallelism. Strata does neither:

- **A share of the room.** Each online directory's *share* is the free bytes of its file system,
  divided among the directories on that file system (directories sharing one disk share its
  room). A directory gets new partitions in proportion to its share: the next partition goes to
  the directory with the smallest ``(partitions it holds + 1) / share``, a weighted round robin,
  so equal disks take turns (Kafka's spread) and a disk with five times the room takes about
  five times the partitions, never all of them.
- **A topic spreads first.** The count that decides is the topic's own partitions in each
  directory; the partitions of every topic break ties, then the bytes held, then the name (so the
  choice is deterministic). A new topic therefore lands on every directory that has room, even
  when older topics are unevenly placed.
- **A nearly full file system takes nothing.** A directory whose file system has less than
  ``NEARLY_FULL_FRACTION`` of its size free gets no new partition while another directory has
  room; when every directory is nearly full, the shares decide among all of them.
- Offline directories are never chosen.

Each choice is counted before the next one is made, so one ``place`` call of many partitions
spreads them too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

NEARLY_FULL_FRACTION = 0.05


@dataclass(frozen=True)
class DirRoom:
    """What placement knows of one directory.

    ``file_system`` names the file system holding the directory (host and device): directories
    with the same non-empty name share its ``free_bytes``. ``total_bytes`` is that file system's
    size (0 when unknown: never counted as nearly full).
    """

    log_dir: str
    free_bytes: int
    log_bytes: int
    partitions: int
    online: bool = True
    total_bytes: int = 0
    file_system: str = ""

    @property
    def nearly_full(self) -> bool:
        return self.total_bytes > 0 and self.free_bytes < self.total_bytes * NEARLY_FULL_FRACTION


def place(rooms: list[DirRoom], count: int, *,
          topic_partitions: Mapping[str, int] | None = None) -> list[str]:
    """The directory of each of ``count`` new partitions of one topic, in partition order.

    ``topic_partitions`` counts the partitions the topic already has in each directory (empty for
    a new topic). Raises ``ValueError`` when no directory is online.
    """
    live = [r for r in rooms if r.online]
    if not live:
        if count:
            raise ValueError("no online log directory to place partitions in")
        return []
    candidates = [r for r in live if not r.nearly_full] or live
    shares = _shares(candidates)
    mine = Counter({d: n for d, n in (topic_partitions or {}).items()})
    held = Counter({r.log_dir: r.partitions for r in candidates})
    by_dir = {r.log_dir: r for r in candidates}
    chosen: list[str] = []
    for _ in range(count):
        best = min(by_dir, key=lambda d: (Fraction(mine[d] + 1, shares[d]),
                                          Fraction(held[d] + 1, shares[d]),
                                          by_dir[d].log_bytes, d))
        chosen.append(best)
        mine[best] += 1
        held[best] += 1
    return chosen


def _shares(rooms: list[DirRoom]) -> dict[str, int]:
    """Each directory's share of its file system's free bytes (at least 1, so a full disk that
    is the only choice still takes partitions)."""
    sharing = Counter(r.file_system for r in rooms if r.file_system)
    return {r.log_dir: max(1, r.free_bytes // (sharing[r.file_system] if r.file_system else 1))
            for r in rooms}
