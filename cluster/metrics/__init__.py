"""What the cluster measures and exports to Prometheus.

Owns: ``sink`` (every metric's declaration in ``METRICS``, the ``MetricsSink`` the plain classes
report to, ``RayMetrics`` through ``ray.util.metrics``, ``NullMetrics``/``RecordingMetrics`` for
code run without Ray) and ``consumer_lag`` (each group's lag per partition, from a node's group
coordinator and log end offsets, and the gauges that publish it).

May call: storage and node (read-only views of a directory, its group coordinator's answers) and
nothing else of the cluster. Every other role reports through a ``MetricsSink``.
"""
