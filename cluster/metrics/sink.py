"""The cluster's metrics, exported through ``ray.util.metrics`` (Ray adds the ``ray_`` prefix; they
appear on the Prometheus endpoint given by ``--metrics-export-port`` and in the dashboard).

Plain classes report to a ``MetricsSink``; ``RayMetrics`` is the real one (created inside each
actor), ``NullMetrics`` and ``RecordingMetrics`` serve code run without Ray and tests. Every metric
is declared once in ``METRICS`` with its kind, help text and tag keys; ops/README.md §3.6 maps each
to its Kafka JMX counterpart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

COUNTER, GAUGE = "counter", "gauge"
DIR, PART = ("directory",), ("directory", "topic", "partition")

METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "strata_appended_bytes": (COUNTER, "Bytes of record batches appended", PART),
    "strata_appended_records": (COUNTER, "Records appended", PART),
    "strata_log_size_bytes": (GAUGE, "Size of a partition log", PART),
    "strata_log_start_offset": (GAUGE, "First offset of a partition log", PART),
    "strata_log_end_offset": (GAUGE, "Next offset to be written to a partition log", PART),
    "strata_uncleaned_ratio": (GAUGE, "Share of a compacted log's bytes from its first dirty "
                                      "segment to its end, active segment included (not "
                                      "cleaner explain's dirty ratio)", PART),
    "strata_cleanable_bytes": (GAUGE, "Bytes the cleaner may clean now", PART),
    "strata_log_dir_offline": (GAUGE, "1 when the log directory is offline", DIR),
    "strata_log_dir_free_bytes": (GAUGE, "Free bytes of the directory's file system", DIR),
    "strata_recovery_remaining_logs": (GAUGE, "Logs still to load in a directory", DIR),
    "strata_recovery_remaining_segments": (GAUGE, "Segments still to load", DIR),
    "strata_cleaner_mb_per_sec": (GAUGE, "Throughput of a cleaner's last clean (MB/s)",
                                  ("cleaner",)),
    "strata_cleaner_records_per_sec": (GAUGE, "Records/s of a cleaner's last clean",
                                       ("cleaner",)),
    "strata_cleaner_buffer_utilization_percent": (GAUGE, "Offset map use of the last clean",
                                                  ("cleaner",)),
    "strata_cleaner_recopy_percent": (GAUGE, "Bytes written / read by the last clean",
                                      ("cleaner",)),
    "strata_cleaner_cleans": (COUNTER, "Cleans finished", ("cleaner",)),
    "strata_max_compaction_delay_secs": (GAUGE, "Longest overdue max.compaction.lag.ms", ()),
    "strata_max_dirty_percent": (GAUGE, "Dirtiest compacted log at the last selection", ()),
    "strata_uncleanable_partitions": (GAUGE, "Partitions the cleaner gave up on", DIR),
    "strata_uncleanable_bytes": (GAUGE, "Cleanable bytes of uncleanable partitions", DIR),
    "strata_consumer_group_lag": (GAUGE, "Log end offset of a partition minus a consumer "
                                         "group's committed offset",
                                  ("group", "topic", "partition")),
}


class MetricsSink(Protocol):
    def inc(self, name: str, value: float = 1.0, tags: Mapping[str, Any] | None = None) -> None:
        ...

    def set(self, name: str, value: float, tags: Mapping[str, Any] | None = None) -> None: ...

    def forget(self, name: str, tags: Mapping[str, Any] | None = None) -> None:
        """Stop exporting the gauge's series of ``tags`` (a group deleted, say)."""


class NullMetrics:
    def inc(self, name: str, value: float = 1.0, tags: Mapping[str, Any] | None = None) -> None:
        pass

    def set(self, name: str, value: float, tags: Mapping[str, Any] | None = None) -> None:
        pass

    def forget(self, name: str, tags: Mapping[str, Any] | None = None) -> None:
        pass


