"""The byte layout of a record batch header: one definition, from which every offset is computed.

RecordBatch v2 (magic 2), big-endian, positions within the batch::

     0 baseOffset            int64
     8 batchLength           int32   bytes after this field (batch size - 12)
    12 partitionLeaderEpoch  int32   -1 = none; outside the CRC
    16 magic                 int8    2
    17 crc                   uint32  CRC32C (Castagnoli) of attributes..end
    21 attributes            int16
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordsCount          int32
    61 records

Legacy message (magic 0 and 1), the entry of an old message set::

     0 offset int64 | 8 messageSize int32 | 12 crc uint32 | 16 magic int8 | 17 attributes int8 |
    18 timestamp int64 (magic 1 only) | key length int32 + key | value length int32 + value

``V2_FIELDS`` names the fields in order with their struct codes; ``V2_OFFSETS`` maps each name to
its position (``struct.calcsize`` of the fields before it); ``BATCH_HEADER`` unpacks the whole
header in that order and ``V2_FIELD_INDEX`` gives a field's place in that tuple. The named
constants below are what ``storage.records``, ``storage.kernels`` (numba reads them as
compile-time constants), the log, the segment, the cleaner and the client use; none counts bytes
by hand.
"""

from __future__ import annotations

import struct

V2_FIELDS: tuple[tuple[str, str], ...] = (
    ("base_offset", "q"),
    ("batch_length", "i"),             # bytes after this field
    ("partition_leader_epoch", "i"),
    ("magic", "b"),
    ("crc", "I"),                      # CRC32C of attributes..end
    ("attributes", "h"),
    ("last_offset_delta", "i"),
    ("base_timestamp", "q"),           # the delete horizon when attribute bit 6 is set
    ("max_timestamp", "q"),
    ("producer_id", "q"),
    ("producer_epoch", "h"),
    ("base_sequence", "i"),
    ("records_count", "i"),
)


def _offsets(fields: tuple[tuple[str, str], ...]) -> dict[str, int]:
    codes = ""
    found = {}
    for name, code in fields:
        found[name] = struct.calcsize(">" + codes)
        codes += code
    return found


BATCH_HEADER = struct.Struct(">" + "".join(code for _, code in V2_FIELDS))
V2_OFFSETS: dict[str, int] = _offsets(V2_FIELDS)
V2_FIELD_INDEX: dict[str, int] = {name: i for i, (name, _) in enumerate(V2_FIELDS)}

HEADER_SIZE = BATCH_HEADER.size                                   # 61
BASE_OFFSET_OFFSET = V2_OFFSETS["base_offset"]                    # 0
SIZE_OFFSET = V2_OFFSETS["batch_length"]                          # 8
LOG_OVERHEAD = V2_OFFSETS["partition_leader_epoch"]               # 12: offset + length
PARTITION_LEADER_EPOCH_OFFSET = V2_OFFSETS["partition_leader_epoch"]
MAGIC_OFFSET = V2_OFFSETS["magic"]                                # 16
HEADER_SIZE_UP_TO_MAGIC = V2_OFFSETS["crc"]                       # 17
CRC_OFFSET = V2_OFFSETS["crc"]                                    # 17
ATTRIBUTES_OFFSET = V2_OFFSETS["attributes"]                      # 21
LAST_OFFSET_DELTA_OFFSET = V2_OFFSETS["last_offset_delta"]        # 23
BASE_TIMESTAMP_OFFSET = V2_OFFSETS["base_timestamp"]              # 27
MAX_TIMESTAMP_OFFSET = V2_OFFSETS["max_timestamp"]                # 35
PRODUCER_ID_OFFSET = V2_OFFSETS["producer_id"]                    # 43
PRODUCER_EPOCH_OFFSET = V2_OFFSETS["producer_epoch"]              # 51
BASE_SEQUENCE_OFFSET = V2_OFFSETS["base_sequence"]                # 53
RECORDS_COUNT_OFFSET = V2_OFFSETS["records_count"]                # 57

LEGACY_FIELDS: tuple[tuple[str, str], ...] = (
    ("offset", "q"), ("message_size", "i"), ("crc", "I"), ("magic", "b"), ("attributes", "b"),
    ("timestamp", "q"))
LEGACY_OFFSETS: dict[str, int] = _offsets(LEGACY_FIELDS)
LEGACY_CRC_OFFSET = LEGACY_OFFSETS["crc"]                         # 12
LEGACY_ATTRIBUTES_OFFSET = LEGACY_OFFSETS["attributes"]           # 17
LEGACY_TIMESTAMP_OFFSET = LEGACY_OFFSETS["timestamp"]             # 18
# crc .. value length of a message, without the offset and size fields (Kafka's LegacyRecord)
LEGACY_RECORD_OVERHEAD_V0 = struct.calcsize(">Ibbii")             # 14
LEGACY_RECORD_OVERHEAD_V1 = struct.calcsize(">Ibbqii")            # 22: + timestamp

# worst-case bytes of a v2 record besides its key, value and header bytes: length varint (5),
# attributes (1), timestampDelta varlong (10), offsetDelta (5), key length (5), value length (5),
# header count (1; a larger count is part of the header bytes a bound adds)
MAX_RECORD_OVERHEAD = 32
# worst-case bytes of one header besides its key and value: key length and value length varints
MAX_HEADER_OVERHEAD = 10
