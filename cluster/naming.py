"""Every name the cluster gives to Ray: actor names (role + directory, so the dashboard reads
well), the namespace, and the custom resources that pin actors to their disks and hosts.

A node actor asks for one unit of its directory's resource, declared by whoever starts the Ray
node that has the disk (``Cluster.start`` for its own head; ``ray start --resources`` otherwise).
Cleaner workers ask for a sliver of their host's resource so they run where the files are.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_NAMESPACE = "strata"
COORDINATOR_NAME = "strata-coordinator"
DIR_RESOURCE_PREFIX = "strata_dir:"
HOST_RESOURCE_PREFIX = "strata_host:"
HOST_RESOURCE_UNITS = 1000          # each worker takes one unit
WORKER_HOST_UNITS = 1
TRANSACTION_STATE_TOPIC = "__strata_transactions"   # the transaction coordinator's state log
# the topics the cluster keeps for itself (Kafka's Topic.INTERNAL_TOPICS): listed and described
# marked internal, hidden by Cluster.list_topics unless asked and by --exclude-internal
INTERNAL_TOPICS = frozenset({TRANSACTION_STATE_TOPIC})


def abs_dir(path: str | Path) -> str:
    """The one spelling of a log directory (absolute, symlinks kept), as ``LogDir`` uses."""
    return os.path.abspath(str(path))


def node_actor_name(log_dir: str | Path) -> str:
    return f"strata-node:{abs_dir(log_dir)}"


def worker_actor_name(host: str, index: int) -> str:
    return f"strata-cleaner-{index}@{host}"


def dir_resource(log_dir: str | Path) -> str:
    return f"{DIR_RESOURCE_PREFIX}{abs_dir(log_dir)}"


def host_resource(host: str) -> str:
    return f"{HOST_RESOURCE_PREFIX}{host}"


def is_internal(topic: str) -> bool:
    """Kafka's ``Topic.isInternal``: a topic of ``INTERNAL_TOPICS``."""
    return topic in INTERNAL_TOPICS
