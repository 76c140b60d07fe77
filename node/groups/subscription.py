"""The topics of a consumer's subscription, read from the ``consumer`` protocol's member metadata
(Kafka's ``ConsumerProtocolSubscription``), as the coordinator reads it: through the version 0
prefix that every later version keeps.

Layout (big-endian)::

    Version: int16 | Topics: int32 count, then per topic: int16 length + UTF-8 name | ...

Everything after the topics (user data, owned partitions, rack) is ignored.
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"

INT16 = struct.Struct(">h")   # version; a topic name's length
INT32 = struct.Struct(">i")   # the topic count


class SubscriptionFormatError(ValueError):
    """The metadata is not a consumer protocol subscription (too short, negative counts,
    names that are not UTF-8)."""


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """The topics of one member's subscription; ``SubscriptionFormatError`` if unreadable."""
    try:
        position = INT16.size
        (count,) = INT32.unpack_from(metadata, position)
        position += INT32.size
        if count < 0:
            raise SubscriptionFormatError(f"negative topic count {count}")
        topics = set()
        for _ in range(count):
            (length,) = INT16.unpack_from(metadata, position)
            position += INT16.size
            if length < 0 or position + length > len(metadata):
                raise SubscriptionFormatError(f"topic name of length {length} at {position}")
            topics.add(metadata[position:position + length].decode("utf-8"))
            position += length
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError) as err:
        raise SubscriptionFormatError(f"not a consumer subscription: {err}") from err


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    """A version-``version`` subscription naming ``topics`` with no user data (tests, tools)."""
    out = bytearray(INT16.pack(version) + INT32.pack(len(topics)))
    for topic in topics:
        name = topic.encode("utf-8")
        out += INT16.pack(len(name)) + name
    out += INT32.pack(-1)   # null user data
    return bytes(out)
