"""``CleanerStats``: what one clean read, wrote and how long it took, and Kafka's stats log line.

``CleanerStats`` is the mutable accumulator the cleaner updates while it works (Kafka's class of the
same name, same fields); ``snapshot()`` freezes it into ``CleanerStatsSnapshot``, plain values that
pickle through Ray and become a row with ``dataclasses.asdict``. ``PreCleanStats`` is what the
manager saw while choosing the log (Kafka's ``PreCleanStats``).

The log line is Kafka's ``recordStats`` message, character for character, including Java's
``%,.1f`` (thousands separators, half-up rounding) and its ``Infinity``/``NaN`` for a zero
duration, so tools that parse Kafka's cleaner log parse ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from storage.clock import SYSTEM_CLOCK, Clock

_MB = 1024 * 1024


@dataclass(frozen=True)
class CleanerStatsSnapshot:
    """One clean's statistics. Times are wall-clock ms; ``-1`` when that phase did not finish."""

    start_time: int
    map_complete_time: int
    end_time: int
    bytes_read: int
    bytes_written: int
    map_bytes_read: int
    map_messages_read: int
    messages_read: int
    invalid_messages_read: int
    messages_written: int
    buffer_utilization: float

    @property
    def elapsed_secs(self) -> float:
        return (self.end_time - self.start_time) / 1000.0

    @property
    def elapsed_index_secs(self) -> float:
        return (self.map_complete_time - self.start_time) / 1000.0

    def log_line(self, thread_id: int, log_name: str, first_dirty: int, end_offset: int) -> str:
        """Kafka's INFO message after a clean (``LogCleaner.CleanerThread.recordStats``)."""
        elapsed = self.elapsed_secs
        index = self.elapsed_index_secs
        clean = elapsed - index
        read_mb = self.bytes_read / _MB
        map_mb = self.map_bytes_read / _MB
        return (
            f"\n\tLog cleaner thread {thread_id} cleaned log {log_name} "
            f"(dirty section = [{first_dirty}, {end_offset}])\n"
            f"\t{_f(read_mb, True)} MB of log processed in {_f(elapsed, True)} seconds "
            f"({_f(_div(self.bytes_read, elapsed) / _MB, True)} MB/sec).\n"
            f"\tIndexed {_f(map_mb, True)} MB in {_f(index)} seconds "
            f"({_f(_div(map_mb, index), True)} Mb/sec, {_f(_div(100 * index, elapsed))}% of total time)\n"
            f"\tBuffer utilization: {_f(100 * self.buffer_utilization)}%\n"
            f"\tCleaned {_f(read_mb, True)} MB in {_f(clean)} seconds "
            f"({_f(_div(read_mb, clean), True)} Mb/sec, {_f(_div(100 * clean, elapsed))}% of total time)\n"
            f"\tStart size: {_f(read_mb, True)} MB ({self.messages_read:,} messages)\n"
            f"\tEnd size: {_f(self.bytes_written / _MB, True)} MB ({self.messages_written:,} messages)\n"
            f"\t{_f(100.0 * (1.0 - _div(self.bytes_written, self.bytes_read)))}% size reduction "
            f"({_f(100.0 * (1.0 - _div(self.messages_written, self.messages_read)))}% fewer messages)\n"
        )

    def invalid_messages_warning(self) -> str | None:
        """Kafka's WARN line when unkeyed records were dropped; None when there were none."""
        if self.invalid_messages_read <= 0:
            return None
        return f"\tFound {self.invalid_messages_read} invalid messages during compaction."


class CleanerStats:
    """The accumulator one clean fills in. Not thread-safe: owned by the cleaner running it."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self.start_time = clock.milliseconds()
        self.map_complete_time = -1
        self.end_time = -1
        self.bytes_read = 0
        self.bytes_written = 0
        self.map_bytes_read = 0
        self.map_messages_read = 0
        self.messages_read = 0
        self.invalid_messages_read = 0
        self.messages_written = 0
        self.buffer_utilization = 0.0

    def read_messages(self, messages: int, size: int) -> None:
        self.messages_read += messages
        self.bytes_read += size

    def invalid_message(self) -> None:
        self.invalid_messages_read += 1

    def invalid_messages(self, count: int) -> None:
        self.invalid_messages_read += count

    def recopy_messages(self, messages: int, size: int) -> None:
        self.messages_written += messages
        self.bytes_written += size

    def index_messages_read(self, messages: int) -> None:
        self.map_messages_read += messages

    def index_bytes_read(self, size: int) -> None:
        self.map_bytes_read += size

    def index_done(self) -> None:
        self.map_complete_time = self._clock.milliseconds()

    def all_done(self) -> None:
        self.end_time = self._clock.milliseconds()

    @property
    def elapsed_secs(self) -> float:
        return (self.end_time - self.start_time) / 1000.0

    @property
    def elapsed_index_secs(self) -> float:
        return (self.map_complete_time - self.start_time) / 1000.0

    def snapshot(self) -> CleanerStatsSnapshot:
        return CleanerStatsSnapshot(
            start_time=self.start_time, map_complete_time=self.map_complete_time,
            end_time=self.end_time, bytes_read=self.bytes_read, bytes_written=self.bytes_written,
            map_bytes_read=self.map_bytes_read, map_messages_read=self.map_messages_read,
            messages_read=self.messages_read, invalid_messages_read=self.invalid_messages_read,
            messages_written=self.messages_written, buffer_utilization=self.buffer_utilization)

    def log_line(self, thread_id: int, log_name: str, first_dirty: int, end_offset: int) -> str:
        return self.snapshot().log_line(thread_id, log_name, first_dirty, end_offset)

    def invalid_messages_warning(self) -> str | None:
        return self.snapshot().invalid_messages_warning()


@dataclass(frozen=True)
class PreCleanStats:
    """What one selection saw: logs eligible for cleaning, and how many of them were overdue
    (``max.compaction.lag.ms`` passed) and by how much at most."""

    cleanable_partitions: int = 0
    delayed_partitions: int = 0
    max_compaction_delay_ms: int = 0

    def log_line(self) -> str | None:
        """Kafka's extra INFO line, only when some partition was overdue."""
        if self.delayed_partitions <= 0:
            return None
        return (f"\tCleanable partitions: {self.cleanable_partitions}, Delayed partitions: "
                f"{self.delayed_partitions}, max delay: {self.max_compaction_delay_ms}")


def _div(a: float, b: float) -> float:
    """Java's double division: x/0 is +-Infinity, 0/0 is NaN."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _f(value: float, grouping: bool = False) -> str:
    """Java's ``%.1f`` (or ``%,.1f``): half-up rounding of the shortest decimal form."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    rounded = Decimal(repr(float(value))).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    return format(rounded, ",.1f" if grouping else ".1f")
