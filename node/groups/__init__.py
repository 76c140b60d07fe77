"""Kafka's group coordinator for the classic consumer-group protocol, for one log directory.

Owns the consumer groups and committed offsets of the ``__consumer_offsets`` partitions the
directory holds: membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers), the
committed offsets, and the records that make both durable in the partition, in Kafka's exact
formats. A group lives in partition ``abs(java_hash(group_id)) % offsets.topic.num.partitions``;
the broker that holds that partition is its coordinator.

Speaks no wire protocol: ``node.kafka`` translates requests into the plain messages of
``node.groups.messages`` and back. May call ``storage`` and ``node``; never ``node.kafka`` or
``cluster``.
"""
