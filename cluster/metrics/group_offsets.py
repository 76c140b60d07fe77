"""The node's side of the consumer lag (``cluster.metrics.consumer_lag``): the committed offsets
of the groups a directory's group coordinator has loaded. Apart from the lag's arithmetic, which
runs in the coordinator's process, because reading a group coordinator loads the protocol's
messages (kio), which that process never needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cluster.metrics.consumer_lag import CommittedOffset
from node.groups.messages import ErrorCode, OffsetFetch

if TYPE_CHECKING:   # annotations only
    from node.groups.coordinator import GroupCoordinator


def committed_offsets(coordinator: GroupCoordinator, timeout_s: float
                      ) -> tuple[CommittedOffset, ...]:
    """Every committed offset of every group the coordinator has loaded (a group loading or
    moving away contributes none; an offset of -1 is no offset)."""
    listings = coordinator.list_groups().result(timeout_s)
    fetches = [coordinator.fetch_offsets(OffsetFetch(listing.group_id, None))
               for listing in listings]
    found = []
    for fetch in fetches:
        result = fetch.result(timeout_s)
        if result.error_code != ErrorCode.none:
            continue
        found.extend(CommittedOffset(result.group_id, p.topic, p.partition, p.offset)
                     for p in result.partitions
                     if p.error_code == ErrorCode.none and p.offset >= 0)
    return tuple(found)
