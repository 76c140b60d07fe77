"""``LogAppendInfo``, what one append did: the answer of every append RPC. It has a module of its
own, with no imports, so that a client unpickling it (``strata produce``) loads neither the log
nor the record decoder and numba behind them. ``storage.log`` re-exports it.
"""

from __future__ import annotations

from typing import NamedTuple


class LogAppendInfo(NamedTuple):
    """What one append did (a NamedTuple: one is built per append, cheaper than a dataclass)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    batches: int
    valid_bytes: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False   # every batch was a retry of batches already appended
