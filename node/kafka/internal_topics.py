"""Kafka's internal topics (``Topic.INTERNAL_TOPICS``): the coordinators' own logs. Metadata
reports them ``is_internal``; a client other than the admin (client id ``__admin_client``,
Kafka's ``AdminUtils.ADMIN_CLIENT_ID``) may not produce to them."""

from __future__ import annotations

from node.groups.config import OFFSETS_TOPIC

TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
ADMIN_CLIENT_ID = "__admin_client"


def is_internal(topic: str) -> bool:
    """Kafka's ``Topic.isInternal``."""
    return topic in INTERNAL_TOPICS
