"""``__consumer_offsets`` created as Kafka's ``AutoTopicCreationManager`` creates it, whether
FindCoordinator or a Metadata request with auto-creation asks first:
``offsets.topic.num.partitions`` partitions, ``cleanup.policy=compact``,
``segment.bytes=offsets.topic.segment.bytes``, through the ``BrokerView`` (in a cluster, placed
over every directory); then the partitions this directory got are loaded."""

from __future__ import annotations

import logging
import threading

from node.groups.config import OFFSETS_TOPIC
from node.kafka.context import ServedDir
from node.kafka.errors import TopicAlreadyExistsError

log = logging.getLogger(__name__)

_CREATING = threading.Lock()     # one creation of the offsets topic at a time in this process


def create_offsets_topic(served: ServedDir) -> str | None:
    """Create ``__consumer_offsets`` unless it exists, and load the partitions this directory
    got; None when the topic exists now, else why not (logged)."""
    config = served.config.group_coordinator
    with _CREATING:
        if served.view.partition_count(OFFSETS_TOPIC) is not None:
            return None
        try:
            served.view.create_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.offsets_topic_segment_bytes)})
        except TopicAlreadyExistsError:
            pass                                # another broker's, just now
        except Exception as err:  # noqa: BLE001 - any failure: no coordinator yet, clients retry
            log.warning("cannot create %s", OFFSETS_TOPIC, exc_info=True)
            return f"{OFFSETS_TOPIC} cannot be created: {err}"
        log.info("created %s with %d partitions", OFFSETS_TOPIC,
                 config.offsets_topic_num_partitions)
    served.groups.sync()
    return None
