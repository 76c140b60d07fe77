"""Kafka's ``ByteBufferAccessor`` reads over one buffer, as its generated message readers use
them: big-endian fixed widths, byte arrays and unsigned varints, failing with the message of
the Java exception the reader would throw (``"null"`` for a buffer underflow, whose Java
message is null; the array size for a negative one). Readers of Kafka's record keys and values
(``node.groups.records``, the offline decoders of ``ops.tools``) share it and choose the
exception type they raise (``error``: built from that message)."""

from __future__ import annotations

import struct

INT8, INT16, INT32, INT64 = (struct.Struct(f">{c}") for c in "bhiq")


def int32(value: int) -> int:
    """``value`` wrapped to a Java int."""
    return (value + 2**31) % 2**32 - 2**31


class BufferReader:
    """A position in ``data``. Subclasses set ``error``, the exception raised with the Java
    message."""

    __slots__ = ("data", "pos")
    error: type[Exception] = ValueError

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def fixed(self, codec: struct.Struct) -> int:
        if self.remaining < codec.size:
            raise self.error("null")                          # BufferUnderflowException
        (value,) = codec.unpack_from(self.data, self.pos)
        self.pos += codec.size
        return int(value)

    def array(self, size: int) -> bytes:
        if size > self.remaining:
            raise self.error(f"Error reading byte array of {size} byte(s): only "
                             f"{self.remaining} byte(s) available")
        if size < 0:
            raise self.error(str(size))                       # NegativeArraySizeException
        raw = self.data[self.pos:self.pos + size]
        self.pos += size
        return bytes(raw)

    def unsigned_varint(self) -> int:
        """Kafka's ``ByteUtils.readUnsignedVarint``: at most 5 bytes, as a Java int."""
        result = 0
        for shift in (0, 7, 14, 21):
            byte = self.fixed(INT8) & 0xFF
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return int32(result)
        byte = self.fixed(INT8) & 0xFF
        result = (result | (byte << 28)) & 0xFFFFFFFF
        if byte >= 0x80:
            raise self.error("Varint is too long, the most significant bit in the 5th byte "
                             f"is set, converted value: {result:x}")
        return int32(result)
