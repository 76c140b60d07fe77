"""Which directory holds which partition, and what the directories are.

Owns: ``topics`` (``TopicMetadata``: the routing table and each topic's overrides, rebuilt by
asking the nodes; hosted by the coordinator actor), ``placement`` (where a new partition goes:
spread over the directories in proportion to their room) and ``dir_identity`` (the identity the
directories carry and what a start checks of it).

May call: the cluster's shared floor (``cluster.errors``, ``cluster.handles``, ``cluster.naming``,
``cluster.status``), node and storage. No other role of the cluster: transactions, the runtime
and the client build on it.
"""