class RecordingMetrics:
    """Keeps the last value of every (name, tags) for tests; counters add up."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def inc(self, name: str, value: float = 1.0, tags: Mapping[str, Any] | None = None) -> None:
        key = _key(name, tags)
        self.values[key] = self.values.get(key, 0.0) + value

    def set(self, name: str, value: float, tags: Mapping[str, Any] | None = None) -> None:
        self.values[_key(name, tags)] = value

    def forget(self, name: str, tags: Mapping[str, Any] | None = None) -> None:
        self.values.pop(_key(name, tags), None)

    def get(self, name: str, **tags: Any) -> float | None:
        return self.values.get(_key(name, tags))


GAUGE_REFRESH_S = 5.0


class RayMetrics:
    """``ray.util.metrics`` objects, made on first use. Thread-safe.

    Ray's metrics agent drops a gauge value that was not set again within two report intervals
    (``_gauge_metric_ttl_s`` of ``ray._private.telemetry.open_telemetry_metric_recorder``: 20 s
    with the default ``metrics_report_interval_ms`` of 10 s), so a gauge set once (a cleaner's
    last throughput, a directory's recovery progress) would vanish from Prometheus and from
    every dashboard panel soon after. Every gauge's last value per tag set is therefore set
    again every ``refresh_s`` seconds by a thread of this object, for as long as the process
    lives.

    A counter is exported as a gauge named ``<name>_total`` holding this process's running total
    (Prometheus sees the same ``ray_<name>_total`` series; ``rate``/``increase`` work on it as on
    a counter, a restart being a reset): Ray's own counters send increments to the metrics agent,
    which adds them up (``set_metric_value``), so an export that is sent twice counts twice (seen
    here: one produce of 300 records counted twice in one run of tests/ops/test_prometheus.py).
    A total sent twice is still the total."""

    def __init__(self, refresh_s: float = GAUGE_REFRESH_S) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, Any] = {}
        self._gauges: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._refresh_s = refresh_s
        self._refresher: threading.Thread | None = None

    def _metric(self, name: str) -> Any:
        with self._lock:
            made = self._made.get(name)
            if made is None:
                from ray.util import metrics

                kind, help_text, tag_keys = METRICS[name]
                # a counter is exported as the gauge of its running total (see the class doc)
                made = metrics.Gauge(name + "_total" if kind == COUNTER else name,
                                     description=help_text, tag_keys=tag_keys)
                self._made[name] = made
            return made

    def inc(self, name: str, value: float = 1.0, tags: Mapping[str, Any] | None = None) -> None:
        if value > 0:
            self._record(name, tags, lambda old: (old or 0.0) + value)

    def set(self, name: str, value: float, tags: Mapping[str, Any] | None = None) -> None:
        self._record(name, tags, lambda _old: value)

    def forget(self, name: str, tags: Mapping[str, Any] | None = None) -> None:
        """No longer set the series again: Ray's agent drops it after its gauge TTL (see the
        class docstring), and Prometheus with it."""
        with self._lock:
            self._gauges.pop(_key(name, tags), None)

    def _record(self, name: str, tags: Mapping[str, Any] | None,
                update: Any) -> None:
        """The new value (``update(old value or None)``) kept and handed to Ray under one lock,
        so concurrent increments never hand Ray an older total after a newer one."""
        metric = self._metric(name)
        key = _key(name, tags)
        with self._lock:
            value = update(self._gauges.get(key))
            self._gauges[key] = value
            metric.set(value, tags=_tags(tags))
            if self._refresher is None:
                self._refresher = threading.Thread(target=self._refresh, daemon=True,
                                                   name="strata-gauge-refresh")
                self._refresher.start()

    def _refresh(self) -> None:
        while True:
            time.sleep(self._refresh_s)
            with self._lock:
                for (name, tags), value in self._gauges.items():
                    try:
                        self._made[name].set(value, tags=dict(tags) or None)
                    except Exception:  # noqa: BLE001 - a metric must never stop its process
                        pass


def _tags(tags: Mapping[str, Any] | None) -> dict[str, str] | None:
    return None if not tags else {k: str(v) for k, v in tags.items()}


def _key(name: str, tags: Mapping[str, Any] | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted((k, str(v)) for k, v in (tags or {}).items()))
